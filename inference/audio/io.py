"""Audio as the engines take it: float32 mono at 16 kHz, from files (through ``decoding``, bounded by
``AudioLimits``), raw PCM bytes, or PCM arriving in pieces."""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import soxr

from inference.audio.decoding import decode_mono_16k, downmix_counting
from inference.audio.limits import DEFAULT_FILE_SECONDS, MAX_CHANNELS, MAX_RATE, MIN_RATE, AudioLimits
from inference.audio.samples import (
    checked_samples as checked_samples,  # the one check, where streams import it
)
from inference.contract import SAMPLE_RATE
from inference.errors import UsageError

TARGET_RATE = SAMPLE_RATE
log = logging.getLogger(__name__)

# Files read by library callers (tests, benches, tools); the CLI and the app pass limits the user can raise.
DEFAULT_FILE_LIMITS = AudioLimits(
    DEFAULT_FILE_SECONDS, "pass a larger limit (`captioneer transcribe --max-audio-s`), or split the file"
)


def downmix(samples: np.ndarray) -> np.ndarray:
    """Mono float32 by averaging channels; non-finite samples become 0 first (logged), before the average, so
    one bad channel does not poison the others."""
    mono, replaced = downmix_counting(samples)
    if replaced:
        log.warning("replacing %d non-finite samples (NaN/Inf) with silence", replaced)
    return mono


def decode_raw_pcm(data: bytes, sample_format: str, channels: int) -> np.ndarray:
    """Raw interleaved PCM bytes → float32 (frames, channels)."""
    if channels < 1:
        raise UsageError(f"--input-channels must be at least 1, got {channels}")
    if sample_format == "s16le":
        samples = np.frombuffer(data[: len(data) // 2 * 2], dtype="<i2").astype(np.float32) / 32768.0
    elif sample_format == "f32le":
        samples = np.frombuffer(data[: len(data) // 4 * 4], dtype="<f4").astype(np.float32)
    else:
        raise UsageError(f"unknown input format {sample_format!r}", "use s16le or f32le")
    usable = (samples.size // channels) * channels
    return samples[:usable].reshape(-1, channels)


def to_mono_16k(samples: np.ndarray, sample_rate: int) -> np.ndarray:
    """Downmix by averaging channels, replace non-finite samples with 0, resample with soxr (VHQ).

    Samples beyond ±1 (clipped float files) are kept as they are: the models see what was recorded.
    """
    if sample_rate < 1:
        raise UsageError(f"sample rate must be positive, got {sample_rate}")
    mono = downmix(samples)
    if sample_rate != TARGET_RATE and mono.size:
        mono = soxr.resample(mono, sample_rate, TARGET_RATE, quality="VHQ").astype(np.float32)
    return np.ascontiguousarray(mono, dtype=np.float32)


def load_audio_file(path: Path, limits: AudioLimits = DEFAULT_FILE_LIMITS) -> np.ndarray:
    """Read an audio file as float32 mono 16 kHz, block by block within ``limits`` (a header-only WAV gives an
    empty array)."""
    return decode_mono_16k(Path(path), limits)


class PcmStreamDecoder:
    """Raw interleaved PCM arriving in pieces (stdin, a socket, a sound card) → mono 16 kHz float32.

    Keeps the bytes of an incomplete frame for the next piece and resamples with one soxr stream, so
    the output equals converting the whole recording at once (no clicks at piece boundaries).
    """

    def __init__(self, sample_format: str, sample_rate: int, channels: int) -> None:
        if sample_format not in ("s16le", "f32le"):
            raise UsageError(f"unknown input format {sample_format!r}", "use s16le or f32le")
        if not MIN_RATE <= sample_rate <= MAX_RATE:
            raise UsageError(f"the input rate must be in [{MIN_RATE}, {MAX_RATE}] Hz, got {sample_rate}")
        if not 1 <= channels <= MAX_CHANNELS:
            raise UsageError(f"the input must have 1 to {MAX_CHANNELS} channels, got {channels}")
        self.sample_format = sample_format
        self.channels = channels
        self._frame_bytes = (2 if sample_format == "s16le" else 4) * channels
        self._carry = b""
        self._resampler = (
            soxr.ResampleStream(sample_rate, TARGET_RATE, 1, dtype="float32", quality="VHQ")
            if sample_rate != TARGET_RATE
            else None
        )

    def feed(self, data: bytes, last: bool = False) -> np.ndarray:
        data = self._carry + data
        usable = len(data) // self._frame_bytes * self._frame_bytes
        self._carry = data[usable:]
        mono = downmix(decode_raw_pcm(data[:usable], self.sample_format, self.channels))
        if self._resampler is not None:
            mono = self._resampler.resample_chunk(np.ascontiguousarray(mono), last=last)
        return np.ascontiguousarray(mono, dtype=np.float32)
