"""Reading audio into float32 mono 16 kHz: WAV (RIFF/RF64-free) parsing, raw PCM, downmix, soxr resampling."""

from __future__ import annotations

import logging
import struct
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import soxr

from inference.errors import InputFileError, UsageError

TARGET_RATE = 16000
log = logging.getLogger(__name__)

_WAVE_FORMAT_PCM = 0x0001
_WAVE_FORMAT_IEEE_FLOAT = 0x0003
_WAVE_FORMAT_EXTENSIBLE = 0xFFFE


@dataclass(frozen=True)
class DecodedAudio:
    samples: np.ndarray  # float32, shape (frames, channels), nominal range [-1, 1]
    sample_rate: int
    truncated: bool = False

    @property
    def duration_s(self) -> float:
        return self.samples.shape[0] / self.sample_rate if self.sample_rate else 0.0


def parse_wav(data: bytes, name: str = "audio") -> DecodedAudio:
    if len(data) < 12 or data[:4] != b"RIFF" or data[8:12] != b"WAVE":
        raise InputFileError(
            f"{name} is not a WAV file (no RIFF/WAVE header)",
            "convert it to WAV (e.g. `ffmpeg -i input output.wav`) or pass raw PCM with `-` and --input-format",
        )
    pos = 12
    fmt: tuple[int, int, int, int] | None = None
    payload: bytes | None = None
    truncated = False
    while pos + 8 <= len(data):
        chunk_id = data[pos : pos + 4]
        (size,) = struct.unpack_from("<I", data, pos + 4)
        body = data[pos + 8 : pos + 8 + size]
        if chunk_id == b"fmt ":
            if len(body) < 16:
                raise InputFileError(f"{name} has a damaged WAV format chunk", "re-export the audio file")
            tag, channels, rate, _byte_rate, _align, bits = struct.unpack_from("<HHIIHH", body, 0)
            if tag == _WAVE_FORMAT_EXTENSIBLE and len(body) >= 26:
                (tag,) = struct.unpack_from("<H", body, 24)  # first two bytes of the sub-format GUID
            fmt = (tag, channels, rate, bits)
        elif chunk_id == b"data":
            payload = body
            if len(body) < size:
                truncated = True
            break
        pos += 8 + size + (size & 1)
    if fmt is None:
        raise InputFileError(f"{name} has no WAV format chunk", "re-export the audio file")
    if payload is None:
        raise InputFileError(f"{name} has no audio data chunk", "re-export the audio file")
    tag, channels, rate, bits = fmt
    if channels < 1 or rate < 1:
        raise InputFileError(f"{name} declares {channels} channels at {rate} Hz", "re-export the audio file")
    samples = _decode_samples(payload, tag, bits, name)
    usable = (samples.size // channels) * channels
    if usable != samples.size:
        truncated = True
    if truncated:
        log.warning("%s is truncated; using the %d complete frames present", name, usable // channels)
    return DecodedAudio(samples[:usable].reshape(-1, channels), rate, truncated)


def _decode_samples(payload: bytes, tag: int, bits: int, name: str) -> np.ndarray:
    if tag == _WAVE_FORMAT_PCM:
        if bits == 8:
            raw = np.frombuffer(payload, dtype=np.uint8)
            return (raw.astype(np.float32) - 128.0) / 128.0
        if bits == 16:
            raw16 = np.frombuffer(payload[: len(payload) // 2 * 2], dtype="<i2")
            return raw16.astype(np.float32) / 32768.0
        if bits == 24:
            raw8 = np.frombuffer(payload[: len(payload) // 3 * 3], dtype=np.uint8).reshape(-1, 3).astype(np.int32)
            value = raw8[:, 0] | (raw8[:, 1] << 8) | (raw8[:, 2] << 16)
            value = np.where(value >= 1 << 23, value - (1 << 24), value)
            return value.astype(np.float32) / float(1 << 23)
        if bits == 32:
            raw32 = np.frombuffer(payload[: len(payload) // 4 * 4], dtype="<i4")
            return (raw32.astype(np.float64) / 2147483648.0).astype(np.float32)
    if tag == _WAVE_FORMAT_IEEE_FLOAT:
        if bits == 32:
            return np.frombuffer(payload[: len(payload) // 4 * 4], dtype="<f4").astype(np.float32)
        if bits == 64:
            return np.frombuffer(payload[: len(payload) // 8 * 8], dtype="<f8").astype(np.float32)
    raise InputFileError(
        f"{name} uses WAV encoding 0x{tag:04x} with {bits}-bit samples, which Captioneer cannot read",
        "convert it to 16-bit PCM WAV",
    )


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
    """Downmix by averaging channels, replace non-finite samples with 0, resample with soxr (VHQ)."""
    if samples.ndim == 2:
        mono = samples.mean(axis=1, dtype=np.float64).astype(np.float32)
    else:
        mono = np.asarray(samples, dtype=np.float32)
    bad = ~np.isfinite(mono)
    if bad.any():
        log.warning("replacing %d non-finite samples with silence", int(bad.sum()))
        mono = np.where(bad, np.float32(0.0), mono)
    if sample_rate != TARGET_RATE and mono.size:
        mono = soxr.resample(mono, sample_rate, TARGET_RATE, quality="VHQ").astype(np.float32)
    return np.ascontiguousarray(mono, dtype=np.float32)


def load_audio_file(path: Path) -> np.ndarray:
    """Read an audio file as float32 mono 16 kHz, with clear errors for anything unreadable."""
    if not path.exists():
        raise InputFileError(f"audio file not found: {path}", "check the path")
    if path.is_dir():
        raise InputFileError(f"{path} is a directory, not an audio file")
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise InputFileError(f"cannot read {path}: {exc.strerror}") from exc
    if not data:
        raise InputFileError(f"{path} is empty (0 bytes)", "record or export the audio again")
    decoded = parse_wav(data, str(path))
    return to_mono_16k(decoded.samples, decoded.sample_rate)
