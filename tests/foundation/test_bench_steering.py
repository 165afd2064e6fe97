"""The live bench's steered answer (tests/bench/bench_r2t2_live.py): what a model would say after the prefix the
LSP rollback leaves, so the bench decodes what speech would make it decode."""

from __future__ import annotations

from tests.bench.bench_r2t2_live import HEADER, Script, scripted_answer

WORDS_PER_SECOND = 2.0


def script() -> Script:
    return Script(WORDS_PER_SECOND, 30.0)


def words(first: int, last: int) -> str:
    return " ".join(script().text.split()[first:last])


def test_a_new_answer_starts_with_the_language_header() -> None:
    assert scripted_answer(script(), "", 0.0, 1.5, auto=True) == HEADER + words(0, 3)


def test_a_prefix_cut_inside_the_header_is_continued_with_the_rest_of_the_header() -> None:
    for cut in ("language", "language English", HEADER[:-1]):
        assert scripted_answer(script(), cut, 0.0, 1.5, auto=True) == HEADER[len(cut) :] + words(0, 3)


def test_a_prefix_past_the_header_is_continued_mid_word() -> None:
    first = words(0, 1)
    prefix = HEADER + first[:2]
    assert scripted_answer(script(), prefix, 0.0, 1.5, auto=True) == first[2:] + " " + words(1, 3)


def test_a_forced_language_answer_has_no_header() -> None:
    assert scripted_answer(script(), "", 0.0, 1.5, auto=False) == words(0, 3)
    assert scripted_answer(script(), words(0, 1), 0.0, 1.5, auto=False) == " " + words(1, 3)


def test_nothing_is_said_before_the_first_word_is_spoken() -> None:
    assert scripted_answer(script(), "", 0.0, 0.2, auto=False) == ""
    assert scripted_answer(script(), "", 0.0, 0.2, auto=True) == HEADER
