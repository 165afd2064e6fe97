"""The live bench's steered answer (tests/bench/bench_r2t2_live.py): what a model would say after the prefix the
LSP rollback leaves, so the bench decodes what speech would make it decode."""

from __future__ import annotations

from pathlib import Path

from tokenizers import Tokenizer

from tests.bench.bench_r2t2_live import (
    HEADER,
    QWEN_WORDS_BY_TOKENS,
    WORDS_BY_TOKENS,
    Script,
    script_cycle,
    scripted_answer,
)

FIXTURE_TOKENIZER = (
    Path(__file__).resolve().parents[1] / "fixtures" / "confucius4_r2t2" / "checkpoint_hf" / "tokenizer.json"
)

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


def test_the_script_words_cost_the_tokens_qwen_spends_on_speech() -> None:
    tokenizer = Tokenizer.from_file(str(FIXTURE_TOKENIZER))
    for tokens, pool in WORDS_BY_TOKENS.items():
        for word in pool:
            assert len(tokenizer.encode(" " + word, add_special_tokens=False).ids) == tokens, word
    cycle = script_cycle()
    assert len(cycle) == sum(QWEN_WORDS_BY_TOKENS.values())
    cost = len(tokenizer.encode(" " + " ".join(cycle), add_special_tokens=False).ids)
    assert cost == sum(tokens * n for tokens, n in QWEN_WORDS_BY_TOKENS.items())


def test_the_script_spreads_its_long_words() -> None:
    # Shuffled, not sorted: a run of two-token words would be a burst of decoding steps no speech makes.
    tokens = [next(t for t, pool in WORDS_BY_TOKENS.items() if word in pool) for word in script_cycle()]
    longest_run = max(len(run) for run in "".join("x" if t > 1 else "." for t in tokens).split("."))
    assert longest_run <= 4


def test_a_prefix_cut_inside_the_first_word_is_continued_from_that_word() -> None:
    # A short cut ("n" of "nature") also occurs in later words ("and"): the answer goes on from the cut itself.
    text = script().text.split()
    for first in range(len(text) - 4):
        fragment, later = text[first][:1], " ".join(text[first + 1 : first + 4])
        if fragment in later:
            break
    start_s = first / WORDS_PER_SECOND
    end_s = (first + 4) / WORDS_PER_SECOND
    prefix = HEADER + fragment
    expected = text[first][1:] + " " + later
    assert scripted_answer(script(), prefix, start_s, end_s, auto=True) == expected
