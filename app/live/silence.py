"""Tells when an input has gone silent (a muted microphone, nothing playing) and when sound came back.

Counted in samples of audio received, not wall-clock time, so a busy machine cannot make it fire early.
"""

from __future__ import annotations

from dataclasses import dataclass

from inference.contract import SAMPLE_RATE

QUIET_DBFS = -60.0  # below the meter's floor: digital silence or a muted input's hiss
SILENT_AFTER_S = 4.0


@dataclass
class SilenceWatch:
    quiet_dbfs: float = QUIET_DBFS
    after_s: float = SILENT_AFTER_S
    silent: bool = False
    _quiet_samples: int = 0

    def feed(self, dbfs: float, samples: int) -> bool | None:
        """A block's level; True when the input has just gone silent, False when sound just came back."""
        if dbfs >= self.quiet_dbfs:
            self._quiet_samples = 0
            if self.silent:
                self.silent = False
                return False
            return None
        self._quiet_samples += samples
        if not self.silent and self._quiet_samples >= self.after_s * SAMPLE_RATE:
            self.silent = True
            return True
        return None

    @property
    def quiet_s(self) -> float:
        return self._quiet_samples / SAMPLE_RATE
