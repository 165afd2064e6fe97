"""The CLI (``captioneer transcribe``) and the app (recordings opened in the window, ``--input-file``) read files
through the same bounded decoder as the server, with a limit the user can raise: ``--max-audio-s`` and the
``max_file_audio_s`` setting. Each refusal comes before any model is loaded."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pytest

from app.live.sources import FileSource
from app.settings import Settings
from inference.audio.limits import AudioTooLong
from inference.cli import main
from inference.errors import InputFileError, UsageError
from tests.audio.wav_builders import PCM, chunk, fmt_body, riff, wav_bytes


def three_seconds(tmp_path: Path) -> Path:
    path = tmp_path / "three.wav"
    path.write_bytes(wav_bytes(np.zeros(48000), 16000))
    return path


def test_transcribe_refuses_a_file_past_max_audio_s_before_loading_a_model(
    tmp_path: Path, isolated_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = three_seconds(tmp_path)
    assert main(["transcribe", str(path), "--max-audio-s", "2"]) == 2
    err = capsys.readouterr().err
    assert f"{path} lasts 3.0 s, more than the limit of 2 s" in err and "--max-audio-s SECONDS" in err
    assert "loaded" not in err and "Traceback" not in err


def test_transcribe_refuses_a_1_hz_wav_and_a_bad_limit(
    tmp_path: Path, isolated_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    slow = tmp_path / "slow.wav"
    slow.write_bytes(riff(chunk(b"fmt ", fmt_body(PCM, 1, 1, 16)), chunk(b"data", b"\0" * 7000)))
    assert main(["transcribe", str(slow)]) == 2
    assert "declares a sample rate of 1 Hz" in capsys.readouterr().err
    assert main(["transcribe", str(three_seconds(tmp_path)), "--max-audio-s", "0"]) == 2
    assert "--max-audio-s must be a positive number of seconds" in capsys.readouterr().err


def test_transcribe_bounds_raw_pcm_on_stdin(isolated_home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pcm = io.BytesIO(np.zeros(16000 * 3, "<i2").tobytes())
    assert main(["transcribe", "-", "--max-audio-s", "2"], stdin=pcm) == 2
    assert "the audio on stdin lasts more than the limit of 2 s" in capsys.readouterr().err


def test_the_app_refuses_a_recording_past_its_setting_and_names_the_setting(tmp_path: Path) -> None:
    path = three_seconds(tmp_path)
    with pytest.raises(AudioTooLong) as refused:
        FileSource(path, max_audio_s=2)
    assert refused.value.fix and '"max_file_audio_s"' in refused.value.fix
    assert FileSource(path, max_audio_s=10).total_samples == 48000
    with pytest.raises(UsageError, match="max_file_audio_s"):
        FileSource(path, max_audio_s=-1)


def test_the_window_opens_recordings_with_the_limit_the_settings_hold(tmp_path: Path) -> None:
    from app.window.inputs import FILE_ITEM, source_factory_for

    settings = Settings(max_file_audio_s=2)
    open_source = source_factory_for(settings)
    with pytest.raises(InputFileError, match="more than the limit of 2 s"):
        open_source(FILE_ITEM + str(three_seconds(tmp_path)))
    settings.max_file_audio_s = 5  # read when the source opens, not when the window was built
    source = open_source(FILE_ITEM + str(three_seconds(tmp_path)))
    assert isinstance(source, FileSource) and source.total_samples == 48000
