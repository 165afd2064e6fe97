"""Utterance capture for push-to-talk (Qt-free): pre-roll + held audio + trailing audio + zero padding.

The recorder is fed the microphone continuously (16 kHz mono). It keeps the last ``pre_roll_s`` in a
ring so a word that starts with the key press is not clipped. After the key is released it keeps
recording real audio for ``trailing_s`` (people release the key while still saying the last word), then
appends ``padding_s`` of digital silence: Confucius4-R2T2 drops the final word when the audio ends right
after it ("It seems" instead of "It seems fixed." — docs/families/confucius4_r2t2.md §12), and other dictation tools see the same.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from inference.contract import SAMPLE_RATE
from inference.errors import UsageError

LIMITS = {"pre_roll_s": (0.0, 2.0), "trailing_s": (0.0, 2.0), "padding_s": (0.0, 2.0)}


@dataclass(frozen=True)
class CaptureSettings:
    pre_roll_s: float = 0.5
    trailing_s: float = 0.3
    padding_s: float = 0.3

    def __post_init__(self) -> None:
        for name, (low, high) in LIMITS.items():
            value = getattr(self, name)
            if not low <= value <= high:
                raise UsageError(f"dictation {name} must be between {low:g} and {high:g} s, got {value:g}")


@dataclass(frozen=True)
class Utterance:
    audio: np.ndarray
    pre_roll_samples: int
    held_samples: int
    trailing_samples: int
    padding_samples: int
    released_at: float  # monotonic time of the key release (for release → text latency)


class UtteranceRecorder:
    """Thread-safe: ``feed`` runs on the audio thread, ``start``/``stop`` on the hotkey's."""

    def __init__(self, settings: CaptureSettings, on_utterance: Callable[[Utterance], None]) -> None:
        self.settings = settings
        self.on_utterance = on_utterance
        self._lock = threading.Lock()
        self._ring: deque[np.ndarray] = deque()
        self._ring_samples = 0
        self._parts: list[np.ndarray] | None = None  # recording
        self._pre_roll = 0
        self._held = 0
        self._trailing_left = 0  # samples still to take after release
        self._trailing = 0
        self._released_at = 0.0

    @property
    def recording(self) -> bool:
        with self._lock:
            return self._parts is not None

    def start(self) -> None:
        with self._lock:
            if self._parts is not None:
                return
            wanted = round(self.settings.pre_roll_s * SAMPLE_RATE)
            ring = np.concatenate(list(self._ring)) if self._ring else np.zeros(0, np.float32)
            pre = ring[-wanted:] if wanted else ring[:0]
            self._parts = [pre.copy()]
            self._pre_roll, self._held, self._trailing, self._trailing_left = pre.size, 0, 0, -1

    def stop(self, now: float) -> None:
        """Key released: take ``trailing_s`` more of real audio, then finish with padding."""
        done = None
        with self._lock:
            if self._parts is None or self._trailing_left >= 0:
                return
            self._released_at = now
            self._trailing_left = round(self.settings.trailing_s * SAMPLE_RATE)
            if self._trailing_left == 0:
                done = self._finish()
        if done is not None:
            self.on_utterance(done)

    def finish_now(self, now: float) -> None:
        """The audio input ended: finish a recording at once with what it has (no audio will come to wait for)."""
        done = None
        with self._lock:
            if self._parts is None:
                return
            if self._trailing_left < 0:
                self._released_at = now
            self._trailing_left = 0
            done = self._finish()
        self.on_utterance(done)

    def cancel(self) -> None:
        with self._lock:
            self._parts = None

    def feed(self, block: np.ndarray) -> None:
        done = None
        with self._lock:
            self._ring.append(block)
            self._ring_samples += block.size
            keep = round(self.settings.pre_roll_s * SAMPLE_RATE)
            while self._ring and self._ring_samples - self._ring[0].size >= keep:
                self._ring_samples -= self._ring.popleft().size
            if self._parts is None:
                return
            if self._trailing_left < 0:  # key still held
                self._parts.append(block)
                self._held += block.size
                return
            take = block[: self._trailing_left]
            self._parts.append(take)
            self._trailing += take.size
            self._trailing_left -= take.size
            if self._trailing_left == 0:
                done = self._finish()
        if done is not None:
            self.on_utterance(done)

    def _finish(self) -> Utterance:
        assert self._parts is not None
        padding = round(self.settings.padding_s * SAMPLE_RATE)
        audio = np.concatenate([*self._parts, np.zeros(padding, np.float32)]).astype(np.float32, copy=False)
        self._parts = None
        return Utterance(audio, self._pre_roll, self._held, self._trailing, padding, self._released_at)
