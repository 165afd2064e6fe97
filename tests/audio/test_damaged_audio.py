"""Damage in the middle of a compressed file costs the damaged part, not the rest of the recording: libsndfile
stops for good at the first frame it cannot decode, so the reader seeks a fresh decoder past it and fills the gap
with silence, keeping the time of everything after it (``SoundfileReader``)."""

from __future__ import annotations

import io
import logging
import re

import numpy as np
import pytest
import soundfile

from inference.audio import soundfile_reader
from inference.audio.decoding import BLOCK_BYTES, FileBlocks, decode_mono_16k, open_audio
from inference.audio.limits import AudioLimits
from inference.audio.soundfile_reader import SoundfileReader
from inference.errors import InputFileError
from tests.audio.wav_builders import sine, wav_bytes
from tests.fuzz.audio_corpus import FLAC_FRAME, flac_frame_offsets

RATE = 16000  # the FLAC frames then hold FLAC_FRAME samples at the model's rate: no resampling in the way
SECONDS = 4.0


def recording() -> tuple[bytes, np.ndarray, tuple[int, ...]]:
    """A FLAC of tone and noise, what libsndfile decodes of it, and its frames' byte offsets."""
    frames = int(RATE * SECONDS)
    rng = np.random.default_rng(5)
    audio = 0.3 * np.sin(2 * np.pi * 330.0 * np.arange(frames) / RATE) + 0.05 * rng.standard_normal(frames)
    buffer = io.BytesIO()
    soundfile.write(buffer, audio.astype(np.float32), RATE, format="FLAC", subtype="PCM_16")
    data = buffer.getvalue()
    decoded, _ = soundfile.read(io.BytesIO(data), dtype="float32")
    offsets = flac_frame_offsets(data)
    assert len(offsets) == -(-frames // FLAC_FRAME)  # the helper found every frame
    return data, decoded, offsets


def damaged(data: bytes, offsets: tuple[int, ...], *frames: int) -> bytes:
    """``data`` with a few bytes inverted in the middle of each of ``frames`` (the payload, not the header)."""
    out = bytearray(data)
    for frame in frames:
        middle = (offsets[frame] + (offsets[frame + 1] if frame + 1 < len(offsets) else len(data))) // 2
        out[middle : middle + 4] = bytes(b ^ 0xFF for b in out[middle : middle + 4])
    return bytes(out)


def read(data: bytes, name: str = "lecture.flac") -> tuple[np.ndarray, SoundfileReader]:
    with open_audio(data, name) as reader:
        assert isinstance(reader, SoundfileReader)
        blocks = list(reader.blocks(BLOCK_BYTES))
    return np.concatenate(blocks)[:, 0], reader


def frame_span(frame: int) -> slice:
    return slice(frame * FLAC_FRAME, (frame + 1) * FLAC_FRAME)


def test_one_damaged_frame_costs_that_frame_and_the_rest_keeps_its_time(caplog) -> None:
    data, undamaged, offsets = recording()
    with caplog.at_level(logging.WARNING, logger="inference.audio"):
        audio, reader = read(damaged(data, offsets, 5))
    assert audio.shape == undamaged.shape  # everything after the damage is where it was
    assert not audio[frame_span(5)].any()  # the damaged frame is silence
    kept = np.ones(audio.size, bool)
    kept[frame_span(5)] = False
    np.testing.assert_array_equal(audio[kept], undamaged[kept])
    assert not reader.truncated
    assert (reader.damage.stretches, reader.damage.silent_frames) == (1, FLAC_FRAME)
    assert "lecture.flac is damaged at 1.28 s" in caplog.text
    assert "0.26 s of audio could not be decoded" in caplog.text


def test_damage_in_the_first_frame_is_not_a_refusal() -> None:
    data, undamaged, offsets = recording()
    audio, reader = read(damaged(data, offsets, 0))
    assert audio.shape == undamaged.shape
    np.testing.assert_array_equal(audio[FLAC_FRAME:], undamaged[FLAC_FRAME:])
    assert reader.damage.first_at_frame == 0


def test_several_damaged_frames_each_cost_their_own(caplog) -> None:  # type: ignore[no-untyped-def]
    data, undamaged, offsets = recording()
    with caplog.at_level(logging.WARNING, logger="inference.audio"):
        audio, reader = read(damaged(data, offsets, 2, 3, 7, 11))
    assert audio.shape == undamaged.shape
    lost = np.zeros(audio.size, bool)
    for frame in (2, 3, 7, 11):
        lost[frame_span(frame)] = True
    np.testing.assert_array_equal(audio[~lost], undamaged[~lost])
    assert not audio[lost].any()
    assert reader.damage.stretches == 3  # 2 and 3 are one stretch
    assert (
        "lecture.flac is damaged in 3 places, the first at 0.51 s: 1.02 s of audio could not" in caplog.text
    )


def test_a_hole_of_zeros_is_skipped_to_the_first_frame_after_it() -> None:
    data, undamaged, offsets = recording()
    hole = bytearray(data)
    start, end = offsets[3] + 100, offsets[9] + 100  # frames 3 to 9 gone
    hole[start:end] = bytes(end - start)
    audio, reader = read(bytes(hole))
    assert audio.shape == undamaged.shape
    np.testing.assert_array_equal(audio[10 * FLAC_FRAME :], undamaged[10 * FLAC_FRAME :])
    np.testing.assert_array_equal(audio[: 3 * FLAC_FRAME], undamaged[: 3 * FLAC_FRAME])
    assert reader.damage.silent_frames <= 7 * FLAC_FRAME + soundfile_reader._RESUME_FRAMES


def test_damage_in_the_last_frame_keeps_everything_before_it(caplog) -> None:
    data, undamaged, offsets = recording()
    last = len(offsets) - 1
    with caplog.at_level(logging.WARNING, logger="inference.audio"):
        audio, reader = read(damaged(data, offsets, last))
    assert reader.truncated  # nothing after it to resume at
    assert (last - 1) * FLAC_FRAME <= audio.size <= last * FLAC_FRAME
    np.testing.assert_array_equal(audio, undamaged[: audio.size])
    assert "lecture.flac is damaged or truncated" in caplog.text


def test_past_the_bound_on_resumptions_the_audio_before_is_kept(monkeypatch, caplog) -> None:
    """A file damaged all through (or crafted so) costs a bounded number of seeks: past the bound, the reader
    treats it as cut off at the damage."""
    monkeypatch.setattr(soundfile_reader, "MAX_RESUMPTIONS", 1)
    data, undamaged, offsets = recording()
    with caplog.at_level(logging.WARNING, logger="inference.audio"):
        audio, reader = read(damaged(data, offsets, 2, 6, 10))
    assert reader.truncated and reader.damage.resumptions == 1
    assert 5 * FLAC_FRAME <= audio.size <= 6 * FLAC_FRAME  # cut off at the second damage (frame 6)
    np.testing.assert_array_equal(audio[: 2 * FLAC_FRAME], undamaged[: 2 * FLAC_FRAME])
    np.testing.assert_array_equal(audio[3 * FLAC_FRAME :], undamaged[3 * FLAC_FRAME : audio.size])


def test_past_the_bound_on_seeks_the_audio_before_is_kept(monkeypatch) -> None:
    monkeypatch.setattr(soundfile_reader, "MAX_PROBES", 2)
    data, undamaged, offsets = recording()
    hole = bytearray(data)
    hole[offsets[3] + 100 : offsets[9] + 100] = bytes(offsets[9] - offsets[3])  # needs more than 2 seeks
    audio, reader = read(bytes(hole))
    assert reader.truncated and reader.damage.probes > 2
    np.testing.assert_array_equal(audio, undamaged[: audio.size])
    assert audio.size <= 3 * FLAC_FRAME


def test_a_file_of_which_nothing_decodes_is_refused_with_its_name() -> None:
    data, _, offsets = recording()
    with pytest.raises(InputFileError, match="lecture.flac is damaged and cannot be decoded"):
        read(damaged(data, offsets, *range(len(offsets))))


def test_the_server_and_cli_path_get_the_whole_length() -> None:
    """What ``FileBlocks`` and ``decode_mono_16k`` hand to a model: the full length, the damage as silence."""
    data, undamaged, offsets = recording()
    audio = decode_mono_16k(damaged(data, offsets, 4), AudioLimits(60.0), "upload.flac")
    assert audio.size == undamaged.size
    np.testing.assert_allclose(audio[6 * FLAC_FRAME :], undamaged[6 * FLAC_FRAME :], atol=1e-6)


@pytest.mark.parametrize("what", ["damaged flac", "truncated wav"])
def test_a_file_read_twice_warns_of_its_damage_once(tmp_path, caplog, what) -> None:
    """A streamed offline job may read its file twice (speech gate, then decoding): one warning in the log."""
    if what == "damaged flac":
        data, _, offsets = recording()
        path = tmp_path / "lecture.flac"
        path.write_bytes(damaged(data, offsets, 5))
    else:
        path = tmp_path / "cut.wav"
        path.write_bytes(wav_bytes(sine(0.5, RATE), RATE, 16)[:-101])
    blocks = FileBlocks(path, AudioLimits(60))
    with caplog.at_level(logging.WARNING, logger="inference.audio"):
        first = np.concatenate(list(blocks()))
        second = np.concatenate(list(blocks()))
    np.testing.assert_array_equal(first, second)
    assert len(caplog.records) == 1, caplog.text


@pytest.mark.parametrize("codec", ["OPUS", "VORBIS"])
def test_a_damaged_ogg_says_audio_was_dropped_not_that_it_is_truncated(caplog, codec: str) -> None:
    """libogg drops a damaged page without saying where, so the audio after it comes early; the warning says
    that (an Ogg file's stated length is its last page's, so a shortfall is damage inside, not a cut-off end)."""
    rate = 48000
    t = np.arange(rate * 20) / rate
    buffer = io.BytesIO()
    soundfile.write(
        buffer,
        (0.3 * np.sin(2 * np.pi * (200 + 20 * t) * t)).astype(np.float32),
        rate,
        format="OGG",
        subtype=codec,
    )
    data = bytearray(buffer.getvalue())
    at = int(len(data) * 0.3)
    data[at : at + 4] = bytes(b ^ 0x5A for b in data[at : at + 4])
    with caplog.at_level(logging.WARNING, logger="inference.audio"):
        audio = decode_mono_16k(bytes(data), AudioLimits(60), "memo.ogg")
    assert 15 * 16000 < audio.size < 20 * 16000 - 8000
    assert "memo.ogg is damaged:" in caplog.text and "were dropped, so what follows" in caplog.text
    assert "truncated" not in caplog.text


def _ogg(codec: str, seconds: float = 6.0) -> bytes:
    rate = 48000
    t = np.arange(int(rate * seconds)) / rate
    buffer = io.BytesIO()
    soundfile.write(
        buffer, (0.3 * np.sin(2 * np.pi * 300 * t)).astype(np.float32), rate, format="OGG", subtype=codec
    )
    return buffer.getvalue()


@pytest.mark.parametrize("codec", ["OPUS", "VORBIS"])
@pytest.mark.parametrize("cut", ["mid-page", "page boundary"])
def test_a_cut_off_ogg_is_read_as_far_as_it_goes_and_says_so(caplog, codec: str, cut: str) -> None:
    """libsndfile states a cut-off Ogg's length as its last whole page's, so nothing falls short: only the missing
    end-of-stream page tells that the recording goes on beyond what the file holds."""
    data = _ogg(codec)
    pages = [at for at in range(len(data)) if data.startswith(b"OggS", at)]
    end = int(len(data) * 0.6) if cut == "mid-page" else pages[len(pages) * 3 // 5]
    with caplog.at_level(logging.WARNING, logger="inference.audio"):
        whole = decode_mono_16k(data, AudioLimits(60), "memo.ogg")
        assert caplog.text == ""  # a whole file: no warning
        part = decode_mono_16k(data[:end], AudioLimits(60), "memo.ogg")
    assert 16000 < part.size < whole.size - 16000
    np.testing.assert_allclose(part[: part.size - 4000], whole[: part.size - 4000], atol=1e-6)
    assert "memo.ogg may be cut off: it ends without the page that closes an Ogg stream" in caplog.text
    stated = re.search(r"using the ([0-9.]+) s present", caplog.text)
    assert stated is not None and abs(float(stated[1]) - part.size / 16000) < 0.05


def test_the_last_page_check_reads_only_what_the_bytes_hold() -> None:
    from inference.audio.ogg_pages import END_OF_STREAM, HEADER_BYTES, ends_whole, tail_ends_whole

    def page(flags: int, body: bytes) -> bytes:
        segments = [255] * (len(body) // 255) + [len(body) % 255]
        return b"OggS\x00" + bytes([flags]) + bytes(20) + bytes([len(segments)]) + bytes(segments) + body

    first, last = page(0x02, b"x" * 300), page(END_OF_STREAM, b"y" * 40)
    assert tail_ends_whole(first + last) is True
    assert tail_ends_whole(first + page(0, b"y" * 40)) is False  # whole, but the stream does not end there
    assert tail_ends_whole((first + last)[:-1]) is False  # the last page cut short
    assert tail_ends_whole(first + last[: HEADER_BYTES - 3]) is False  # cut inside the last page's header
    assert tail_ends_whole(first + last[: HEADER_BYTES + 1]) is False  # cut inside its segment table
    assert tail_ends_whole(b"") is None and tail_ends_whole(b"RIFF" + bytes(100)) is None
    assert (
        tail_ends_whole(b"OggS\x01" + bytes(40)) is None
    )  # not a version-0 header: packet bytes, not a page
    # A capture pattern inside a page's data is not taken for the page's start.
    assert tail_ends_whole(first + page(END_OF_STREAM, b"OggS\x07" + b"z" * 30)) is True
    handle = io.BytesIO(bytes(70000) + first + last)
    handle.seek(123)
    assert ends_whole(handle) is True and handle.tell() == 123  # reads only the tail; the position is kept
