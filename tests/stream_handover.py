"""Streams audio through a resumable stream that is replaced at given moments, exactly as the client replaces a
stream whose worker died: the new stream resumes from the old one's last ``ResumePoint`` (context audio and
state), the audio from there on is pushed again, and ``StreamContinuity`` joins the two streams' events."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from inference.continuity import StreamContinuity
from inference.contract import SAMPLE_RATE, Delta, Resumable, SpeechEnd, StreamEvent, Transcript


@dataclass
class HandoverRun:
    final: Transcript
    events: list[StreamEvent] = field(default_factory=list)
    streams: int = 1

    @property
    def committed(self) -> str:
        return "".join(e.text for e in self.events if isinstance(e, Delta))

    @property
    def speech_ends(self) -> list[SpeechEnd]:
        return [e for e in self.events if isinstance(e, SpeechEnd)]


def run_with_handovers(
    make: Callable[[], Resumable], audio: np.ndarray, cuts: Sequence[int], step: int
) -> HandoverRun:
    """Push ``audio`` in ``step``-sample chunks; after the push that reaches each of ``cuts`` (absolute samples),
    replace the stream by a fresh one resumed from its resume point."""
    continuity = StreamContinuity()
    events: list[StreamEvent] = []
    stream = make()
    base = 0  # absolute sample of the current stream's sample 0
    position = 0
    streams = 1
    pending_cuts = sorted(cuts)
    while position < audio.size:
        chunk = audio[position : position + step]
        events += [continuity.adopt(e) for e in stream.push(chunk)]  # type: ignore[attr-defined]
        position += chunk.size
        if pending_cuts and position >= pending_cuts[0]:
            pending_cuts.pop(0)
            point = stream.resume_point()
            start = base + point.start_sample
            continuity.worker_replaced(start / SAMPLE_RATE, point.continues_segment, point.overlap_text)
            stream = make()
            stream.resume(audio[start : start + point.context_samples], point.state)
            streams += 1
            base = start
            replay = audio[start + point.context_samples : position]
            for at in range(0, replay.size, step):
                events += [continuity.adopt(e) for e in stream.push(replay[at : at + step])]  # type: ignore[attr-defined]
    final = continuity.final(stream.finish())  # type: ignore[attr-defined]
    return HandoverRun(final, events, streams)
