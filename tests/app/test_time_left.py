"""The time left of a recording captioned fast (issue 42 item 5), on a fake clock: measured from when audio first
advances (not from Start, which includes loading the model), "estimating…" before that, and following the rate."""

from __future__ import annotations

import pytest

from app.live.time_left import TimeLeftEstimate
from inference.contract import SAMPLE_RATE

TOTAL_S = 53.0


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def run(estimate: TimeLeftEstimate, clock: FakeClock, seconds: float, speed: float, done_s: float) -> float:
    """Tick every 0.25 s for ``seconds`` while the model captions ``speed`` audio seconds a second."""
    for _ in range(round(seconds / 0.25)):
        clock.now += 0.25
        done_s = min(TOTAL_S, done_s + 0.25 * speed)
        estimate.observe(round(done_s * SAMPLE_RATE))
    return done_s


def test_the_time_left_waits_for_a_measured_rate_and_then_uses_it() -> None:
    clock = FakeClock()
    estimate = TimeLeftEstimate(round(TOTAL_S * SAMPLE_RATE), clock)
    run(estimate, clock, 5.0, 0.0, 0.0)  # the model loads: nothing captioned yet
    assert estimate.describe() == "0 of 53 s · estimating…"
    done = run(estimate, clock, 2.0, 4.0, 0.0)  # audio flows at 4x real time
    assert estimate.seconds_left() is None and estimate.describe() == "8 of 53 s · estimating…"
    done = run(estimate, clock, 2.0, 4.0, done)
    truth = (TOTAL_S - done) / 4.0
    assert estimate.seconds_left() == pytest.approx(truth, rel=0.02)  # from Start it would read ~2.3x this
    assert estimate.describe() == f"{done:.0f} of 53 s · about {truth:.0f} s left"
    done = run(
        estimate, clock, 20.0, 1.0, done
    )  # the model slows down (a busy machine): the estimate follows
    assert estimate.seconds_left() == pytest.approx(TOTAL_S - done, rel=0.02)


def test_a_stall_is_estimating_again_not_a_stale_figure() -> None:
    clock = FakeClock()
    estimate = TimeLeftEstimate(round(TOTAL_S * SAMPLE_RATE), clock, settle_s=1.0, window_s=5.0)
    done = run(estimate, clock, 3.0, 2.0, 0.0)
    assert estimate.seconds_left() == pytest.approx((TOTAL_S - done) / 2.0, rel=0.02)
    run(estimate, clock, 10.0, 0.0, done)  # nothing captioned for longer than the window (a worker restart)
    assert estimate.seconds_left() is None
