"""The one speech start/end tracker over per-frame VAD probabilities, used offline and live.

Every VAD user in Captioneer (``vad.segments_from_probabilities`` for files and the speech gate, the live
segmenters in ``inference/streaming.py`` and ``inference/streaming_windows.py``, R2T2's endpointing) feeds
Silero's 32 ms frame probabilities, in order, to a :class:`SpeechTracker`. What differs between them is only
the numbers in :class:`TrackerRules`, and what each does with the starts and ends.

The rules (Silero's ``get_speech_timestamps`` / ``VADIterator``): speech starts at a frame at least
``threshold`` probable. In speech, a frame below ``negative`` is silent and begins a dip (unless one is
already open); a frame at least ``voiced_from`` probable ends the dip. Speech ends on a frame below ``end_below``
that lies ``min_silence`` samples or more after the dip's first silent frame, and then ends *at* that first
silent frame. Silero keeps ``voiced_from = threshold`` (a frame between the two thresholds neither opens nor ends
a dip) and ``end_below = negative``; the VAD-segmented live stream sets both to ``negative`` (a plain
hysteresis); R2T2's endpointing lets any frame under ``threshold`` end a dip that is old enough.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

FRAME_SAMPLES = 512  # Silero's frame at 16 kHz: 32 ms


@dataclass(frozen=True)
class TrackerRules:
    threshold: float  # a frame this probable starts speech
    negative: float  # in speech, a frame below this is silent
    min_silence: float  # samples from a dip's first silent frame to the silent frame that ends the speech
    voiced_from: float  # in speech, a frame this probable ends a dip
    end_below: float  # a frame below this, old enough in a dip, ends the speech


@dataclass(frozen=True)
class SpeechStarted:
    start: int  # the first sample of the frame that started the speech


@dataclass(frozen=True)
class SpeechEnded:
    start: int  # as SpeechStarted
    end: int  # the first sample of the closing dip's first silent frame


class SpeechTracker:
    """Speech starts and ends, frame by frame. Positions are the callers' (stream samples of each frame's
    start); the tracker only compares them."""

    def __init__(self, rules: TrackerRules) -> None:
        self.rules = rules
        self.in_speech = False
        self.start = 0  # where the open speech started
        self.dip_from: int | None = None  # where the open speech's pending dip began
        self.voiced_frames = 0  # frames of the open speech at least voiced_from probable (its first included)
        self.voiced_end = 0  # the end of its last such frame

    def step(
        self, probability: float, at: int, min_silence: float | None = None
    ) -> SpeechStarted | SpeechEnded | None:
        """Track one frame starting at sample ``at``; ``min_silence`` overrides the rules' for this frame (a
        caller that ends long speech at a shorter pause)."""
        rules = self.rules
        needed = rules.min_silence if min_silence is None else min_silence
        if not self.in_speech:
            if probability < rules.threshold:
                return None
            self.in_speech, self.start, self.dip_from = True, at, None
            self.voiced_frames, self.voiced_end = 1, at + FRAME_SAMPLES
            return SpeechStarted(at)
        if probability >= rules.voiced_from:
            self.dip_from = None
            self.voiced_frames += 1
            self.voiced_end = at + FRAME_SAMPLES
            return None
        if probability < rules.negative and self.dip_from is None:
            self.dip_from = at
        if self.dip_from is None or probability >= rules.end_below or at - self.dip_from < needed:
            return None
        ended = SpeechEnded(self.start, self.dip_from)
        self.close()
        return ended

    def close(self) -> None:
        """End the open speech without an event (a segment cut at its maximum length)."""
        self.in_speech, self.dip_from = False, None

    def state(self) -> list[Any]:
        """What a replacement needs to continue exactly here (JSON-safe)."""
        return [self.in_speech, self.start, self.dip_from, self.voiced_frames, self.voiced_end]

    def restore(self, state: list[Any]) -> None:
        in_speech, start, dip_from, voiced_frames, voiced_end = state
        self.in_speech, self.start = bool(in_speech), int(start)
        self.dip_from = None if dip_from is None else int(dip_from)
        self.voiced_frames, self.voiced_end = int(voiced_frames), int(voiced_end)


class FrameSplitter:
    """Cuts pushed samples into whole VAD frames aligned to the start of the stream, however they arrive."""

    def __init__(self) -> None:
        self.pending = np.zeros(0, dtype=np.float32)  # samples short of a whole frame

    def frames(self, samples: np.ndarray) -> list[np.ndarray]:
        buffered = np.concatenate([self.pending, samples]) if self.pending.size else samples
        whole = buffered.size // FRAME_SAMPLES * FRAME_SAMPLES
        self.pending = buffered[whole:].copy()
        return [buffered[start : start + FRAME_SAMPLES] for start in range(0, whole, FRAME_SAMPLES)]

    def take_pending(self) -> np.ndarray:
        pending, self.pending = self.pending, np.zeros(0, dtype=np.float32)
        return pending
