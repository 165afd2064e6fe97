"""RIFF/WAVE (incl. WAVE_FORMAT_EXTENSIBLE) read block by block from a seekable file, so the common case needs
no extra dependency and never holds more than one block of samples.

Only the chunk headers are read to find the format and the data; sizes are checked against the bytes present
(a data chunk may declare more than the file holds: then the complete frames present are used, as a truncated
file). Encodings not decoded here (A-law, mu-law, ADPCM) raise ``UndecodableWavEncoding`` before any sample is
read, so the caller can hand the file to libsndfile instead.
"""

from __future__ import annotations

import logging
import struct
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import BinaryIO

import numpy as np

from inference.audio.problems import FileProblems
from inference.errors import InputFileError

log = logging.getLogger(__name__)

CONVERT_FIX = "convert it to WAV, e.g. `ffmpeg -i INPUT -ar 16000 -ac 1 output.wav`"
_WAVE_FORMAT_PCM = 0x0001
_WAVE_FORMAT_IEEE_FLOAT = 0x0003
_WAVE_FORMAT_EXTENSIBLE = 0xFFFE
# Bytes 2..15 of every KSDATAFORMAT_SUBTYPE_* GUID; the first two bytes carry the format tag.
_KSDATAFORMAT_GUID_TAIL = bytes.fromhex("000000001000800000aa00389b71")
# Streaming writers that cannot seek back leave the data size at its maximum.
_UNKNOWN_CHUNK_SIZE = 0xFFFFFFFF
_FMT_BYTES_READ = 40  # the extensible layout's end; a longer format chunk's tail is not needed
# Real files have a handful of chunks (fmt, data, LIST, cue, ...); a file of millions of empty ones is not audio.
_MAX_CHUNKS = 1024


def is_wav(head: bytes) -> bool:
    return head[:4] == b"RIFF" and head[8:12] == b"WAVE"


class UndecodableWavEncoding(InputFileError):
    """A valid WAV whose sample encoding this parser does not implement (libsndfile may)."""


@dataclass(frozen=True)
class WavFormat:
    tag: int
    channels: int
    rate: int
    bits: int
    block_align: int

    @property
    def width(self) -> int:
        # Samples narrower than their container (e.g. 20-bit in 3 bytes) are left-justified, so scaling by the
        # container width is exact.
        return (self.bits + 7) // 8

    @property
    def frame_bytes(self) -> int:
        return self.width * self.channels


class WavReader:
    """The samples of a WAV file as float32 blocks of shape (frames, channels), read on demand."""

    def __init__(self, handle: BinaryIO, size: int, name: str) -> None:
        if size < 12:
            raise InputFileError(f"{name} is not a WAV file (no RIFF/WAVE header)", CONVERT_FIX)
        fmt, data_offset, present, declared = _scan_chunks(handle, size, name)
        if fmt.channels < 1 or fmt.rate < 1:
            raise InputFileError(
                f"{name} declares {fmt.channels} channels at {fmt.rate} Hz", "re-export the audio file"
            )
        self._decode = _sample_decoder(fmt, name)
        self._handle, self._offset, self.name = handle, data_offset, name
        self.rate, self.channels, self._frame_bytes = fmt.rate, fmt.channels, fmt.frame_bytes
        self.declared_frames: int | None = present // fmt.frame_bytes
        self.truncated = present % fmt.frame_bytes != 0 or (
            declared != _UNKNOWN_CHUNK_SIZE and present < declared
        )
        self._present, self._declared = present, declared
        self.problems = FileProblems()

    def blocks(self, block_bytes: int) -> Iterator[np.ndarray]:
        if self.truncated:
            self.problems.add(
                log,
                f"{self.name} is truncated (data chunk declares {self._declared} bytes, {self._present} present); "
                f"using the {self.declared_frames} complete frames",
            )
        step = max(1, block_bytes // (4 * self.channels)) * self._frame_bytes
        remaining = (self.declared_frames or 0) * self._frame_bytes
        self._handle.seek(self._offset)
        while remaining > 0:
            raw = self._handle.read(min(step, remaining))
            if not raw:
                return
            raw = raw[: len(raw) // self._frame_bytes * self._frame_bytes]
            remaining -= len(raw)
            yield self._decode(raw).reshape(-1, self.channels)


def _scan_chunks(handle: BinaryIO, size: int, name: str) -> tuple[WavFormat, int, int, int]:
    """Walk the RIFF chunks (any order, unknown ones skipped, odd sizes padded) → format, data offset, data bytes
    present and the data size the header declares."""
    handle.seek(0)
    head = handle.read(12)
    if not is_wav(head):
        raise InputFileError(
            f"{name} is not a WAV file (no RIFF/WAVE header)",
            f"{CONVERT_FIX}, or pass raw PCM with `-` and --input-format",
        )
    pos = 12
    fmt: WavFormat | None = None
    data: tuple[int, int, int] | None = None
    chunks = 0
    while pos + 8 <= size and (fmt is None or data is None):
        chunks += 1
        if chunks > _MAX_CHUNKS:
            raise InputFileError(
                f"{name} has more than {_MAX_CHUNKS} RIFF chunks before its audio; it is not a WAV file Captioneer "
                "can read",
                CONVERT_FIX,
            )
        handle.seek(pos)
        chunk_id, chunk_size = struct.unpack("<4sI", handle.read(8))
        if chunk_id == b"fmt ":
            fmt = _parse_fmt(handle.read(min(chunk_size, _FMT_BYTES_READ)), name)
        elif chunk_id == b"data":
            data = (pos + 8, min(chunk_size, size - pos - 8), chunk_size)
        pos += 8 + chunk_size + (chunk_size & 1)
    if fmt is None:
        raise InputFileError(f"{name} has no WAV format chunk", "re-export the audio file")
    if data is None:
        raise InputFileError(f"{name} has no audio data chunk", "re-export the audio file")
    return (fmt, *data)


def _parse_fmt(body: bytes, name: str) -> WavFormat:
    if len(body) < 16:
        raise InputFileError(f"{name} has a damaged WAV format chunk", "re-export the audio file")
    tag, channels, rate, _byte_rate, block_align, bits = struct.unpack_from("<HHIIHH", body, 0)
    if tag == _WAVE_FORMAT_EXTENSIBLE:
        if len(body) < 40 or body[26:40] != _KSDATAFORMAT_GUID_TAIL:
            raise UndecodableWavEncoding(
                f"{name} uses a WAVE_FORMAT_EXTENSIBLE sub-format Captioneer cannot read", CONVERT_FIX
            )
        (tag,) = struct.unpack_from("<H", body, 24)
    return WavFormat(tag, channels, rate, bits, block_align)


def _sample_decoder(fmt: WavFormat, name: str) -> Callable[[bytes], np.ndarray]:
    """The function that turns whole frames of this format into interleaved float32 samples."""
    if fmt.block_align not in (0, fmt.frame_bytes):
        raise InputFileError(
            f"{name} declares {fmt.block_align}-byte frames for {fmt.channels} x {fmt.bits}-bit samples",
            "re-export the audio file",
        )
    width = fmt.width
    if fmt.tag == _WAVE_FORMAT_PCM and width in (1, 2, 3, 4):
        return lambda raw: _decode_pcm(raw, width)
    if fmt.tag == _WAVE_FORMAT_IEEE_FLOAT and width in (4, 8):
        dtype = "<f4" if width == 4 else "<f8"
        return lambda raw: np.frombuffer(raw, dtype=dtype).astype(np.float32)
    raise UndecodableWavEncoding(
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
