"""One way to turn an audio file into mono float32 at ``SAMPLE_RATE``, for the server, the CLI and the app alike:
block by block, within ``AudioLimits``.

The reader (``WavReader`` for WAV, ``SoundfileReader`` for what libsndfile reads, ``FfmpegReader`` for the rest
where ffmpeg is installed: MP4/M4A, WebM, video files) yields at most ``BLOCK_BYTES`` of
float32 samples at a time; each block is downmixed and fed to one soxr ``ResampleStream``, so memory holds one
input block plus the mono 16 kHz output, whatever the file's rate, channel count or compression. The header's
rate, channels and length are checked before the first block, and the length again as blocks decode (a header
may under-declare it or not state it at all).

``mono_16k_blocks`` is the streaming form (``FileBlocks`` reads a file with it as often as a streamed offline job
asks, so windows are transcribed as they come); ``decode_mono_16k`` collects it into one array that grows in place (``ndarray.resize``: realloc, i.e. mremap for large buffers, not a copy).
"""

from __future__ import annotations

import contextlib
import io
import logging
import math
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO, Protocol

import numpy as np
import soxr

from inference.audio.ffmpeg_reader import FfmpegReader, find_ffmpeg
from inference.audio.limits import AudioLimits, AudioTooLong
from inference.audio.problems import FileProblems
from inference.audio.soundfile_reader import SoundfileReader
from inference.audio.wav import UndecodableWavEncoding, WavReader, is_wav
from inference.contract import SAMPLE_RATE
from inference.errors import InputFileError
from inference.native_stderr import DECODER_LINES, native_output_logged

log = logging.getLogger(__name__)

BLOCK_BYTES = 1 << 20  # float32 input samples decoded at once
_GROW_SAMPLES = 1 << 20  # the output's first capacity when the header states no length


class BlockReader(Protocol):
    name: str
    rate: int
    channels: int
    declared_frames: int | None  # None: the header does not say
    truncated: bool  # set once the blocks are read
    problems: FileProblems  # what reading found wrong (filled as the blocks are read)

    def blocks(self, block_bytes: int) -> Iterator[np.ndarray]: ...


AudioInput = Path | bytes


@contextlib.contextmanager
def open_audio(source: AudioInput, name: str | None = None) -> Iterator[BlockReader]:
    """A reader for a file on disk or a file's bytes (an upload), chosen by content, not by name. Errors name
    ``name`` (default: the path, or "audio"). While a file libsndfile reads is open, fd 2 is filtered so its
    decoders' chatter goes to the debug log (``native_stderr``); other stderr lines come out when it closes."""
    label = name if name is not None else str(source) if isinstance(source, Path) else "audio"
    with _binary(source, label) as (handle, size):
        if size == 0:
            raise InputFileError(f"{label} is empty (0 bytes)", "record or export the audio again")
        head = handle.read(12)
        wav = None
        if is_wav(head):
            with contextlib.suppress(UndecodableWavEncoding):  # A-law, mu-law, ADPCM, ...: libsndfile's
                wav = WavReader(handle, size, label)
        if wav is not None:
            yield wav
            return
        handle.seek(0)
        with native_output_logged(DECODER_LINES):
            try:
                reader: SoundfileReader | FfmpegReader = SoundfileReader(handle, label, head)
            except InputFileError as refusal:  # MP4/M4A, WebM, Matroska, video: ffmpeg's, where installed
                reader = _ffmpeg_reader(source, label, refusal)
            try:
                yield reader
            finally:
                reader.close()


def _ffmpeg_reader(source: AudioInput, label: str, refusal: InputFileError) -> FfmpegReader:
    """The file through ffmpeg, or libsndfile's refusal (with ffmpeg's reason when ffmpeg could not read it
    either, and the advice to install it when that could help)."""
    tools = find_ffmpeg()
    if tools is None:
        raise refusal
    try:
        return FfmpegReader(source, label, tools)
    except InputFileError as also:
        raise InputFileError(also.message, refusal.fix) from None


@contextlib.contextmanager
def _binary(source: AudioInput, label: str) -> Iterator[tuple[BinaryIO, int]]:
    if isinstance(source, bytes):
        yield io.BytesIO(source), len(source)  # BytesIO shares the bytes: no copy
        return
    path = Path(source)
    if path.is_dir():
        raise InputFileError(f"{label} is a directory, not an audio file")
    try:
        handle = path.open("rb")
    except FileNotFoundError:
        raise InputFileError(f"audio file not found: {label}", "check the path") from None
    except OSError as exc:
        raise InputFileError(f"cannot read {label}: {exc.strerror}") from None
    with handle:
        yield handle, path.stat().st_size


def mono_16k_blocks(reader: BlockReader, limits: AudioLimits) -> Iterator[np.ndarray]:
    """The file as mono float32 blocks at ``SAMPLE_RATE``; refused (``AudioTooLong``, ``InputFileError``) before
    the first block when the header is out of range, and as soon as decoding passes the length limit. Non-finite
    samples become silence, with a warning at the end (``reader.problems``)."""
    rate, name = reader.rate, reader.name
    check_header(reader, limits)
    most = limits.max_frames(rate)
    resampler = (
        soxr.ResampleStream(rate, SAMPLE_RATE, 1, dtype="float32", quality="VHQ")
        if rate != SAMPLE_RATE
        else None
    )
    decoded = replaced = 0
    for block in reader.blocks(BLOCK_BYTES):
        decoded += len(block)
        if decoded > most:  # the header under-declared the length, or did not state it
            raise AudioTooLong(name, decoded / rate, limits, exact=False)
        mono, bad = downmix_counting(block)
        replaced += bad
        yield mono if resampler is None else resampler.resample_chunk(mono)
    if resampler is not None:
        yield resampler.resample_chunk(np.zeros(0, np.float32), last=True)
    if replaced:
        reader.problems.add(log, f"{name}: replaced {replaced} non-finite samples (NaN/Inf) with silence")


def check_header(reader: BlockReader, limits: AudioLimits) -> None:
    """The rate, channel count and declared length against ``limits`` (before any block is decoded)."""
    limits.check_layout(reader.name, reader.rate, reader.channels)
    if reader.declared_frames is not None and reader.declared_frames > limits.max_frames(reader.rate):
        raise AudioTooLong(reader.name, reader.declared_frames / reader.rate, limits)


class FileBlocks:
    """A file's audio as mono 16 kHz blocks, decoded afresh from its start each time it is called (a streamed
    offline job may read it twice: ``protocol.OpenJob``), so no more than a block is ever held. The header is
    checked when this is made, so a bad file fails before a model loads."""

    def __init__(self, source: AudioInput, limits: AudioLimits, name: str | None = None) -> None:
        self.source, self.limits, self.name = source, limits, name
        with open_audio(source, name) as reader:
            check_header(reader, limits)
            self.expected_samples = (
                math.ceil(reader.declared_frames * SAMPLE_RATE / reader.rate)
                if reader.declared_frames is not None and reader.rate > 0
                else None
            )

        self.samples = 0  # decoded by the latest read (all of them once a read has ended)
        # What the first complete read found wrong with the file (damage, truncation, NaN), for a window to show.
        self.problems: tuple[str, ...] = ()
        self._reads_ended = 0  # reads that went to the end of the file (each would repeat its warnings)

    def __call__(self) -> Iterator[np.ndarray]:
        self.samples = 0
        with open_audio(self.source, self.name) as reader:
            reader.problems.warns = self._reads_ended == 0
            for block in mono_16k_blocks(reader, self.limits):
                self.samples += block.size
                yield block
            if self._reads_ended == 0:
                self.problems = tuple(reader.problems.found)
        self._reads_ended += 1

    def pieces(self, step: int) -> Iterator[np.ndarray]:
        """The audio in pieces of ``step`` samples (the last one shorter), as a live path takes it."""
        carry = np.zeros(0, np.float32)
        for block in self():
            if carry.size:
                block = np.concatenate([carry, block])
            whole = block.size - block.size % step
            for start in range(0, whole, step):
                yield block[start : start + step]
            carry = block[whole:]
        if carry.size:
            yield carry

    def decode_all(self) -> np.ndarray:
        """The whole clip in one array (for what needs it all at once: speech stretches for subtitles)."""
        return decode_mono_16k(self.source, self.limits, self.name)


def decode_mono_16k(source: AudioInput, limits: AudioLimits, name: str | None = None) -> np.ndarray:
    """The whole file as one mono float32 array at ``SAMPLE_RATE`` (empty for a header-only WAV)."""
    with open_audio(source, name) as reader:
        expected = (
            math.ceil(reader.declared_frames * SAMPLE_RATE / reader.rate) + 64
            if reader.declared_frames is not None and reader.rate > 0
            else _GROW_SAMPLES
        )
        most = limits.max_output_samples + 64
        out = np.empty(min(expected, most), np.float32)
        size = 0
        for block in mono_16k_blocks(reader, limits):
            if size + block.size > out.size:
                out.resize(max(min(2 * out.size, most), size + block.size), refcheck=False)
            out[size : size + block.size] = block
            size += block.size
        out.resize(size, refcheck=False)
        return out


def downmix_counting(samples: np.ndarray) -> tuple[np.ndarray, int]:
    """Mono float32 by averaging channels, and how many non-finite samples became 0 first (before the average,
    so one bad channel does not poison the others)."""
    samples = np.asarray(samples)
    bad = ~np.isfinite(samples)
    count = int(bad.sum())
    if count:
        samples = np.where(bad, np.float32(0.0), samples)
    if samples.ndim == 2 and samples.shape[1] > 1:
        return samples.mean(axis=1, dtype=np.float64).astype(np.float32), count
    return np.ascontiguousarray(samples.reshape(-1), dtype=np.float32), count
