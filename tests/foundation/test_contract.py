"""Every contract event and result survives a JSON round trip; deltas add up to committed text."""

from __future__ import annotations

import json

import pytest

from inference.contract import (
    Delta,
    Done,
    ErrorEvent,
    Progress,
    Segment,
    Snapshot,
    SpeechEnd,
    Stats,
    Timing,
    Transcript,
    Word,
    committed_text,
    event_from_json,
    event_to_json,
)
from inference.errors import UsageError

TRANSCRIPT = Transcript(
    text="hello world",
    language="English",
    words=[Word("hello", 0.1, 0.4, 0.9), Word("world", 0.5, 0.9)],
    segments=[Segment("hello world", 0.0, 1.0, (Word("hello", 0.1, 0.4, 0.9), Word("world", 0.5, 0.9)))],
    token_ids=[5, 6],
    timing=Timing(1.0, 0.25),
)
EVENTS = [
    Delta("hello", 3, 0.0, 1.25, "English"),
    Snapshot(" wor", 4, 1.25, None),
    SpeechEnd(3, 0.0, 1.25, "hello", "en"),
    Done(TRANSCRIPT),
    ErrorEvent("worker_restarted", "the worker died", "nothing to do", fatal=False),
    Progress("load", 0.5, 1.0, "converting"),
    Stats(10.0, 2.5, 0.64, 0.012),
]


@pytest.mark.parametrize("event", EVENTS, ids=lambda e: e.type)
def test_events_round_trip_through_json(event: object) -> None:
    wire = json.loads(json.dumps(event_to_json(event)))  # type: ignore[arg-type]
    assert wire["type"] == event.type  # type: ignore[attr-defined]
    assert event_from_json(wire) == event


def test_done_is_flat_for_scripts() -> None:
    wire = event_to_json(Done(TRANSCRIPT))
    assert wire["text"] == "hello world" and wire["segments"][0]["words"][1] == {
        "word": "world",
        "start": 0.5,
        "end": 0.9,
    }


def test_transcript_round_trip_keeps_segments_words_and_timing() -> None:
    assert Transcript.from_json(json.loads(json.dumps(TRANSCRIPT.to_json()))) == TRANSCRIPT


def test_unknown_event_type_is_refused() -> None:
    with pytest.raises(UsageError, match="unknown event type 'caption'"):
        event_from_json({"type": "caption", "text": "x"})


def test_committed_text_is_the_concatenation_of_deltas() -> None:
    assert committed_text([Delta("one", 0), Snapshot("tw", 1), Delta(" two", 1), Stats(1, 1)]) == "one two"
