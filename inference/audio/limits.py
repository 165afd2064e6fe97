"""How much audio one file may hold once decoded, and the refusals past it.

The work and memory of decoding follow rate x channels x seconds, not the file's size: a small FLAC can declare
655 350 Hz, a 7 KB WAV 1 Hz (3500 s once resampled). So a file must keep its rate and channel count within the
ranges below and its length within ``max_seconds``, checked from the header first and again while decoding.
The decoded result (mono float32 at ``SAMPLE_RATE``) is then at most 4 x ``max_output_samples`` bytes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from inference.contract import SAMPLE_RATE
from inference.errors import InputFileError, UsageError

MIN_RATE = 1000  # the same range as raw PCM on stdin and /live
MAX_RATE = 384000
MAX_CHANNELS = 16
# A long lecture or meeting; the CLI (--max-audio-s) and the app (max_file_audio_s) let the user raise it.
# Decoded, it is 4 x 3600 x 16000 x 4 bytes = 0.9 GB of mono float32.
DEFAULT_FILE_SECONDS = 4 * 3600.0
_RESAMPLE_FIX = "convert it, e.g. `ffmpeg -i INPUT -ar 16000 -ac 1 output.wav`"


@dataclass(frozen=True)
class AudioLimits:
    """A caller's bound on one decoded file; ``how_to_raise`` is the fix a refusal names (a CLI option, a
    setting, or splitting the file where the limit belongs to someone else, as a server's does)."""

    max_seconds: float
    how_to_raise: str = "split it into shorter files"

    def __post_init__(self) -> None:
        if not 0 < self.max_seconds < math.inf:
            raise UsageError(
                f"the audio length limit must be a positive number of seconds, got {self.max_seconds}"
            )

    @property
    def max_output_samples(self) -> int:
        return math.ceil(self.max_seconds * SAMPLE_RATE)

    def max_frames(self, rate: int) -> int:
        """The most frames a file at ``rate`` may hold."""
        return math.floor(self.max_seconds * rate)

    def check_layout(self, name: str, rate: int, channels: int) -> None:
        if not MIN_RATE <= rate <= MAX_RATE:
            raise InputFileError(
                f"{name} declares a sample rate of {rate} Hz; audio files must be {MIN_RATE}-{MAX_RATE} Hz",
                _RESAMPLE_FIX,
            )
        if not 1 <= channels <= MAX_CHANNELS:
            raise InputFileError(
                f"{name} declares {channels} channels; audio files may have 1 to {MAX_CHANNELS}",
                _RESAMPLE_FIX,
            )


class AudioTooLong(InputFileError):
    """The audio lasts longer than a caller's limit: found from the header or while decoding, never after."""

    def __init__(self, name: str, seconds: float, limits: AudioLimits, exact: bool = True) -> None:
        lasts = f"lasts {seconds:.1f} s" if exact else f"lasts more than {seconds:.1f} s"
        super().__init__(
            f"{name} {lasts}, more than the limit of {limits.max_seconds:g} s", limits.how_to_raise
        )
        self.seconds = seconds
        self.limit_s = limits.max_seconds
        self.exact = exact
