"""Audio file input: WAV layouts, other containers through soundfile, and the defined edge cases."""

from __future__ import annotations

import io
import logging
import shutil
import subprocess
import sys
import wave
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
import soundfile

from inference.audio.decoding import BLOCK_BYTES, AudioInput, FileBlocks, open_audio
from inference.audio.io import TARGET_RATE, decode_raw_pcm, load_audio_file, to_mono_16k
from inference.audio.limits import AudioLimits
from inference.audio.wav import UndecodableWavEncoding, WavReader
from inference.errors import InputFileError, UsageError
from tests.audio import wav_builders as _wav

EXTENSIBLE, IEEE_FLOAT, PCM = _wav.EXTENSIBLE, _wav.IEEE_FLOAT, _wav.PCM
chunk, dominant_frequency, encode, fmt_body = _wav.chunk, _wav.dominant_frequency, _wav.encode, _wav.fmt_body
riff, sine, wav_bytes = _wav.riff, _wav.sine, _wav.wav_bytes


@dataclass(frozen=True)
class Native:
    samples: np.ndarray  # float32 (frames, channels) at the file's own rate
    sample_rate: int
    truncated: bool


def read_native(source: AudioInput, name: str = "audio") -> Native:
    """What the file's reader yields, all blocks joined: the samples before downmixing and resampling."""
    with open_audio(source, name) as reader:
        blocks = list(reader.blocks(BLOCK_BYTES))
        samples = np.concatenate(blocks) if blocks else np.zeros((0, reader.channels), np.float32)
        return Native(samples, reader.rate, reader.truncated)


def write(tmp_path: Path, name: str, data: bytes) -> Path:
    path = tmp_path / name
    path.write_bytes(data)
    return path


# --- WAV sample formats ------------------------------------------------------------------------------

# (bits, float?, extensible?, max quantisation error)
FORMATS = [
    (8, False, False, 1 / 128),
    (16, False, False, 1 / 32768),
    (24, False, False, 1 / (1 << 23)),
    (32, False, False, 1e-7),
    (32, True, False, 1e-7),
    (64, True, False, 1e-7),
    (16, False, True, 1 / 32768),
    (24, False, True, 1 / (1 << 23)),
    (32, True, True, 1e-7),
]


@pytest.mark.parametrize(("bits", "as_float", "extensible", "tolerance"), FORMATS)
def test_wav_sample_formats_decode_to_the_written_values(bits, as_float, extensible, tolerance):
    rng = np.random.default_rng(bits)
    stereo = rng.uniform(-0.99, 0.99, size=(1000, 2))
    decoded = read_native(wav_bytes(stereo, 16000, bits, as_float=as_float, extensible=extensible))
    assert decoded.samples.dtype == np.float32
    assert decoded.samples.shape == (1000, 2)
    assert decoded.sample_rate == 16000
    assert not decoded.truncated
    assert np.max(np.abs(decoded.samples - stereo)) <= tolerance + 1e-7


def test_stdlib_wave_files_read_back_exactly(tmp_path):
    ints = (np.arange(-3000, 3000, 7, dtype=np.int16)).reshape(-1, 1)
    path = tmp_path / "std.wav"
    with wave.open(str(path), "wb") as handle:
        handle.setnchannels(1)
        handle.setsampwidth(2)
        handle.setframerate(16000)
        handle.writeframes(ints.tobytes())
    audio = load_audio_file(path)
    np.testing.assert_array_equal(audio, ints[:, 0].astype(np.float32) / 32768.0)


def test_full_scale_integer_extremes():
    data = riff(
        chunk(b"fmt ", fmt_body(PCM, 1, 8000, 16)), chunk(b"data", np.array([-32768, 32767], "<i2").tobytes())
    )
    np.testing.assert_allclose(read_native(data).samples[:, 0], [-1.0, 32767 / 32768])
    data8 = riff(chunk(b"fmt ", fmt_body(PCM, 1, 8000, 8)), chunk(b"data", bytes([0, 128, 255])))
    np.testing.assert_allclose(read_native(data8).samples[:, 0], [-1.0, 0.0, 127 / 128])


@pytest.mark.parametrize("rate", [8000, 11025, 22050, 44100, 48000, 96000])
def test_any_sample_rate_is_resampled_to_16k(tmp_path, rate):
    path = write(tmp_path, "tone.wav", wav_bytes(sine(1.0, rate, 1000.0), rate, 16))
    audio = load_audio_file(path)
    assert audio.dtype == np.float32
    assert abs(audio.size - TARGET_RATE) <= 1
    assert abs(dominant_frequency(audio, TARGET_RATE) - 1000.0) < 2.0
    assert 0.45 < np.max(np.abs(audio[2000:-2000])) < 0.55


def test_channels_are_averaged(tmp_path):
    tone = sine(0.5, 16000)
    opposite = np.stack([tone, -tone], axis=1)
    assert (
        np.max(
            np.abs(
                load_audio_file(write(tmp_path, "cancel.wav", wav_bytes(opposite, 16000, 32, as_float=True)))
            )
        )
        < 1e-7
    )
    six = np.stack([tone * k / 6 for k in range(6)], axis=1)
    audio = load_audio_file(write(tmp_path, "six.wav", wav_bytes(six, 16000, 32, as_float=True)))
    np.testing.assert_allclose(audio, tone * (15 / 36), atol=1e-6)


# --- edge cases ---------------------------------------------------------------------------------------


def test_empty_file_is_an_error(tmp_path):
    with pytest.raises(InputFileError, match="empty") as info:
        load_audio_file(write(tmp_path, "empty.wav", b""))
    assert info.value.fix


def test_header_only_wav_is_empty_audio(tmp_path):
    path = write(
        tmp_path, "header.wav", riff(chunk(b"fmt ", fmt_body(PCM, 2, 44100, 16)), chunk(b"data", b""))
    )
    assert read_native(path).samples.shape == (0, 2)
    audio = load_audio_file(path)
    assert audio.dtype == np.float32 and audio.size == 0


def test_silent_file_stays_silent(tmp_path):
    audio = load_audio_file(write(tmp_path, "silence.wav", wav_bytes(np.zeros(22050), 22050, 16)))
    assert audio.size == 16000 and not np.any(audio)


def test_clipped_float_samples_are_kept(tmp_path):
    loud = np.array([0.0, 1.5, -2.0, 3.25] * 100)
    audio = load_audio_file(write(tmp_path, "loud.wav", wav_bytes(loud, 16000, 32, as_float=True)))
    np.testing.assert_array_equal(audio, loud.astype(np.float32))


def test_nan_and_inf_become_silence_with_a_warning(tmp_path, caplog):
    samples = sine(0.1, 16000)
    samples[[5, 50, 500]] = [np.nan, np.inf, -np.inf]
    path = write(tmp_path, "nan.wav", wav_bytes(samples, 16000, 32, as_float=True))
    with caplog.at_level(logging.WARNING, logger="inference.audio"):
        audio = load_audio_file(path)
    assert np.all(np.isfinite(audio))
    assert audio[[5, 50, 500]].tolist() == [0.0, 0.0, 0.0]
    np.testing.assert_allclose(audio[:5], samples[:5], atol=1e-7)
    assert "3 non-finite" in caplog.text


def test_a_file_read_twice_warns_of_its_non_finite_samples_once(tmp_path, caplog):
    """A streamed offline job may read its file twice (a speech-gate pass, then the decoding pass): the user's
    log gets the warning once, and both reads give the same silence."""
    samples = sine(0.1, 16000)
    samples[[5, 50]] = [np.nan, np.inf]
    path = write(tmp_path, "nan.wav", wav_bytes(samples, 16000, 32, as_float=True))
    blocks = FileBlocks(path, AudioLimits(60))
    with caplog.at_level(logging.WARNING, logger="inference.audio"):
        first = np.concatenate(list(blocks()))
        second = np.concatenate(list(blocks()))
    np.testing.assert_array_equal(first, second)
    assert first[[5, 50]].tolist() == [0.0, 0.0]
    assert [
        r.getMessage().endswith("replaced 2 non-finite samples (NaN/Inf) with silence")
        for r in caplog.records
    ] == [True]


def test_nan_in_one_channel_does_not_erase_the_other():
    stereo = np.ones((4, 2), dtype=np.float32) * 0.5
    stereo[1, 0] = np.nan
    mono = to_mono_16k(stereo, 16000)
    np.testing.assert_allclose(mono, [0.5, 0.25, 0.5, 0.5])


def test_truncated_data_chunk_uses_complete_frames(tmp_path, caplog):
    stereo = np.random.default_rng(0).uniform(-0.5, 0.5, (100, 2))
    full = wav_bytes(stereo, 16000, 24)
    cut = full[:-7]  # 100 frames of 6 bytes; 7 bytes short leaves 98 complete frames + 5 bytes
    with caplog.at_level(logging.WARNING, logger="inference.audio"):
        decoded = read_native(cut, "cut.wav")
    assert decoded.truncated
    assert decoded.samples.shape == (98, 2)
    np.testing.assert_allclose(decoded.samples, stereo[:98], atol=1 / (1 << 23) + 1e-7)
    assert "truncated" in caplog.text


def test_streamed_wav_with_unknown_data_size_is_not_flagged(caplog):
    body = encode(sine(0.01, 16000)[:, None], 16, as_float=False)
    data = riff(chunk(b"fmt ", fmt_body(PCM, 1, 16000, 16)), chunk(b"data", body, declared_size=0xFFFFFFFF))
    with caplog.at_level(logging.WARNING, logger="inference.audio"):
        decoded = read_native(data)
    assert decoded.samples.shape == (160, 1) and not decoded.truncated
    assert "truncated" not in caplog.text


def test_odd_sized_and_unknown_chunks_before_fmt_are_skipped():
    tone = sine(0.01, 16000)[:, None]
    junk = chunk(b"JUNK", b"abc") + chunk(b"LIST", b"INFOISFT\x05\x00\x00\x00hello")  # odd sizes, pad bytes
    decoded = read_native(wav_bytes(tone, 16000, 16, before_fmt=junk))
    assert decoded.samples.shape == (160, 1)
    np.testing.assert_allclose(decoded.samples, tone, atol=1 / 32768)


def test_odd_sized_data_chunk_followed_by_another_chunk():
    # 8-bit mono, 3 samples: odd data size, pad byte, then a trailing chunk.
    data = riff(
        chunk(b"fmt ", fmt_body(PCM, 1, 8000, 8)),
        chunk(b"data", bytes([128, 192, 64])),
        chunk(b"cue ", b"1234"),
    )
    np.testing.assert_allclose(read_native(data).samples[:, 0], [0.0, 0.5, -0.5])


def test_data_chunk_before_fmt_chunk():
    body = encode(np.array([[0.25], [-0.25]]), 16, as_float=False)
    decoded = read_native(riff(chunk(b"data", body), chunk(b"fmt ", fmt_body(PCM, 1, 16000, 16))))
    np.testing.assert_allclose(decoded.samples[:, 0], [0.25, -0.25])


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (riff(chunk(b"data", b"\0\0")), "no WAV format chunk"),
        (riff(chunk(b"fmt ", fmt_body(PCM, 1, 16000, 16))), "no audio data chunk"),
        (riff(chunk(b"fmt ", b"\1\0\1\0")), "damaged WAV format chunk"),
        (riff(chunk(b"fmt ", fmt_body(PCM, 0, 16000, 16)), chunk(b"data", b"")), "0 channels"),
    ],
)
def test_broken_wav_structure_is_a_clear_error(data, message):
    with pytest.raises(InputFileError, match=message) as info:
        read_native(data, "broken.wav")
    assert info.value.fix


def test_inconsistent_block_align_is_rejected():
    import struct

    fmt = struct.pack("<HHIIHH", PCM, 2, 16000, 16000 * 4, 6, 16)  # 6-byte frames for 2 x 16 bit
    with pytest.raises(InputFileError, match="6-byte frames"):
        read_native(riff(chunk(b"fmt ", fmt), chunk(b"data", b"\0" * 12)))


def test_text_file_renamed_wav_is_a_clear_error(tmp_path):
    path = write(tmp_path, "notes.wav", b"These are my meeting notes, not audio.\n" * 20)
    with pytest.raises(InputFileError, match="not an audio file") as info:
        load_audio_file(path)
    assert "WAV" in info.value.fix


def test_m4a_gets_a_conversion_hint():
    fake_m4a = b"\x00\x00\x00\x20ftypM4A \x00\x00\x02\x00M4A isommp42" + b"\0" * 200
    with pytest.raises(InputFileError) as info:
        read_native(fake_m4a, "song.m4a")
    assert "M4A" in info.value.fix and "ffmpeg" in info.value.fix


def test_missing_paths_and_directories(tmp_path):
    with pytest.raises(InputFileError, match="not found"):
        load_audio_file(tmp_path / "nope.wav")
    with pytest.raises(InputFileError, match="directory"):
        load_audio_file(tmp_path)


# --- other containers through soundfile ----------------------------------------------------------------

CONTAINERS = [
    ("FLAC", "PCM_16", 2e-4),
    ("OGG", "VORBIS", None),
    ("OGG", "OPUS", None),
    ("MP3", "MPEG_LAYER_III", None),
    ("RF64", "PCM_24", 1e-6),
    ("AIFF", "PCM_16", 2e-4),
]


@pytest.mark.parametrize(("container", "subtype", "exact_tolerance"), CONTAINERS)
def test_compressed_containers_decode(container, subtype, exact_tolerance):
    rate = 48000
    tone = sine(1.0, rate, 1000.0, amplitude=0.4)
    stereo = np.stack([tone, tone], axis=1)
    buffer = io.BytesIO()
    soundfile.write(buffer, stereo, rate, format=container, subtype=subtype)
    decoded = read_native(buffer.getvalue(), f"tone.{container.lower()}")
    assert decoded.sample_rate == rate
    assert decoded.samples.shape[1] == 2
    assert abs(decoded.samples.shape[0] - rate) < rate * 0.01
    assert not decoded.truncated
    if exact_tolerance is not None:
        np.testing.assert_allclose(decoded.samples, stereo, atol=exact_tolerance)
    audio = to_mono_16k(decoded.samples, decoded.sample_rate)
    assert abs(dominant_frequency(audio, TARGET_RATE) - 1000.0) < 5.0
    assert 0.3 < np.max(np.abs(audio[4000:-4000])) < 0.5


def test_truncated_flac_keeps_the_decoded_part(caplog):
    buffer = io.BytesIO()
    soundfile.write(buffer, sine(4.0, 16000, 300.0), 16000, format="FLAC", subtype="PCM_16")
    data = buffer.getvalue()
    with caplog.at_level(logging.WARNING, logger="inference.audio"):
        decoded = read_native(data[: len(data) // 2], "cut.flac")
    assert decoded.truncated
    assert 0 < decoded.samples.shape[0] < 4 * 16000
    assert "truncated" in caplog.text


def test_mulaw_wav_falls_back_to_soundfile():
    buffer = io.BytesIO()
    tone = sine(0.5, 8000, 400.0)
    soundfile.write(buffer, tone, 8000, format="WAV", subtype="ULAW")
    decoded = read_native(buffer.getvalue(), "phone.wav")
    assert decoded.sample_rate == 8000
    np.testing.assert_allclose(decoded.samples[:, 0], tone, atol=0.02)


def test_unknown_extensible_subformat_is_not_misread():
    fmt = fmt_body(EXTENSIBLE, 1, 16000, 16)
    fmt = fmt[:26] + b"\xff" * 14  # a vendor GUID, not KSDATAFORMAT_SUBTYPE_*
    data = riff(chunk(b"fmt ", fmt), chunk(b"data", b"\0" * 64))
    with pytest.raises(UndecodableWavEncoding, match="EXTENSIBLE sub-format"):
        WavReader(io.BytesIO(data), len(data), "vendor.wav")
    with pytest.raises(InputFileError, match="vendor.wav is not an audio file Captioneer can read"):
        read_native(data, "vendor.wav")  # libsndfile, tried next, refuses it too


def test_missing_soundfile_names_the_fix(monkeypatch):
    monkeypatch.setitem(sys.modules, "soundfile", None)  # makes `import soundfile` raise ImportError
    with pytest.raises(InputFileError) as info:
        read_native(b"fLaC" + b"\0" * 100, "song.flac")
    assert "pip install soundfile" in info.value.fix and "ffmpeg" in info.value.fix
    # WAV still works without it.
    assert read_native(wav_bytes(np.zeros(10), 16000)).samples.shape == (10, 1)


def test_float_format_tag_is_recognised_without_extensible():
    body = np.array([0.5, -0.5], "<f4").tobytes()
    decoded = read_native(riff(chunk(b"fmt ", fmt_body(IEEE_FLOAT, 1, 16000, 32)), chunk(b"data", body)))
    np.testing.assert_array_equal(decoded.samples[:, 0], [0.5, -0.5])


# --- real speech -------------------------------------------------------------------------------------


@pytest.mark.skipif(
    shutil.which("espeak-ng") is None or shutil.which("sox") is None, reason="needs espeak-ng and sox"
)
def test_speech_reads_the_same_from_wav_and_flac(tmp_path):
    wav = tmp_path / "speech.wav"
    flac = tmp_path / "speech.flac"
    subprocess.run(["espeak-ng", "-v", "en-us", "-w", str(wav), "Testing one two three."], check=True)
    subprocess.run(["sox", str(wav), str(flac)], check=True)
    with wave.open(str(wav), "rb") as handle:
        native_rate, frames = handle.getframerate(), handle.getnframes()
    from_wav = load_audio_file(wav)
    from_flac = load_audio_file(flac)
    assert abs(from_wav.size - round(frames * TARGET_RATE / native_rate)) <= 1
    np.testing.assert_allclose(from_flac, from_wav, atol=1e-6)
    assert np.sqrt(np.mean(from_wav**2)) > 0.01  # it is speech, not silence


# --- raw PCM and the mono/resample helper keep their contract -----------------------------------------------


def test_decode_raw_pcm_formats_and_errors():
    pcm = np.array([0, 16384, -16384, 32767], "<i2").tobytes()
    np.testing.assert_allclose(decode_raw_pcm(pcm, "s16le", 2), [[0.0, 0.5], [-0.5, 32767 / 32768]])
    floats = np.array([0.1, 0.2, 0.3], "<f4").tobytes() + b"\x00"  # trailing partial sample ignored
    np.testing.assert_allclose(decode_raw_pcm(floats, "f32le", 1)[:, 0], [0.1, 0.2, 0.3], rtol=1e-6)
    with pytest.raises(UsageError):
        decode_raw_pcm(pcm, "s24le", 1)
    with pytest.raises(UsageError):
        decode_raw_pcm(pcm, "s16le", 0)


def test_to_mono_16k_accepts_1d_and_rejects_bad_rates():
    assert to_mono_16k(np.zeros(480), 48000).size == 160
    with pytest.raises(UsageError):
        to_mono_16k(np.zeros(10), 0)
