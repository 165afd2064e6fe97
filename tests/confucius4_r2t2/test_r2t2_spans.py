"""Offline 30 s span planning (docs/families/confucius4_r2t2.md §6)."""

from __future__ import annotations

import pytest

from inference.errors import UsageError
from inference.families.confucius4_r2t2.spans import join_span_texts, plan_offline_spans


@pytest.mark.parametrize(
    ("samples", "spans"),
    [
        (0, []),
        (1, [(0, 1)]),
        (480000, [(0, 480000)]),
        (480001, [(0, 480000), (480000, 480001)]),
        (560000, [(0, 480000), (480000, 560000)]),
        (1_000_000, [(0, 480000), (480000, 960000), (960000, 1_000_000)]),
    ],
)
def test_spans_at_16k(samples, spans):
    assert plan_offline_spans(samples) == spans


def test_span_length_uses_llround_of_the_input_rate():
    assert plan_offline_spans(100, sample_rate=3, span_seconds=0.5) == [
        (i, min(i + 2, 100)) for i in range(0, 100, 2)
    ]
    assert plan_offline_spans(1_400_000, sample_rate=44100)[0] == (0, 1_323_000)


def test_invalid_arguments():
    with pytest.raises(UsageError, match="audio length must not be negative"):
        plan_offline_spans(-1)
    with pytest.raises(UsageError, match="span length must be positive"):
        plan_offline_spans(10, sample_rate=1, span_seconds=0.1)


def test_join_span_texts():
    assert join_span_texts(["a", "", "b c"]) == "a b c"
    assert join_span_texts(["", ""]) == ""
