"""Confucius4-R2T2's offline pass over a file whose audio arrives in blocks (``contract.OfflineJob``): its 30 s
spans are consecutive and do not overlap, so each is decoded as soon as it is full, and only the span being
filled is held. One pass; the transcript is ``R2T2Engine.transcribe``'s (tests/confucius4_r2t2/test_engine.py).
"""

from __future__ import annotations

import time
from typing import Any, Protocol

import numpy as np

from inference.audio.spans import seconds_to_samples
from inference.contract import SAMPLE_RATE, JobControl, Transcript
from inference.errors import UsageError
from inference.families.confucius4_r2t2.spans import OFFLINE_SPAN_SECONDS
from inference.offline_jobs import ArrivingAudio


class SpanEngine(Protocol):
    """What the job needs of ``R2T2Engine`` (spans are its ``SpanResult``)."""

    def offline_request(self, request_options: dict[str, Any]) -> tuple[str, int, str]: ...

    def transcribe_span(
        self, samples: np.ndarray, language: str, max_tokens: int, context: str, offset_s: float = 0.0
    ) -> Any: ...

    def spans_transcript(self, spans: list[Any], total_s: float, wall_s: float) -> Transcript: ...


class R2T2OfflineJob:
    passes = 1

    def __init__(self, engine: SpanEngine, request_options: dict[str, Any], control: JobControl) -> None:
        self.engine = engine
        self.control = control
        self.language, self.max_tokens, self.context = engine.offline_request(request_options)
        self.span_samples = seconds_to_samples(OFFLINE_SPAN_SECONDS, SAMPLE_RATE)
        self._audio = ArrivingAudio()
        self._spans: list[Any] = []
        self._ended = False
        self._started = time.perf_counter()

    def feed(self, pcm: np.ndarray) -> None:
        if self._ended:
            raise UsageError("audio after the end of a job's only pass")
        if self.control.cancel is not None:
            self.control.cancel.check()
        self._audio.append(pcm)
        while self._audio.end - self._audio.start >= self.span_samples:
            self._decode(self._audio.start + self.span_samples)

    def end_pass(self) -> None:
        self._ended = True
        if self._audio.end > self._audio.start:
            self._decode(self._audio.end)

    def finish(self) -> Transcript:
        if not self._ended:
            raise UsageError("a job finished before its audio ended")
        total_s = self._audio.end / SAMPLE_RATE
        self.control.step(total_s, total_s)
        return self.engine.spans_transcript(self._spans, total_s, time.perf_counter() - self._started)

    def _decode(self, end: int) -> None:
        start = self._audio.start
        self.control.step(start / SAMPLE_RATE, None)  # the length is known only at the end
        samples = self._audio.read(start, end)
        self._spans.append(
            self.engine.transcribe_span(
                samples, self.language, self.max_tokens, self.context, start / SAMPLE_RATE
            )
        )
        self._audio.forget_before(end)
