"""Confucius4-R2T2's offline pass over a file whose audio arrives in blocks (``contract.OfflineJob``): its 30 s
spans are consecutive and do not overlap, so ``offline_jobs.ConsecutiveWindowsJob`` decodes each as soon as it is
full, holding only the span being filled. One pass; the transcript is ``R2T2Engine.transcribe``'s
(tests/confucius4_r2t2/test_engine.py).
"""

from __future__ import annotations

from typing import Any, Protocol

import numpy as np

from inference.audio.spans import seconds_to_samples
from inference.contract import SAMPLE_RATE, Transcript
from inference.families.confucius4_r2t2.spans import OFFLINE_SPAN_SECONDS


class SpanEngine(Protocol):
    """What the job needs of ``R2T2Engine`` (spans are its ``SpanResult``)."""

    def offline_request(self, request_options: dict[str, Any]) -> tuple[str, int, str]: ...

    def transcribe_span(
        self, samples: np.ndarray, language: str, max_tokens: int, context: str, offset_s: float = 0.0
    ) -> Any: ...

    def spans_transcript(self, spans: list[Any], total_s: float, wall_s: float) -> Transcript: ...


class R2T2Spans:
    """Confucius4-R2T2's ``offline_jobs.WindowDecoder``: the request read up front, each span's result kept."""

    def __init__(self, engine: SpanEngine, request_options: dict[str, Any]) -> None:
        self.engine = engine
        self.language, self.max_tokens, self.context = engine.offline_request(request_options)
        self.window_samples = seconds_to_samples(OFFLINE_SPAN_SECONDS, SAMPLE_RATE)
        self._spans: list[Any] = []

    def decode(self, samples: np.ndarray, start: int) -> None:
        self._spans.append(
            self.engine.transcribe_span(
                samples, self.language, self.max_tokens, self.context, start / SAMPLE_RATE
            )
        )

    def transcript(self, total_s: float, wall_s: float) -> Transcript:
        return self.engine.spans_transcript(self._spans, total_s, wall_s)
