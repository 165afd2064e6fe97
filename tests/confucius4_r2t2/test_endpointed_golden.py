"""Endpointed streams decode and publish exactly what the recording says: same decodes (audio and text prefix)
in the same order, same events in the same order, same transcript, whatever the chunk and push sizes
(docs/families/confucius4_r2t2.md §7.5).

The recording pins two schedule changes. A segment's flush moved to the next push when the push had already
decoded: that changed no decode, event or text (the file recorded before it passed unchanged after it). Then a
segment's first decode moved to the chunk past its lead-in, and two chunks past the previous segment's end:
that removed the lead-in's own decode, so the file was recorded again on that commit (``python
tests/confucius4_r2t2/test_endpointed_golden.py --record``). The events are those of ``push`` then ``flush``
(the worker calls it before ``finish``).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from test_endpointing import LevelVad, SpeechCountingDecoder, frames  # noqa: E402

from inference.contract import Flushable, event_to_json  # noqa: E402
from inference.families.confucius4_r2t2.endpointing import EndpointedStream, EndpointOptions  # noqa: E402
from inference.families.confucius4_r2t2.lsp import StreamOptions  # noqa: E402

GOLDEN = Path(__file__).resolve().parents[1] / "fixtures" / "confucius4_r2t2" / "endpointed_golden.json"
# (chunk ms, samples per push): pushes of one chunk (the live front ends), shorter and longer ones.
CASES = [(320.0, 5120), (1000.0, 16000), (320.0, 1536), (1000.0, 4000), (640.0, 25000)]


class LoggingDecoder(SpeechCountingDecoder):
    """Logs every decode (audio length, text prefix) in one list shared by all of a stream's decoders."""

    def __init__(self, log: list[list[Any]]) -> None:
        super().__init__()
        self.log = log

    def generate(self, audio: np.ndarray, prefix: str, max_tokens: int) -> str:
        self.log.append([int(audio.size), prefix])
        return super().generate(audio, prefix, max_tokens)


def utterances() -> np.ndarray:
    """90 s of speech runs and pauses: quick restarts after 7-12 frames of silence, long pauses, short bursts
    and runs past ``max_segment_seconds`` (4 s here)."""
    rng = np.random.default_rng(43)
    runs: list[tuple[int, bool]] = [(20, False)]
    while sum(n for n, _ in runs) < 90 * 16000 // 512:
        runs.append((int(rng.choice([2, 20, 60, 100, 170])) + int(rng.integers(0, 15)), True))
        runs.append((int(rng.choice([7, 9, 12, 30, 90])) + int(rng.integers(0, 4)), False))
    runs[-1] = (3, False)  # the stream ends right after a speech end
    return frames(*runs)


def run_case(chunk_ms: float, step: int) -> dict[str, Any]:
    log: list[list[Any]] = []
    stream = EndpointedStream(
        lambda: LoggingDecoder(log),
        StreamOptions(chunk_size_ms=chunk_ms),
        EndpointOptions(max_segment_seconds=4.0),
        LevelVad(),
        "English",
    )
    audio = utterances()
    events = []
    for start in range(0, audio.size, step):
        events += stream.push(audio[start : start + step])
    if isinstance(stream, Flushable):
        events += stream.flush()
    transcript = stream.finish()
    return {
        "decodes": log,
        "events": [event_to_json(e) for e in events],
        "text": transcript.text,
        "segments": [[s.text, s.start_s, s.end_s] for s in transcript.segments],
    }


def case_key(chunk_ms: float, step: int) -> str:
    return f"{chunk_ms:.0f} ms chunks, {step}-sample pushes"


@pytest.mark.parametrize(("chunk_ms", "step"), CASES)
def test_decodes_events_and_text_are_those_recorded(chunk_ms, step):
    expected = json.loads(GOLDEN.read_text())[case_key(chunk_ms, step)]
    got = json.loads(json.dumps(run_case(chunk_ms, step)))  # tuples and floats as JSON has them
    assert got["text"] == expected["text"] and got["segments"] == expected["segments"]
    # (a push longer than a chunk is a backlog, decoded once: catch-up, docs/families/confucius4_r2t2.md §7.2)
    assert got["decodes"] == expected["decodes"]
    assert got["events"] == expected["events"]


def test_the_golden_streams_hold_the_cases_the_flush_moves_in():
    """In the recorded streams flushes do wait for the next push, speech resumes right after an end and
    segments are cut at ``max_segment_seconds``, so a drift in any of them fails the test above."""
    recorded = json.loads(GOLDEN.read_text())[case_key(1000.0, 16000)]
    ends = [e for e in recorded["events"] if e["type"] == "speech_end"]
    assert any(round(e["end_s"] - e["start_s"], 3) == 4.0 for e in ends)  # a cut at max_segment_seconds
    assert min(b["start_s"] - a["end_s"] for a, b in zip(ends, ends[1:], strict=False)) < 0.5
    stream = EndpointedStream(
        SpeechCountingDecoder,
        StreamOptions(chunk_size_ms=1000.0),
        EndpointOptions(max_segment_seconds=4.0),
        LevelVad(),
        "English",
    )
    audio = utterances()
    waited = 0
    for start in range(0, audio.size, 16000):
        stream.push(audio[start : start + 16000])
        waited += bool(stream.resume_point().state.get("ended"))
    assert waited >= 10  # 18 of the 33 segments at this writing


if __name__ == "__main__" and sys.argv[1:] == ["--record"]:
    GOLDEN.write_text(json.dumps({case_key(c, s): run_case(c, s) for c, s in CASES}, indent=0) + "\n")
