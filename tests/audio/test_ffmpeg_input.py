"""MP4/M4A, WebM and the audio of video files through ffmpeg (``FfmpegReader``): what phones and browsers record
and what people want captioned, where libsndfile has no decoder. ffmpeg runs as a child process; without it the
refusal says to install it."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from inference.audio.decoding import FileBlocks, decode_mono_16k, open_audio
from inference.audio.ffmpeg_reader import CHILD_ADDRESS_SPACE, FFMPEG_ENV, FfmpegReader, _spawn, find_ffmpeg
from inference.audio.io import load_audio_file
from inference.audio.limits import AudioLimits, AudioTooLong
from inference.errors import InputFileError
from tests.audio import media_builders as media
from tests.conftest import REPO_ROOT

SAMPLE = REPO_ROOT / "resources" / "samples" / "demo_sample_1.wav"
pytestmark = pytest.mark.skipif(find_ffmpeg() is None, reason="needs ffmpeg (.ci/run installs it)")


def encoded(tmp_path: Path, name: str, *codec: str) -> Path:
    return media.encoded(SAMPLE, tmp_path / name, *codec)


def similarity(a: np.ndarray, b: np.ndarray) -> float:
    """The normalised cross-correlation at the best lag within 100 ms (codecs may shift a few ms)."""
    size = min(a.size, b.size) - 1600
    best = 0.0
    for lag in range(-1600, 1601, 16):
        x = a[1600 + lag : 1600 + lag + size - 1600]
        y = b[1600 : 1600 + x.size]
        best = max(best, float(np.dot(x, y) / (np.linalg.norm(x) * np.linalg.norm(y) + 1e-12)))
    return best


@pytest.mark.parametrize(
    ("name", "args"),
    [
        ("memo.m4a", ("-c:a", "aac", "-b:a", "96k")),
        ("talk.webm", ("-c:a", "libopus", "-b:a", "48k")),
        ("talk.mkv", ("-c:a", "flac")),
    ],
)
def test_phone_and_browser_recordings_decode_to_the_same_speech(tmp_path: Path, name: str, args) -> None:  # type: ignore[no-untyped-def]
    path = encoded(tmp_path, name, *args)
    with open_audio(path) as reader:
        assert isinstance(reader, FfmpegReader)
    original = load_audio_file(SAMPLE)
    decoded = decode_mono_16k(path, AudioLimits(60))
    assert abs(decoded.size - original.size) <= 0.1 * 16000  # codec framing: AAC pads to 1024-sample frames
    assert similarity(decoded, original) > 0.95


def test_the_audio_track_of_a_video_file(tmp_path: Path) -> None:
    video = media.video_with(SAMPLE, tmp_path / "lecture.mp4")
    decoded = decode_mono_16k(video, AudioLimits(60))
    assert similarity(decoded, load_audio_file(SAMPLE)) > 0.95


def test_an_upload_is_read_from_a_private_file_that_is_removed(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("TMPDIR", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", None)  # TMPDIR is read again
    data = encoded(tmp_path, "memo.m4a", "-c:a", "aac").read_bytes()
    blocks = FileBlocks(data, AudioLimits(60), "memo.m4a")
    assert blocks.expected_samples is not None and abs(blocks.expected_samples - 63518) < 1600
    audio = np.concatenate(list(blocks()))
    assert similarity(audio, load_audio_file(SAMPLE)) > 0.95
    assert list((tmp_path / "tmp").iterdir()) == []  # nothing left behind


def test_the_length_limit_holds_from_the_header_and_while_decoding(tmp_path: Path) -> None:
    path = encoded(tmp_path, "memo.m4a", "-c:a", "aac")
    with pytest.raises(AudioTooLong, match="memo.m4a lasts 4.0 s, more than the limit of 2 s"):
        FileBlocks(path, AudioLimits(2), "memo.m4a")
    # a WebM from a browser's MediaRecorder states no length: the limit is met while decoding, ffmpeg stopped
    stream = tmp_path / "live.webm"
    with stream.open("wb") as out:  # to a pipe: the muxer cannot go back to write the length
        graph = ["-f", "lavfi", "-i", "sine=f=440:d=6", "-c:a", "libopus", "-f", "webm", "pipe:1"]
        subprocess.run(["ffmpeg", "-v", "error", "-nostdin", *graph], check=True, stdout=out)
    with (
        open_audio(stream) as reader,
        pytest.raises(AudioTooLong, match="lasts more than .* s, more than the limit of 2 s"),
    ):
        from inference.audio.decoding import mono_16k_blocks

        for _ in mono_16k_blocks(reader, AudioLimits(2)):
            pass
    assert reader._process is None  # closed: ffmpeg was stopped, not left decoding


def test_a_truncated_recording_keeps_what_decodes_and_says_so(tmp_path: Path, caplog) -> None:  # type: ignore[no-untyped-def]
    data = encoded(tmp_path, "memo.webm", "-c:a", "libopus").read_bytes()
    cut = tmp_path / "cut.webm"
    cut.write_bytes(data[: len(data) // 2])
    with caplog.at_level("WARNING", logger="inference.audio"):
        blocks = FileBlocks(cut, AudioLimits(60))
        audio = np.concatenate(list(blocks()))
    assert 0.5 * 16000 < audio.size < 3.5 * 16000
    assert blocks.problems and "cut.webm" in blocks.problems[0]
    assert "cut.webm" in caplog.text


def test_without_ffmpeg_the_refusal_names_the_file_and_says_to_install_it(
    tmp_path: Path, monkeypatch
) -> None:  # type: ignore[no-untyped-def]
    path = encoded(tmp_path, "memo.m4a", "-c:a", "aac")
    monkeypatch.setenv(FFMPEG_ENV, str(tmp_path / "no-ffmpeg-here"))
    assert find_ffmpeg() is None
    with pytest.raises(InputFileError) as refused:
        decode_mono_16k(path, AudioLimits(60))
    assert str(path) in refused.value.message
    assert "install ffmpeg" in (refused.value.fix or "")


def test_ffmpeg_is_found_beside_a_chosen_path(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    folder = tmp_path / "tools"
    folder.mkdir()
    for tool in ("ffmpeg", "ffprobe"):
        (folder / tool).symlink_to(shutil.which(tool) or "")
    monkeypatch.setenv(FFMPEG_ENV, str(folder / "ffmpeg"))
    monkeypatch.setenv("PATH", "/nonexistent")
    tools = find_ffmpeg()
    assert tools is not None and tools.ffprobe == str(folder / "ffprobe")


def test_garbage_is_refused_by_both_decoders_with_the_file_named(tmp_path: Path) -> None:
    path = tmp_path / "notes.m4a"
    path.write_bytes(b"\0\0\0\x18ftypM4A " + bytes(range(256)) * 8)
    with pytest.raises(InputFileError, match=f"{path} is not an audio file Captioneer can read") as refused:
        FileBlocks(path, AudioLimits(60))
    with pytest.raises(InputFileError) as uploaded:
        FileBlocks(path.read_bytes(), AudioLimits(60), "notes.m4a")
    assert "captioneer-upload" not in str(uploaded.value) and "notes.m4a" in str(uploaded.value)
    assert str(refused.value).count(str(path)) == 2  # the file, and ffprobe's reason naming it


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="prlimit is Linux's")
def test_ffmpeg_runs_with_its_address_space_bounded() -> None:
    # -re: at the input's own pace, so it is still running when its limits are read
    process = _spawn(
        ["ffmpeg", "-v", "error", "-nostdin", "-re", "-f", "lavfi", "-i", "sine=d=30", "-f", "null", "-"]
    )
    try:
        limits = Path(f"/proc/{process.pid}/limits").read_text()
    finally:
        process.kill()
        process.communicate()
    line = next(line for line in limits.splitlines() if line.startswith("Max address space"))
    assert line.split()[3:5] == [str(CHILD_ADDRESS_SPACE)] * 2


def test_a_hole_in_a_recording_keeps_the_audio_after_it_in_time(tmp_path: Path, caplog) -> None:  # type: ignore[no-untyped-def]
    """A stretch of a WebM zeroed (a bad download): ffmpeg skips it; the gap becomes silence, so what follows
    stays at its time (without it, 20 s came back as 13.3 s and every later caption came early)."""
    chirp = "aevalsrc=0.3*sin(2*PI*(200+20*t)*t):s=48000:d=20"  # no two stretches alike: the lag is unique
    clean = media.generated(chirp, tmp_path / "talk.webm", "-c:a", "libopus")
    data = bytearray(clean.read_bytes())
    start, end = int(len(data) * 0.4), int(len(data) * 0.5)
    data[start:end] = bytes(end - start)
    holed = tmp_path / "holed.webm"
    holed.write_bytes(bytes(data))
    undamaged = decode_mono_16k(clean, AudioLimits(60))
    with caplog.at_level("WARNING", logger="inference.audio"):
        blocks = FileBlocks(holed, AudioLimits(60))
        audio = np.concatenate(list(blocks()))
    assert abs(audio.size - undamaged.size) <= 160  # 10 ms
    late = undamaged[16 * 16000 : 19 * 16000]  # well after the hole

    def match(lag: int) -> float:
        other = audio[16 * 16000 + lag : 19 * 16000 + lag]
        return float(np.dot(late, other) / (np.linalg.norm(late) * np.linalg.norm(other)))

    lag = max(range(-1600, 1601), key=match)
    assert abs(lag) <= 32 and match(lag) > 0.99  # within 2 ms of where it was
    assert blocks.problems and "holed.webm" in caplog.text
