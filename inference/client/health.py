"""What the worker said about itself in its last pong: when, how long its current operation has run, its memory."""

from __future__ import annotations

import threading
import time


class WorkerHealth:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._last_pong = time.monotonic()
        self._busy_s = 0.0
        self.rss_bytes = 0

    def heard(self, busy_s: float, rss_bytes: int) -> None:
        """A pong arrived (reader thread)."""
        with self._lock:
            self._last_pong = time.monotonic()
            self._busy_s = busy_s
            self.rss_bytes = rss_bytes

    def reset(self, *, busy: bool = True) -> None:
        """Start counting silence now: a new worker, or a restore during which nobody pinged (``busy``: also
        forget the old worker's busy time)."""
        with self._lock:
            self._last_pong = time.monotonic()
            if busy:
                self._busy_s = 0.0

    @property
    def silent_s(self) -> float:
        with self._lock:
            return time.monotonic() - self._last_pong

    @property
    def busy_s(self) -> float:
        with self._lock:
            return self._busy_s
