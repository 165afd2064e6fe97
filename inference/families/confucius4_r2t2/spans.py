"""Offline span planning (docs/families/confucius4_r2t2.md §6): consecutive, non-overlapping 30 s spans, the last one shorter.

The planner itself is :func:`inference.audio.spans.plan_fixed_spans`; this module fixes the family's span length.
"""

from __future__ import annotations

from inference.audio.spans import plan_fixed_spans, seconds_to_samples
from inference.contract import SAMPLE_RATE

OFFLINE_SPAN_SECONDS = 30.0


def plan_offline_spans(
    num_samples: int, sample_rate: int = SAMPLE_RATE, span_seconds: float = OFFLINE_SPAN_SECONDS
) -> list[tuple[int, int]]:
    """``[start, end)`` sample ranges covering ``num_samples`` with hop = length = llround(span × rate).

    Only the valid samples of the last span are returned (no padding); no samples give no spans.
    """
    span_samples = seconds_to_samples(span_seconds, sample_rate)
    return [(span.start, span.end) for span in plan_fixed_spans(num_samples, span_samples)]


def join_span_texts(texts: list[str]) -> str:
    """Non-empty span texts joined with one space (the offline result)."""
    return " ".join(text for text in texts if text)
