"""Meter ballistics for the input level: what a level meter shows, given the levels measured per audio block.

Qt-free so it can be tested with a fake clock: rises at once (speech onsets are visible), falls at a fixed rate
(a PPM-like decay, readable instead of flickering) and holds the peak for a moment.
"""

from __future__ import annotations

from dataclasses import dataclass

FLOOR_DBFS = -60.0


@dataclass
class LevelBallistics:
    decay_db_per_s: float = 24.0
    peak_hold_s: float = 1.5
    clip_dbfs: float = -1.0  # an RMS this close to full scale means the peaks are clipping
    level: float = FLOOR_DBFS
    peak: float = FLOOR_DBFS
    _at: float = 0.0
    _peak_at: float = 0.0

    def measure(self, dbfs: float, now: float) -> None:
        """A block's RMS level arrived at ``now`` (seconds, any monotonic clock)."""
        self.advance(now)
        value = max(FLOOR_DBFS, min(0.0, dbfs))
        self.level = max(self.level, value)
        if value >= self.peak:
            self.peak, self._peak_at = value, now

    def advance(self, now: float) -> None:
        """Let the shown level fall (and the held peak expire) up to ``now``."""
        elapsed = max(0.0, now - self._at)
        self._at = now
        self.level = max(FLOOR_DBFS, self.level - self.decay_db_per_s * elapsed)
        if now - self._peak_at > self.peak_hold_s:
            self.peak = max(self.level, self.peak - self.decay_db_per_s * elapsed)

    def reset(self) -> None:
        self.level = self.peak = FLOOR_DBFS

    @property
    def at_rest(self) -> bool:
        return self.level <= FLOOR_DBFS and self.peak <= FLOOR_DBFS

    @property
    def clipping(self) -> bool:
        return self.peak >= self.clip_dbfs

    def fraction(self, dbfs: float) -> float:
        """Where ``dbfs`` sits on the meter, 0 (floor) to 1 (full scale)."""
        return (max(FLOOR_DBFS, min(0.0, dbfs)) - FLOOR_DBFS) / -FLOOR_DBFS
