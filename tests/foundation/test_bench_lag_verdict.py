"""The live bench's verdict on catch-up (tests/bench/bench_r2t2_live.py): a lag that builds up is growing, one
late spike is not."""

from __future__ import annotations

from tests.bench.bench_r2t2_live import lag_is_bounded

CHUNK_S = 0.32


def test_a_flat_lag_with_a_late_spike_is_bounded() -> None:
    lags = [0.5, 0.6, 0.7, 0.55] * 30
    lags[-5] = 2.9  # one slow push near the end
    assert lag_is_bounded(lags, CHUNK_S)


def test_a_lag_that_builds_up_is_growing() -> None:
    lags = [0.5 + 0.01 * i for i in range(120)]  # 1.2 s more by the end: a backlog
    assert not lag_is_bounded(lags, CHUNK_S)


def test_a_rise_of_less_than_a_chunk_is_bounded() -> None:
    lags = [0.5 + 0.002 * i for i in range(120)]  # 0.24 s over the run
    assert lag_is_bounded(lags, CHUNK_S)


def test_too_few_pushes_to_judge_count_as_bounded() -> None:
    assert lag_is_bounded([], CHUNK_S)
    assert lag_is_bounded([0.4, 9.0], CHUNK_S)
