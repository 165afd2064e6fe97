"""How far a ``/live`` upload keeps up with real time: seconds of audio delivered against seconds the server
spent waiting for them. Only waiting counts (as for the body rate, ``body_rate.py``): while the model is busy
the server does not read, the client cannot send, and that is not its fault. A stream that delivered less
than ``min_realtime`` of the time waited over the last ``window_s`` (or since it began, when younger) is
*behind*: it is not delivering work, and a request waiting for its model slot may take the slot back
(``slots.py``, docs/server_limits.md §2)."""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class LivePaceLimit:
    min_realtime: float = 0.5  # audio seconds per second waited
    window_s: float = 10.0


class LivePace:
    def __init__(self, limit: LivePaceLimit, clock: Callable[[], float] = time.monotonic) -> None:
        self.limit = limit
        self.clock = clock
        self._waited = 0.0  # finished waits
        self._waiting_since: float | None = None
        self._arrivals: deque[tuple[float, float]] = deque()  # (waited_s when it arrived, audio seconds)

    def start_waiting(self) -> None:
        self._waiting_since = self.clock()

    def stop_waiting(self) -> None:
        if self._waiting_since is not None:
            self._waited += self.clock() - self._waiting_since
            self._waiting_since = None

    def waited_s(self) -> float:
        """Seconds spent waiting for the client so far, the wait in progress included."""
        ongoing = 0.0 if self._waiting_since is None else self.clock() - self._waiting_since
        return self._waited + ongoing

    def record(self, audio_s: float) -> None:
        now = self.waited_s()
        if audio_s > 0:
            self._arrivals.append((now, audio_s))
        while self._arrivals and self._arrivals[0][0] < now - self.limit.window_s:
            self._arrivals.popleft()

    def in_window(self) -> tuple[float, float]:
        """(audio seconds delivered, seconds waited) over the last window, or since the start when younger."""
        now = self.waited_s()
        start = now - self.limit.window_s
        audio = sum(seconds for at, seconds in self._arrivals if at >= start)
        return audio, min(now, self.limit.window_s)

    def behind(self) -> bool:
        audio, waited = self.in_window()
        return audio < self.limit.min_realtime * waited
