"""Subtitles that read like subtitles: cues leave the screen in silences, break at pauses, and rarely end on a
function word. Synthetic words for the rules; the demo model on espeak-ng speech with known pauses for the
figures."""

from __future__ import annotations

import pytest

from inference.contract import Transcript, Word
from inference.formats import FUNCTION_WORDS, _bare, build_cues
from tests.conftest import REPO_ROOT
from tests.long_speech import espeak_available, recording


def words(*spec: tuple[str, float, float, float]) -> list[Word]:
    """(text, start, end as the reference gives it, voiced end)."""
    return [Word(text, start, end, None, voiced) for text, start, end, voiced in spec]


def test_a_cue_ends_where_its_last_word_s_sound_ends_and_a_pause_starts_a_new_one() -> None:
    spoken = words(
        ("in", 0.0, 0.3, 0.2),
        ("the", 0.3, 0.5, 0.45),
        ("garden", 0.5, 3.2, 1.0),
        ("there", 3.2, 3.5, 3.4),
        ("were", 3.5, 3.8, 3.7),
    )
    cues = build_cues(Transcript("in the garden there were", words=spoken))
    assert [(c.start_s, c.end_s, c.lines) for c in cues] == [
        (0.0, 1.0, ("in the garden",)),  # not through the 2.2 s of silence after "garden"
        (3.2, 3.7, ("there were",)),
    ]


def test_a_forced_break_moves_back_off_a_function_word() -> None:
    text = "we walked along the river to the old mill and then we sat on the bank of the river for a while"
    spoken = [Word(w, i * 0.3, i * 0.3 + 0.3, None, i * 0.3 + 0.25) for i, w in enumerate(text.split())]
    cues = build_cues(Transcript(text, words=spoken), max_line_chars=20, max_lines=1)
    assert " ".join(" ".join(c.lines) for c in cues) == text
    assert all(len(line) <= 20 for c in cues for line in c.lines)
    endings = [_bare(c.lines[-1].split()[-1]) for c in cues]
    assert sum(e in FUNCTION_WORDS for e in endings[:-1]) == 0, endings


@pytest.mark.skipif(not espeak_available(), reason="needs espeak-ng for speech")
def test_on_real_speech_no_cue_spans_a_long_pause_and_few_end_on_a_function_word() -> None:
    from inference.engine import load_engine

    talk = recording(90.0, seed=51, pause_s=(0.3, 2.2))
    with load_engine(REPO_ROOT / "resources" / "demo_model", threads=2) as engine:  # type: ignore[attr-defined]
        transcript = engine.transcribe(talk.audio, audio_chunk_mode="vad")
    cues = build_cues(transcript)
    pauses = [
        (a[2], b[1]) for a, b in zip(talk.sentences, talk.sentences[1:], strict=False) if b[1] - a[2] >= 1.0
    ]
    assert len(pauses) >= 10 and len(cues) >= 15
    through = [c for c in cues for start, end in pauses if c.start_s < start and c.end_s > end]
    assert through == []  # the old cues ran through 27 of 36 such pauses on a 3-minute file
    on_function_word = [c for c in cues if _bare(c.lines[-1].split()[-1]) in FUNCTION_WORDS]
    assert len(on_function_word) <= 0.1 * len(cues)
    assert all(
        c.end_s - c.start_s <= 7.0 and len(c.lines) <= 2 and max(map(len, c.lines)) <= 42 for c in cues
    )
