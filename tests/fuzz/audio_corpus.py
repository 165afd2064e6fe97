"""Valid tiny audio files for the audio reader fuzz campaigns, the format-aware mutators, and the judge.

Each file is written by libsndfile (``soundfile``) from a seeded tone with noise, so the corpus is the same on
every machine with the same libsndfile. The judge asks of every outcome what a user of the server or the CLI is
owed: a refusal that names their file, or samples that are finite, within the length limit, read the same by
libsndfile where it reads a WAV too, and (for WAV and FLAC) damage past the header that costs the damaged part
only: the length, and with it the time of everything after it, stays as the file had it.
"""

from __future__ import annotations

import io
import random
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from tests.fuzz import harness

Judge = Callable[[harness.Case, harness.Outcome], "str | None"]


@dataclass(frozen=True)
class AudioFile:
    data: bytes
    samples: int  # mono 16 kHz samples it decodes to
    header: int  # bytes before the first audio (where the layout and length live)
    keeps_time: bool  # damage past the header keeps the decoded length (WAV, FLAC) ...
    # ... except damaged coded frames at the end, which have no frame after them to resume at (FLAC: byte offsets
    # of its frames, each FLAC_FRAME samples at 16 kHz)
    frames: tuple[int, ...] = ()


def _signal(rate: int, channels: int, seconds: float) -> np.ndarray:
    frames = int(rate * seconds)
    t = np.arange(frames) / rate
    tone = 0.3 * np.sin(2 * np.pi * 440.0 * t)[:, None] * np.ones((1, channels))
    noise = 0.05 * np.random.default_rng(22).standard_normal((frames, channels))
    return (tone + noise).astype(np.float32)


def _written(format_: str, subtype: str, rate: int, channels: int, seconds: float) -> bytes:
    import soundfile

    buffer = io.BytesIO()
    soundfile.write(buffer, _signal(rate, channels, seconds), rate, format=format_, subtype=subtype)
    return buffer.getvalue()


def _samples(rate: int, seconds: float) -> int:
    return int(np.ceil(int(rate * seconds) * 16000 / rate))


def _wav_data_offset(data: bytes) -> int:
    at = data.index(b"data")
    return at + 8


def flac_first_frame(data: bytes) -> int:
    """The end of the metadata blocks (4-byte headers; the high bit of the first byte marks the last)."""
    pos = 4  # "fLaC"
    while True:
        last, length = data[pos] & 0x80, int.from_bytes(data[pos + 1 : pos + 4], "big")
        pos += 4 + length
        if last:
            return pos


FLAC_FRAME = 4096  # samples per frame as libsndfile writes FLAC (the corpus's FLAC is at 16 kHz)


def flac_frame_offsets(data: bytes) -> tuple[int, ...]:
    """The byte offsets of the frames of a FLAC that libsndfile wrote: fixed block size, so every frame header
    repeats the first one's sync code and channel byte (the last may code another block size), then the frame
    number (one byte below 128)."""
    first = flac_first_frame(data)
    sync, channels = data[first : first + 2], data[first + 3]
    offsets = [first]
    at = first
    while (at := data.find(sync, at + 1)) >= 0 and at + 4 < len(data):
        if data[at + 3] == channels and data[at + 4] == len(offsets):
            offsets.append(at)
    return tuple(offsets)


def _ogg_pages(data: bytes) -> list[tuple[int, int, int]]:
    """(offset, length, granule position) of each whole Ogg page."""
    pages, pos = [], 0
    while pos + 27 <= len(data) and data[pos : pos + 4] == b"OggS":
        segments = data[pos + 26]
        if pos + 27 + segments > len(data):
            break
        length = 27 + segments + sum(data[pos + 27 : pos + 27 + segments])
        if pos + length > len(data):
            break
        pages.append((pos, length, int.from_bytes(data[pos + 6 : pos + 14], "little")))
        pos += length
    return pages


def _ogg_header_end(data: bytes) -> int:
    """The end of the header pages (granule position 0: identification, comments, codebooks)."""
    ends = [offset + length for offset, length, granule in _ogg_pages(data) if granule == 0]
    return max(ends)


KINDS = ("wav-pcm16", "wav-float", "wav-extensible", "wav-ulaw", "flac", "ogg-vorbis", "ogg-opus", "mp3")
FFMPEG_KINDS = ("m4a", "webm")  # read through ffmpeg (FfmpegReader), written by it: need ffmpeg installed


def _ffmpeg_written(container: str, codec: str, rate: int, seconds: float) -> bytes:
    """A tone written by ffmpeg (bit-exact: the same bytes for the same ffmpeg); through a file, as the M4A
    muxer seeks back to write its index up front."""
    import tempfile

    from tests.audio.media_builders import generated

    with tempfile.TemporaryDirectory() as folder:
        out = Path(folder) / f"tone.{container}"
        graph = f"sine=f=440:r={rate}:d={seconds}"
        return generated(graph, out, "-c:a", codec, "-fflags", "+bitexact", "-f", container).read_bytes()


def ffmpeg_corpus() -> dict[str, AudioFile]:
    m4a = _ffmpeg_written("ipod", "aac", 22050, 1.0)  # ipod: the M4A muxer, its index written up front
    webm = _ffmpeg_written("webm", "libopus", 48000, 1.0)
    return {
        "m4a": AudioFile(m4a, _samples(22050, 1.0), 64, False),
        "webm": AudioFile(webm, _samples(48000, 1.0), 64, False),
    }


def corpus() -> dict[str, AudioFile]:
    wav16 = _written("WAV", "PCM_16", 22050, 2, 0.25)
    wavf32 = _written("WAV", "FLOAT", 48000, 1, 0.1)  # with fact and PEAK chunks
    wavex24 = _written("WAVEX", "PCM_24", 16000, 3, 0.2)
    ulaw = _written("WAV", "ULAW", 8000, 1, 0.3)  # WavReader passes it to libsndfile
    flac = _written("FLAC", "PCM_16", 16000, 2, 2.0)  # 8 frames of 4096
    vorbis = _written("OGG", "VORBIS", 22050, 2, 1.0)
    opus = _written("OGG", "OPUS", 48000, 1, 1.0)
    mp3 = _written("MP3", "MPEG_LAYER_III", 44100, 1, 1.0)
    return {
        "wav-pcm16": AudioFile(wav16, _samples(22050, 0.25), _wav_data_offset(wav16), True),
        "wav-float": AudioFile(wavf32, _samples(48000, 0.1), _wav_data_offset(wavf32), True),
        "wav-extensible": AudioFile(wavex24, _samples(16000, 0.2), _wav_data_offset(wavex24), True),
        "wav-ulaw": AudioFile(ulaw, _samples(8000, 0.3), _wav_data_offset(ulaw), True),
        "flac": AudioFile(flac, _samples(16000, 2.0), flac_first_frame(flac), True, flac_frame_offsets(flac)),
        "ogg-vorbis": AudioFile(vorbis, _samples(22050, 1.0), _ogg_header_end(vorbis), False),
        "ogg-opus": AudioFile(opus, _samples(48000, 1.0), _ogg_header_end(opus), False),
        "mp3": AudioFile(mp3, _samples(44100, 1.0), 128, False),
    }


# ------------------------------------------------------------------------------------------ mutators


def _ogg_crc_table() -> list[int]:
    table = []
    for byte in range(256):
        value = byte << 24
        for _ in range(8):
            value = ((value << 1) ^ 0x04C11DB7) if value & 0x80000000 else value << 1
        table.append(value & 0xFFFFFFFF)
    return table


_OGG_CRC = _ogg_crc_table()


def _ogg_crc(page: bytes) -> int:
    value = 0
    for byte in page:
        value = ((value << 8) & 0xFFFFFFFF) ^ _OGG_CRC[((value >> 24) ^ byte) & 0xFF]
    return value


def with_ogg_checksums(mutator: harness.Mutator) -> harness.Mutator:
    """``mutator``, then every whole Ogg page's checksum made right again, so the damage reaches the codec
    (libogg drops a page whose checksum fails before Vorbis or Opus see it)."""

    def apply(data: bytes, rng: random.Random) -> bytes:
        out = bytearray(mutator(data, rng))
        for offset, length, _granule in _ogg_pages(bytes(out)):
            out[offset + 22 : offset + 26] = b"\0\0\0\0"
            out[offset + 22 : offset + 26] = _ogg_crc(bytes(out[offset : offset + length])).to_bytes(
                4, "little"
            )
        return bytes(out)

    return harness.named(f"ogg_{mutator.__name__}", apply)


# ------------------------------------------------------------------------------------------ the judge


def judge(input_name: str, original: AudioFile, max_samples: int) -> Judge:
    def check(case: harness.Case, outcome: harness.Outcome) -> str | None:
        if outcome.left:  # an upload read through ffmpeg goes through a temporary file: it must go too
            return f"left behind: {outcome.left}"
        if outcome.kind == harness.REFUSED:
            if input_name not in outcome.message or "<_io." in outcome.message:
                return f"a refusal without the file's name: {outcome.message}"
            if "captioneer-upload" in outcome.message:
                return f"a refusal naming a temporary file: {outcome.message}"
                return f"a refusal without the file's name: {outcome.message}"
            return None
        value = outcome.value
        if not value["finite"]:
            return "non-finite samples reached the model"
        if value["samples"] > max_samples:
            return f"{value['samples']} samples, more than the limit's {max_samples}"
        agreement = value["libsndfile"]
        if agreement is not None and not agreement.startswith("refused"):  # WavReader is the more lenient
            return f"WavReader and libsndfile read it differently: {agreement}"
        if original.keeps_time and _damaged_past_header(case.data, original):
            shortest = _shortest_after_damage(case.data, original)
            if not shortest <= value["samples"] <= original.samples:
                return (
                    f"damage past the header changed the length: {value['samples']} samples, expected "
                    f"{shortest}..{original.samples}"
                )
        return None

    return check


def _damaged_past_header(data: bytes, original: AudioFile) -> bool:
    """The same length with every changed byte past the header (the audio damaged in place)."""
    if len(data) != len(original.data) or data == original.data:
        return False
    first = next(i for i, (a, b) in enumerate(zip(data, original.data, strict=True)) if a != b)
    return first >= original.header


def _shortest_after_damage(data: bytes, original: AudioFile) -> int:
    """The fewest samples a read of ``data`` may keep: all, unless damaged frames run to the end of the file;
    then up to the frame before that run (libsndfile decodes a frame ahead, so damage can fail the read of the
    frame before it, and a seek into that frame)."""
    if not original.frames:
        return original.samples
    changed = [i for i, (a, b) in enumerate(zip(data, original.data, strict=True)) if a != b]
    damaged = {sum(1 for offset in original.frames if offset <= i) - 1 for i in changed}
    last = len(original.frames) - 1
    tail = last
    while tail in damaged:
        tail -= 1
    if tail == last:
        return original.samples
    return max(0, tail) * FLAC_FRAME
