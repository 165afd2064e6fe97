"""The speech gate's file format and its word filter (inference/families/parakeet_tdt/speech_gate.py), without a model."""

from __future__ import annotations

from pathlib import Path

import pytest

from inference.audio.spans import Span, SpeechWindow
from inference.errors import ModelError
from inference.families.parakeet_tdt.decoder import TokenStep
from inference.families.parakeet_tdt.speech_gate import (
    SpeechGate,
    parse_speech_gate,
    tokens_near_speech,
    tokens_of_window,
)

FILE = Path("/models/demo/captioneer_model.json")
FRAME = 1280  # samples per encoder frame (80 ms)
WORD_START = {1, 2, 3, 4}  # token ids whose piece starts a word; 9 continues one


def near(tokens: list[TokenStep], speech: list[Span], margin: int) -> list[int]:
    kept = tokens_near_speech(tokens, WORD_START.__contains__, speech, FRAME, margin)
    return [t.token_id for t in kept]


def test_words_outside_speech_are_dropped_whole() -> None:
    tokens = [
        TokenStep(1, 0, 1),  # word 1: frames 0..2, before the speech
        TokenStep(9, 1, 1),
        TokenStep(2, 21, 2),  # word 2: frames 21..23, inside
        TokenStep(3, 35, 1),  # word 3: frames 35..37, after
        TokenStep(9, 36, 0),  # duration 0 still counts one frame
    ]
    speech = [Span(20 * FRAME, 25 * FRAME)]
    assert near(tokens, speech, 0) == [2]
    # A margin that reaches word 3's first frame keeps all of it, continuation token included.
    assert near(tokens, speech, 10 * FRAME + 1) == [2, 3, 9]
    assert near(tokens, speech, 10 * FRAME) == [2]  # touching is not overlapping
    assert near(tokens, [], 100 * FRAME) == []


def test_a_word_that_straddles_the_speech_edge_is_kept() -> None:
    tokens = [TokenStep(1, 5, 1), TokenStep(9, 6, 3)]  # frames 5..9
    assert near(tokens, [Span(8 * FRAME, 9 * FRAME)], 0) == [1, 9]


def test_tokens_before_the_first_word_start_belong_to_the_first_word() -> None:
    tokens = [TokenStep(9, 0, 1), TokenStep(1, 1, 1), TokenStep(2, 40, 1)]
    assert near(tokens, [Span(0, 3 * FRAME)], 0) == [9, 1]


def test_a_window_keeps_only_its_own_words_near_its_speech() -> None:
    # The window starts at frame 10 of the clip; token frames count from there.
    window = SpeechWindow(Span(10 * FRAME, 40 * FRAME), Span(0, 28 * FRAME), Span(15 * FRAME, 25 * FRAME))
    tokens = [
        TokenStep(1, 0, 1),  # clip frames 10..11: in the zone but beyond the 3-frame margin
        TokenStep(2, 6, 2),  # clip frames 16..18: speech
        TokenStep(3, 15, 1),  # clip frames 25..26: within the margin, midpoint in the zone
        TokenStep(4, 17, 3),  # clip frames 27..30: within the margin, but its midpoint is the next zone's
    ]
    kept = tokens_of_window(tokens, WORD_START.__contains__, window, FRAME, 3 * FRAME)
    assert [t.token_id for t in kept] == [2, 3]


def test_gate_files_old_and_new() -> None:
    assert parse_speech_gate(None, FILE) is None
    assert parse_speech_gate({"max_span_sec": 20}, FILE) == SpeechGate("spans", max_span_sec=20.0)
    assert parse_speech_gate({"method": "words", "margin_sec": 0.5}, FILE) == SpeechGate(
        "words", margin_sec=0.5
    )


@pytest.mark.parametrize(
    ("gate", "named"),
    [
        ({"max_span_sec": "long"}, "max_span_sec"),
        ({"max_span_sec": 0.5}, "max_span_sec"),
        ({"method": "words", "margin_sec": True}, "margin_sec"),
        ({"method": "words", "margin_sec": 1e9}, "margin_sec"),
        ({"method": "energy"}, "method"),
        ({"method": "words", "margin": 1}, "margin"),
        ([1, 2], "speech_gate"),
    ],
)
def test_a_bad_gate_is_refused_naming_the_file_and_field(gate: object, named: str) -> None:
    with pytest.raises(ModelError) as refused:
        parse_speech_gate(gate, FILE)
    assert str(FILE) in refused.value.message and named in refused.value.message
    assert refused.value.fix
