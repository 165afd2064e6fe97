"""Reading audio into float32 mono 16 kHz.

WAV (RIFF, incl. WAVE_FORMAT_EXTENSIBLE) is parsed here so the common case needs no extra
dependency; every other container (FLAC, OGG Vorbis/Opus, MP3, RF64, AIFF, ...) and the WAV
encodings we do not decode ourselves (A-law, mu-law, ADPCM) go through ``soundfile``, whose
wheels bundle libsndfile. It is imported lazily so a missing install only affects those inputs.
"""

from __future__ import annotations

import io
import logging
import re
import struct
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import soxr

from inference.contract import SAMPLE_RATE
from inference.errors import InputFileError, UsageError
from inference.native_stderr import DECODER_LINES, native_output_logged

TARGET_RATE = SAMPLE_RATE
log = logging.getLogger(__name__)

_WAVE_FORMAT_PCM = 0x0001
_WAVE_FORMAT_IEEE_FLOAT = 0x0003
_WAVE_FORMAT_EXTENSIBLE = 0xFFFE
# Bytes 2..15 of every KSDATAFORMAT_SUBTYPE_* GUID; the first two bytes carry the format tag.
_KSDATAFORMAT_GUID_TAIL = bytes.fromhex("000000001000800000aa00389b71")
# Streaming writers that cannot seek back leave the data size at its maximum.
_UNKNOWN_CHUNK_SIZE = 0xFFFFFFFF

_SOUNDFILE_BLOCK_FRAMES = 1 << 14
_CONVERT_FIX = "convert it to WAV, e.g. `ffmpeg -i INPUT -ar 16000 -ac 1 output.wav`"


@dataclass(frozen=True)
class DecodedAudio:
    samples: np.ndarray  # float32, shape (frames, channels), nominal range [-1, 1]
    sample_rate: int
    truncated: bool = False

    @property
    def duration_s(self) -> float:
        return self.samples.shape[0] / self.sample_rate if self.sample_rate else 0.0


class _UndecodableWavEncoding(InputFileError):
    """A valid WAV whose sample encoding this parser does not implement (soundfile may)."""


@dataclass(frozen=True)
class _WavFormat:
    tag: int
    channels: int
    rate: int
    bits: int
    block_align: int


def parse_wav(data: bytes, name: str = "audio") -> DecodedAudio:
    """Decode a RIFF/WAVE byte string; raise InputFileError for anything that is not a usable WAV."""
    if len(data) < 12 or data[:4] != b"RIFF" or data[8:12] != b"WAVE":
        raise InputFileError(
            f"{name} is not a WAV file (no RIFF/WAVE header)",
            f"{_CONVERT_FIX}, or pass raw PCM with `-` and --input-format",
        )
    fmt, payload, declared_size = _scan_chunks(data, name)
    if fmt is None:
        raise InputFileError(f"{name} has no WAV format chunk", "re-export the audio file")
    if payload is None:
        raise InputFileError(f"{name} has no audio data chunk", "re-export the audio file")
    if fmt.channels < 1 or fmt.rate < 1:
        raise InputFileError(
            f"{name} declares {fmt.channels} channels at {fmt.rate} Hz", "re-export the audio file"
        )
    samples, frame_bytes = _decode_samples(payload, fmt, name)
    complete_frames = len(payload) // frame_bytes
    truncated = len(payload) % frame_bytes != 0
    if declared_size != _UNKNOWN_CHUNK_SIZE and len(payload) < declared_size:
        truncated = True
    if truncated:
        log.warning(
            "%s is truncated (data chunk declares %d bytes, %d present); using the %d complete frames",
            name,
            declared_size,
            len(payload),
            complete_frames,
        )
    return DecodedAudio(samples.reshape(complete_frames, fmt.channels), fmt.rate, truncated)


def _scan_chunks(data: bytes, name: str) -> tuple[_WavFormat | None, bytes | None, int]:
    """Walk the RIFF chunks (any order, unknown ones skipped, odd sizes padded) → format, data, declared size."""
    pos = 12
    fmt: _WavFormat | None = None
    payload: bytes | None = None
    declared_size = 0
    while pos + 8 <= len(data) and (fmt is None or payload is None):
        chunk_id = data[pos : pos + 4]
        (size,) = struct.unpack_from("<I", data, pos + 4)
        body = data[pos + 8 : pos + 8 + size]
        if chunk_id == b"fmt ":
            fmt = _parse_fmt(body, name)
        elif chunk_id == b"data":
            payload, declared_size = body, size
        pos += 8 + size + (size & 1)
    return fmt, payload, declared_size


def _parse_fmt(body: bytes, name: str) -> _WavFormat:
    if len(body) < 16:
        raise InputFileError(f"{name} has a damaged WAV format chunk", "re-export the audio file")
    tag, channels, rate, _byte_rate, block_align, bits = struct.unpack_from("<HHIIHH", body, 0)
    if tag == _WAVE_FORMAT_EXTENSIBLE:
        if len(body) < 40 or body[26:40] != _KSDATAFORMAT_GUID_TAIL:
            raise _UndecodableWavEncoding(
                f"{name} uses a WAVE_FORMAT_EXTENSIBLE sub-format Captioneer cannot read", _CONVERT_FIX
            )
        (tag,) = struct.unpack_from("<H", body, 24)
    return _WavFormat(tag, channels, rate, bits, block_align)


def _decode_samples(payload: bytes, fmt: _WavFormat, name: str) -> tuple[np.ndarray, int]:
    """Interleaved samples of all complete frames as float32, plus the frame size in bytes."""
    # Samples narrower than their container (e.g. 20-bit in 3 bytes) are left-justified, so
    # scaling by the container width is exact.
    width = (fmt.bits + 7) // 8
    frame_bytes = width * fmt.channels
    if fmt.block_align not in (0, frame_bytes):
        raise InputFileError(
            f"{name} declares {fmt.block_align}-byte frames for {fmt.channels} x {fmt.bits}-bit samples",
            "re-export the audio file",
        )
    usable = payload[: len(payload) // frame_bytes * frame_bytes] if frame_bytes else b""
    if fmt.tag == _WAVE_FORMAT_PCM and width in (1, 2, 3, 4):
        return _decode_pcm(usable, width), frame_bytes
    if fmt.tag == _WAVE_FORMAT_IEEE_FLOAT and width in (4, 8):
        raw = np.frombuffer(usable, dtype="<f4" if width == 4 else "<f8")
        return raw.astype(np.float32), frame_bytes
    raise _UndecodableWavEncoding(
        f"{name} uses WAV encoding 0x{fmt.tag:04x} with {fmt.bits}-bit samples, which Captioneer cannot read",
        "convert it to 16-bit PCM WAV",
    )


def _decode_pcm(usable: bytes, width: int) -> np.ndarray:
    if width == 1:  # 8-bit WAV is unsigned with 128 as zero
        return (np.frombuffer(usable, dtype=np.uint8).astype(np.float32) - 128.0) / 128.0
    if width == 2:
        return np.frombuffer(usable, dtype="<i2").astype(np.float32) / 32768.0
    if width == 3:
        raw8 = np.frombuffer(usable, dtype=np.uint8).reshape(-1, 3).astype(np.int32)
        value = raw8[:, 0] | (raw8[:, 1] << 8) | (raw8[:, 2] << 16)
        value = np.where(value >= 1 << 23, value - (1 << 24), value)
        return value.astype(np.float32) / float(1 << 23)
    raw32 = np.frombuffer(usable, dtype="<i4")
    return (raw32.astype(np.float64) / 2147483648.0).astype(np.float32)


class AudioTooLong(InputFileError):
    """The audio lasts longer than a caller's limit: found from the header or while decoding, never after."""

    def __init__(self, name: str, seconds: float, limit_s: float, exact: bool = True) -> None:
        lasts = f"lasts {seconds:.1f} s" if exact else f"lasts more than {seconds:.1f} s"
        super().__init__(
            f"{name} {lasts}, more than the limit of {limit_s:g} s", "split it into shorter files"
        )
        self.seconds = seconds
        self.limit_s = limit_s


def decode_with_soundfile(
    data: bytes, name: str = "audio", max_seconds: float | None = None, mono: bool = False
) -> DecodedAudio:
    """Decode any container libsndfile knows (FLAC, OGG Vorbis/Opus, MP3, RF64, AIFF, A-law WAV, ...).

    ``max_seconds``: refuse longer audio from the header, or as soon as decoding passes it (a compressed file
    may hold far more audio than its size suggests). ``mono``: average the channels block by block, so memory
    follows the mono length, not the channel count."""
    with native_output_logged(DECODER_LINES):
        return _decode_with_soundfile(data, name, max_seconds, mono)


def _decode_with_soundfile(data: bytes, name: str, max_seconds: float | None, mono: bool) -> DecodedAudio:
    try:
        import soundfile
    except (ImportError, OSError) as exc:  # OSError: the wheel's bundled libsndfile failed to load
        raise InputFileError(
            f"{name} is not a WAV file, and reading other formats needs the `soundfile` package ({exc})",
            f"install it with `pip install soundfile`, or {_CONVERT_FIX}",
        ) from exc
    decode_errors = (RuntimeError, ValueError, TypeError, EOFError)  # LibsndfileError is a RuntimeError
    try:
        handle = soundfile.SoundFile(io.BytesIO(data))
    except decode_errors as exc:
        raise InputFileError(
            f"{name} is not an audio file Captioneer can read ({_why(exc, name)})", _unreadable_fix(data)
        ) from exc
    blocks: list[np.ndarray] = []
    truncated = False
    decoded = 0
    with handle:
        channels, rate = handle.channels, int(handle.samplerate)
        if max_seconds is not None and rate > 0 and handle.frames > max_seconds * rate:
            raise AudioTooLong(name, handle.frames / rate, max_seconds)
        while True:
            try:
                block = handle.read(_SOUNDFILE_BLOCK_FRAMES, dtype="float32", always_2d=True)
            except decode_errors as exc:
                # A cut-off stream (e.g. FLAC "lost sync"): keep what decoded cleanly, like a truncated WAV.
                if not blocks:
                    raise InputFileError(
                        f"{name} is damaged and cannot be decoded ({_why(exc, name)})", _unreadable_fix(data)
                    ) from exc
                truncated = True
                log.warning(
                    "%s is damaged or truncated (%s); using the audio decoded before it",
                    name,
                    _why(exc, name),
                )
                break
            if not len(block):
                break
            decoded += len(block)
            if max_seconds is not None and decoded > max_seconds * rate:  # the header under-declared it
                raise AudioTooLong(name, decoded / rate, max_seconds, exact=False)
            blocks.append(_mono_block(block) if mono else block)
        declared = handle.frames
    width = 1 if mono else channels
    samples = np.concatenate(blocks) if blocks else np.zeros((0, width), dtype=np.float32)
    # MP3 lengths can be estimates, so only a clear shortfall counts as truncation.
    if not truncated and declared > 0 and len(samples) < 0.99 * declared:
        truncated = True
        log.warning(
            "%s is truncated (%d of %d frames decoded); using what is present", name, len(samples), declared
        )
    return DecodedAudio(np.ascontiguousarray(samples, dtype=np.float32), rate, truncated)


def _why(exc: BaseException, name: str) -> str:
    """A decoder's message without the in-memory file object it names (``<_io.BytesIO object at 0x...>``)."""
    return re.sub(r"<_io\.BytesIO object at 0x[0-9a-fA-F]+>", name, str(exc))


def _mono_block(block: np.ndarray) -> np.ndarray:
    """One block averaged to one channel, as ``to_mono_16k`` downmixes."""
    return block if block.shape[1] == 1 else downmix(block)[:, None]


def downmix(samples: np.ndarray) -> np.ndarray:
    """Mono float32 by averaging channels; non-finite samples become 0 first (logged), before the average, so
    one bad channel does not poison the others."""
    samples = np.asarray(samples)
    bad = ~np.isfinite(samples)
    if bad.any():
        log.warning("replacing %d non-finite samples (NaN/Inf) with silence", int(bad.sum()))
        samples = np.where(bad, 0.0, samples)
    if samples.ndim == 2:
        return samples.mean(axis=1, dtype=np.float64).astype(np.float32)
    return samples.astype(np.float32, copy=False).reshape(-1)


def _unreadable_fix(data: bytes) -> str:
    if data[4:8] == b"ftyp":  # ISO media (M4A/MP4/AAC): libsndfile has no AAC decoder
        return f"M4A/MP4/AAC audio is not supported; {_CONVERT_FIX}"
    return f"supported are WAV, FLAC, OGG (Vorbis/Opus), MP3, AIFF and RF64; otherwise {_CONVERT_FIX}"


def decode_audio_bytes(
    data: bytes, name: str = "audio", max_seconds: float | None = None, mono: bool = False
) -> DecodedAudio:
    """Decode a whole audio file held in memory, choosing the decoder from its content, not its name
    (``max_seconds``, ``mono``: see ``decode_with_soundfile``; a WAV's size already bounds its length)."""
    if not data:
        raise InputFileError(f"{name} is empty (0 bytes)", "record or export the audio again")
    if data[:4] == b"RIFF" and data[8:12] == b"WAVE":
        try:
            decoded = parse_wav(data, name)
        except _UndecodableWavEncoding:
            return decode_with_soundfile(data, name, max_seconds, mono)
        if max_seconds is not None and decoded.duration_s > max_seconds:
            raise AudioTooLong(name, decoded.duration_s, max_seconds)
        return decoded
    return decode_with_soundfile(data, name, max_seconds, mono)


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


def read_audio_file(path: Path) -> DecodedAudio:
    """Read an audio file at its own rate and channel count, with clear errors for anything unreadable."""
    path = Path(path)
    if not path.exists():
        raise InputFileError(f"audio file not found: {path}", "check the path")
    if path.is_dir():
        raise InputFileError(f"{path} is a directory, not an audio file")
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise InputFileError(f"cannot read {path}: {exc.strerror}") from exc
    return decode_audio_bytes(data, str(path))


def load_audio_file(path: Path) -> np.ndarray:
    """Read an audio file as float32 mono 16 kHz (a header-only WAV gives an empty array)."""
    decoded = read_audio_file(path)
    return to_mono_16k(decoded.samples, decoded.sample_rate)


class PcmStreamDecoder:
    """Raw interleaved PCM arriving in pieces (stdin, a socket, a sound card) → mono 16 kHz float32.

    Keeps the bytes of an incomplete frame for the next piece and resamples with one soxr stream, so
    the output equals converting the whole recording at once (no clicks at piece boundaries).
    """

    def __init__(self, sample_format: str, sample_rate: int, channels: int) -> None:
        if sample_format not in ("s16le", "f32le"):
            raise UsageError(f"unknown input format {sample_format!r}", "use s16le or f32le")
        if not 1000 <= sample_rate <= 384000:
            raise UsageError(f"the input rate must be in [1000, 384000] Hz, got {sample_rate}")
        if not 1 <= channels <= 16:
            raise UsageError(f"the input must have 1 to 16 channels, got {channels}")
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
        frames = decode_raw_pcm(data[:usable], self.sample_format, self.channels)
        bad = ~np.isfinite(frames)
        if bad.any():
            log.warning("replacing %d non-finite samples (NaN/Inf) with silence", int(bad.sum()))
            frames = np.where(bad, np.float32(0.0), frames)
        mono = frames.mean(axis=1, dtype=np.float64).astype(np.float32) if self.channels > 1 else frames[:, 0]
        if self._resampler is not None:
            mono = self._resampler.resample_chunk(np.ascontiguousarray(mono), last=last)
        return np.ascontiguousarray(mono, dtype=np.float32)


def checked_samples(pcm: np.ndarray, what: str = "a stream") -> np.ndarray:
    """The samples every engine and stream takes: 1-D float32 at ``SAMPLE_RATE``, finite (else a UsageError)."""
    samples = np.asarray(pcm)
    if samples.ndim != 1 or samples.dtype != np.float32:
        raise UsageError(
            f"{what} takes 1-D float32 samples at {SAMPLE_RATE} Hz, got {samples.dtype} with shape {samples.shape}",
            "downmix, convert and resample first (inference.audio.io.to_mono_16k)",
        )
    if not np.isfinite(samples).all():
        raise UsageError("the audio holds NaN or infinite samples", "check the audio source")
    return samples
