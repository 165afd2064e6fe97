"""How long a recording captioned as fast as the model goes has left (Qt-free).

The rate is measured, not assumed: from the moment audio first advances (not from Start, which includes loading
the model), over the last ``window_s`` seconds (so a slow start or a worker restart is forgotten). For the first
``settle_s`` seconds there is no honest figure yet, and the estimate says so ("estimating…").
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable

from inference.contract import SAMPLE_RATE


class TimeLeftEstimate:
    def __init__(
        self,
        total_samples: int,
        clock: Callable[[], float] = time.monotonic,
        settle_s: float = 3.0,
        window_s: float = 15.0,
    ) -> None:
        self.total_samples = total_samples
        self.clock = clock
        self.settle_s = settle_s
        self.window_s = window_s
        self._marks: deque[tuple[float, int]] = deque()  # (clock, samples done), since audio first advanced
        self._first_progress: float | None = None

    def observe(self, done_samples: int) -> None:
        now = self.clock()
        if self._first_progress is None:
            if done_samples <= 0:
                return  # loading, or the first push not answered yet: no rate to measure
            self._first_progress = now
        self._marks.append((now, done_samples))
        while len(self._marks) > 2 and now - self._marks[1][0] >= self.window_s:
            self._marks.popleft()  # keep one mark at least ``window_s`` old as the base

    def seconds_left(self) -> float | None:
        """None while estimating (too early, or no audio advanced in the window)."""
        if self._first_progress is None or not self._marks:
            return None
        now, done = self._marks[-1]
        if now - self._first_progress < self.settle_s:
            return None
        then, before = self._marks[0]
        if now <= then or done <= before:
            return None
        rate = (done - before) / (now - then)  # samples a second
        return max(0.0, (self.total_samples - done) / rate)

    def describe(self) -> str:
        """Say "6 of 53 s · about 12 s left", or "6 of 53 s · estimating…" before the rate is known."""
        done = self._marks[-1][1] if self._marks else 0
        left = self.seconds_left()
        tail = "estimating…" if left is None else f"about {left:.0f} s left"
        return f"{done / SAMPLE_RATE:.0f} of {self.total_samples / SAMPLE_RATE:.0f} s · {tail}"
