"""Offline span planning (families.md §1.6): consecutive, non-overlapping 30 s spans, the last one shorter."""

from __future__ import annotations

import math

from inference.contract import SAMPLE_RATE

OFFLINE_SPAN_SECONDS = 30.0


def _llround(value: float) -> int:
    """C ``llround``: halves round away from zero."""
    return int(math.copysign(math.floor(abs(value) + 0.5), value))


def plan_offline_spans(
    num_samples: int, sample_rate: int = SAMPLE_RATE, span_seconds: float = OFFLINE_SPAN_SECONDS
) -> list[tuple[int, int]]:
    """``[start, end)`` sample ranges covering ``num_samples`` with hop = length = llround(span × rate).

    Only the valid samples of the last span are returned (no padding); no samples give no spans.
    """
    if num_samples < 0:
        raise ValueError(f"num_samples must be >= 0, got {num_samples}")
    span = _llround(span_seconds * sample_rate)
    if span <= 0:
        raise ValueError(f"a span of {span_seconds} s at {sample_rate} Hz has no samples")
    return [(start, min(start + span, num_samples)) for start in range(0, num_samples, span)]


def join_span_texts(texts: list[str]) -> str:
    """Non-empty span texts joined with one space (the offline result)."""
    return " ".join(text for text in texts if text)
