"""The README's first-run command: no model installed → the bundled demo transcribes the bundled sample."""

from __future__ import annotations

import io
import json
import shutil
from pathlib import Path

import pytest

from inference.cli import main
from tests.audio import media_builders as media

SAMPLES = Path(__file__).resolve().parents[2] / "resources" / "samples"


@pytest.mark.parametrize("index", [0, 1])
def test_demo_model_is_the_fallback_and_matches_torch(index: int, capsys: pytest.CaptureFixture[str]) -> None:
    sample = json.loads((SAMPLES / "samples.json").read_text())["samples"][index]
    out = io.StringIO()
    code = main(["transcribe", str(SAMPLES / sample["wav"]), "--format", "json"], out=out)
    assert code == 0
    assert "Demo: synthetic English only" in capsys.readouterr().err
    result = json.loads(out.getvalue())
    # Captioneer's engine reproduces the torch greedy output of the shipped weights exactly.
    assert result["text"] == sample["torch_greedy_text"]
    assert result["text"] and all(w["end"] >= w["start"] for w in result["words"])


def test_a_damaged_flac_is_transcribed_past_the_damage_and_the_user_is_told(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """One damaged frame in the middle: every word after it keeps its time, and stderr says what was lost
    (before: libsndfile stopped at the damage, the transcript was "emma quick", and only the log knew)."""
    import soundfile

    from inference.logsetup import configure_logging
    from inference.paths import AppPaths
    from tests.fuzz.audio_corpus import flac_frame_offsets

    audio, rate = soundfile.read(SAMPLES / "demo_sample_1.wav", dtype="float32")
    buffer = io.BytesIO()
    soundfile.write(buffer, audio, rate, format="FLAC", subtype="PCM_16")
    clean = tmp_path / "clean.flac"
    clean.write_bytes(buffer.getvalue())
    offsets = flac_frame_offsets(clean.read_bytes())
    data = bytearray(clean.read_bytes())
    middle = (offsets[5] + offsets[6]) // 2  # frame 5: 1.28-1.54 s
    data[middle : middle + 4] = bytes(b ^ 0xFF for b in data[middle : middle + 4])
    damaged = tmp_path / "damaged.flac"
    damaged.write_bytes(bytes(data))
    try:
        results = []
        for path in (clean, damaged):
            out = io.StringIO()
            assert main(["transcribe", str(path), "--format", "json"], out=out) == 0
            results.append(json.loads(out.getvalue()))
        stderr = capsys.readouterr().err
    finally:
        configure_logging(AppPaths.from_environment(), stderr=False)
    words = [[(w["word"], w["start"]) for w in r["words"] if w["start"] >= 1.6] for r in results]
    assert words[0] and words[1] == words[0]  # after the damaged frame: the same words at the same times
    assert f"captioneer: warning: {damaged} is damaged at 1.28 s" in stderr
    assert f"{clean} is damaged" not in stderr


@pytest.mark.skipif(shutil.which("ffmpeg") is None, reason="needs ffmpeg (.ci/run installs it)")
def test_a_voice_memo_and_the_audio_of_a_video(tmp_path: Path) -> None:
    """`captioneer transcribe memo.m4a` and `lecture.mp4`: read through ffmpeg, the same words as the WAV."""
    sample = json.loads((SAMPLES / "samples.json").read_text())["samples"][0]
    wav = SAMPLES / sample["wav"]
    memo = media.encoded(wav, tmp_path / "memo.m4a", "-c:a", "aac")
    video = media.video_with(wav, tmp_path / "lecture.mp4")
    for path in (memo, video):
        out = io.StringIO()
        assert main(["transcribe", str(path)], out=out) == 0
        assert out.getvalue().strip() == sample["torch_greedy_text"]


def test_a_file_piped_to_stdin_is_decoded_as_a_file_not_heard_as_noise(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`cat talk.flac | captioneer transcribe -` gave an empty transcript with exit code 0 (the file's bytes were
    read as 16 kHz samples); now stdin holding a file is decoded as one, and streaming mode refuses it."""
    import soundfile

    sample = json.loads((SAMPLES / "samples.json").read_text())["samples"][0]
    audio, rate = soundfile.read(SAMPLES / sample["wav"], dtype="float32")
    buffer = io.BytesIO()
    soundfile.write(buffer, audio, rate, format="FLAC", subtype="PCM_16")
    out = io.StringIO()
    assert main(["transcribe", "-"], out=out, stdin=io.BytesIO(buffer.getvalue())) == 0
    assert out.getvalue().strip() == sample["torch_greedy_text"]
    assert "stdin holds an audio file (FLAC): decoded as a file" in capsys.readouterr().err
    # held whole in memory, so bounded as raw PCM is (here 0.5 s of 16 kHz s16: 16 000 bytes)
    small_limit = ["transcribe", "-", "--max-audio-s", "0.5"]
    assert main(small_limit, out=io.StringIO(), stdin=io.BytesIO(buffer.getvalue())) == 2
    assert "stdin holds an audio file (FLAC) of more than 16000 bytes" in capsys.readouterr().err
    code = main(
        ["transcribe", "-", "--mode", "streaming"], out=io.StringIO(), stdin=io.BytesIO(buffer.getvalue())
    )
    assert code == 2
    assert "stdin holds an audio file (FLAC), not raw PCM samples" in capsys.readouterr().err
