"""Audio files decoded within ``AudioLimits``: the rate and channel ranges and the length from the header, the
length again while decoding (a FLAC that states no length), and memory that follows the decoded mono output."""

from __future__ import annotations

import io
import tracemalloc
from pathlib import Path

import numpy as np
import pytest
import soundfile

from inference.audio.decoding import decode_mono_16k, mono_16k_blocks, open_audio
from inference.audio.limits import AudioLimits, AudioTooLong
from inference.errors import InputFileError
from tests.audio.wav_builders import PCM, chunk, fmt_body, riff, wav_bytes


def flac(rate: int, seconds: float, channels: int = 1, level: float = 0.0) -> bytes:
    out = io.BytesIO()
    with soundfile.SoundFile(out, "w", rate, channels, "PCM_16", format="FLAC") as handle:
        frames = int(rate * seconds)
        block = np.full((min(frames, rate * 10), channels), level, np.float32)
        while frames > 0:
            handle.write(block[:frames])
            frames -= len(block)
    return out.getvalue()


def without_length(data: bytes) -> bytes:
    """The FLAC with STREAMINFO total_samples set to 0 ("unknown"), as streaming encoders write it."""
    assert data[:4] == b"fLaC" and data[4] & 0x7F == 0  # the first metadata block is STREAMINFO
    patched = bytearray(data)
    patched[8 + 13] &= 0xF0  # total_samples: the low 4 bits of byte 13 and bytes 14-17 of STREAMINFO
    patched[8 + 14 : 8 + 18] = b"\0\0\0\0"
    return bytes(patched)


def test_a_wav_declaring_1_hz_is_refused_from_its_header() -> None:
    data = riff(chunk(b"fmt ", fmt_body(PCM, 1, 1, 16)), chunk(b"data", b"\0" * 7000))  # 3500 s at 1 Hz
    with pytest.raises(
        InputFileError, match=r"slow\.wav declares a sample rate of 1 Hz.*1000-384000 Hz"
    ) as info:
        decode_mono_16k(data, AudioLimits(3600), "slow.wav")
    assert info.value.fix and "ffmpeg" in info.value.fix


def test_a_flac_at_655350_hz_is_refused_from_its_header() -> None:
    data = flac(655350, 0.5)
    with pytest.raises(InputFileError, match=r"fast\.flac declares a sample rate of 655350 Hz"):
        decode_mono_16k(data, AudioLimits(3600), "fast.flac")


def test_more_channels_than_the_limit_are_refused() -> None:
    data = wav_bytes(np.zeros((10, 17)), 16000)
    with pytest.raises(InputFileError, match="17 channels; audio files may have 1 to 16"):
        decode_mono_16k(data, AudioLimits(60), "many.wav")


def test_a_flac_without_a_length_is_decoded_and_counted() -> None:
    data = without_length(flac(16000, 12.0, level=0.25))
    with open_audio(data, "stream.flac") as reader:
        assert reader.declared_frames is None
    audio = decode_mono_16k(data, AudioLimits(20), "stream.flac")
    assert audio.shape == (12 * 16000,) and np.allclose(audio, 0.25, atol=1e-4)
    with pytest.raises(AudioTooLong) as refused:
        decode_mono_16k(data, AudioLimits(5), "stream.flac")
    # Refused once decoding passes the limit, with the length it got to, not libsndfile's 2**63 frames.
    assert not refused.value.exact and 5 < refused.value.seconds < 5 + 2
    assert str(refused.value).startswith("stream.flac lasts more than 5.")


def test_a_header_declaring_more_than_the_limit_is_refused_before_decoding() -> None:
    data = flac(48000, 30.0, channels=2)
    with open_audio(data, "long.flac") as reader:
        blocks = mono_16k_blocks(reader, AudioLimits(10, "pass --max-audio-s 40"))
        with pytest.raises(AudioTooLong) as refused:
            next(blocks)
    assert refused.value.exact and refused.value.seconds == pytest.approx(30.0)
    assert refused.value.fix == "pass --max-audio-s 40"


def test_a_wav_shorter_than_its_data_chunk_claims_is_sized_by_the_bytes_present() -> None:
    body = np.zeros(16000, "<i2").tobytes()
    data = riff(chunk(b"fmt ", fmt_body(PCM, 1, 16000, 16)), chunk(b"data", body, declared_size=0x7FFFFFF0))
    # The header claims 18 hours; the file holds one second, and that is what the limit is checked against.
    assert decode_mono_16k(data, AudioLimits(2), "short.wav").shape == (16000,)


def test_a_wav_of_endless_empty_chunks_is_refused_without_walking_them_all() -> None:
    junk = chunk(b"JUNK", b"") * 200_000  # 1.6 MB of 8-byte chunks before the format
    data = riff(junk, chunk(b"fmt ", fmt_body(PCM, 1, 16000, 16)), chunk(b"data", b"\0\0"))
    with pytest.raises(InputFileError, match="junk.wav has more than 1024 RIFF chunks"):
        decode_mono_16k(data, AudioLimits(60), "junk.wav")
    few = riff(
        chunk(b"JUNK", b"") * 100, chunk(b"fmt ", fmt_body(PCM, 1, 16000, 16)), chunk(b"data", b"\0\0")
    )
    assert decode_mono_16k(few, AudioLimits(60), "few.wav").shape == (1,)


@pytest.mark.parametrize("container", ["WAV", "FLAC"])
def test_decoding_holds_one_block_plus_the_mono_output(tmp_path: Path, container: str) -> None:
    rate, channels, seconds = 48000, 4, 40.0
    path = tmp_path / f"wide.{container.lower()}"
    tone = (0.3 * np.sin(np.arange(int(rate * seconds)) * 0.05)).astype(np.float32)
    soundfile.write(
        path, np.repeat(tone[:, None], channels, axis=1), rate, subtype="PCM_16", format=container
    )
    whole_input = (
        int(rate * seconds) * channels * 4
    )  # the float32 samples a whole-file read would hold: 31 MB
    output = int(16000 * seconds) * 4  # 2.6 MB
    tracemalloc.start()
    try:
        audio = decode_mono_16k(path, AudioLimits(60), path.name)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert abs(audio.size - 16000 * seconds) <= 2
    assert peak < output + 4 * 1024 * 1024, (
        f"peak {peak / 1e6:.1f} MB, whole input {whole_input / 1e6:.0f} MB"
    )


def test_streamed_blocks_join_to_the_whole_file() -> None:
    data = wav_bytes(np.sin(np.arange(44100 * 3) * 0.01) * 0.5, 44100)
    with open_audio(data, "tone.wav") as reader:
        joined = np.concatenate(list(mono_16k_blocks(reader, AudioLimits(10))))
    np.testing.assert_array_equal(joined, decode_mono_16k(data, AudioLimits(10), "tone.wav"))
    assert abs(joined.size - 16000 * 3) <= 1
