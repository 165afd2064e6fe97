"""``captioneer transcribe`` end to end with the tiny Parakeet-TDT fixtures: JSON/SRT/VTT, every offline
mode, a GGUF package, odd inputs and exit codes."""

from __future__ import annotations

import io
import json
import struct
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from gguf_package import write_audiocpp_gguf
from parakeet_fixtures import audio_path, expected, model_dir

from inference.audio.io import load_audio_file
from inference.cli import main

COMMON = ("--backend", "cpu", "--threads", "2")


def run_cli(*argv: str) -> tuple[int, str]:
    out = io.StringIO()
    code = main(list(argv), out=out, stdin=io.BytesIO(b""))
    return code, out.getvalue()


def transcribe_json(audio: Path, model: Path, *extra: str) -> dict:
    code, out = run_cli("transcribe", str(audio), "--model", str(model), "--format", "json", *COMMON, *extra)
    assert code == 0, out
    return json.loads(out)


def write_float_wav(path: Path, samples: np.ndarray, rate: int = 16000) -> Path:
    """A mono IEEE-float WAV (the stdlib ``wave`` module writes integer PCM only)."""
    data = np.asarray(samples, dtype="<f4").tobytes()
    fmt = struct.pack("<HHIIHH", 3, 1, rate, rate * 4, 4, 32)
    body = (
        b"WAVE" + b"fmt " + struct.pack("<I", len(fmt)) + fmt + b"data" + struct.pack("<I", len(data)) + data
    )
    path.write_bytes(b"RIFF" + struct.pack("<I", len(body)) + body)
    return path


def test_full_context_json_matches_reference() -> None:
    ref = expected("tiny_a")["clips"]["medium"]
    result = transcribe_json(audio_path("medium"), model_dir("tiny_a"))
    assert result["text"] == ref["text"]
    assert result["token_ids"] == ref["token_ids"]
    assert result["language"] is None
    assert " ".join(w["word"] for w in result["words"]) == ref["text"]
    assert result["timing"]["audio_s"] == pytest.approx(ref["num_samples"] / 16000, abs=1e-3)


def test_long_form_and_vad_modes() -> None:
    ref = expected("tiny_b")
    long_form = transcribe_json(
        audio_path("long"),
        model_dir("tiny_b"),
        "--session-option",
        "offline_mode=long_form",
        "--session-option",
        "center_sec=2",  # the alias of audio_chunk_duration_sec
    )
    assert long_form["token_ids"] == ref["long_form"]["token_ids"]
    assert long_form["text"] == ref["long_form"]["text"]
    full = transcribe_json(
        audio_path("long"), model_dir("tiny_b"), "--request-option", "audio_chunk_mode=none"
    )
    assert full["token_ids"] == ref["clips"]["long"]["token_ids"]
    vad = transcribe_json(
        audio_path("long"),
        model_dir("tiny_b"),
        "--request-option",
        "audio_chunk_mode=vad",
        "--request-option",
        "audio_chunk_duration_sec=4",
    )
    assert vad["text"] and vad["words"]
    assert all(0.0 <= w["start"] <= w["end"] <= 30.1 for w in vad["words"])
    assert vad["token_ids"] != full["token_ids"]  # spans decode independently of the rest of the clip


@pytest.mark.parametrize("fmt", ["srt", "vtt"])
def test_subtitle_formats(tmp_path: Path, fmt: str) -> None:
    out_file = tmp_path / f"out.{fmt}"
    code, stdout = run_cli(
        "transcribe",
        str(audio_path("medium")),
        "--model",
        str(model_dir("tiny_a")),
        "--format",
        fmt,
        "-o",
        str(out_file),
        *COMMON,
    )
    assert code == 0 and stdout == ""
    text = out_file.read_text(encoding="utf-8")
    assert "-->" in text
    if fmt == "vtt":
        assert text.startswith("WEBVTT")
    else:
        assert text.startswith("1\n") and "," in text.splitlines()[1]  # SRT uses a comma before milliseconds
    first_word = expected("tiny_a")["clips"]["medium"]["text"].split()[0]
    assert first_word in text


def test_gguf_package(tmp_path: Path) -> None:
    package = tmp_path / "tiny_b.gguf"
    write_audiocpp_gguf(model_dir("tiny_b"), package)
    ref = expected("tiny_b")["clips"]["short"]
    result = transcribe_json(audio_path("short"), package)
    assert result["token_ids"] == ref["token_ids"]
    assert result["text"] == ref["text"]
    q8 = transcribe_json(audio_path("short"), package, "--session-option", "weight_type=q8_0")
    assert q8["text"] is not None


def test_odd_inputs(tmp_path: Path) -> None:
    model = model_dir("tiny_a")
    empty = transcribe_json(write_float_wav(tmp_path / "empty.wav", np.zeros(0)), model)
    assert (empty["text"], empty["words"], empty["token_ids"]) == ("", [], [])
    silent = transcribe_json(write_float_wav(tmp_path / "silent.wav", np.zeros(32000)), model)
    assert (silent["text"], silent["words"]) == ("", [])
    speech = load_audio_file(audio_path("short"))
    with_nan = speech.copy()
    with_nan[1000:1100] = np.nan
    result = transcribe_json(write_float_wav(tmp_path / "nan.wav", with_nan), model)
    cleaned = speech.copy()
    cleaned[1000:1100] = 0.0
    assert (
        result["token_ids"]
        == transcribe_json(write_float_wav(tmp_path / "clean.wav", cleaned), model)["token_ids"]
    )


def test_exit_codes(capsys: pytest.CaptureFixture[str]) -> None:
    args = ("transcribe", str(audio_path("short")), "--model", str(model_dir("tiny_a")), *COMMON)
    code, _ = run_cli(*args, "--session-option", "offline_mode=sliding")
    assert code == 2 and "offline_mode" in capsys.readouterr().err
    code, _ = run_cli(*args, "--request-option", "hotwords=captioneer")
    err = capsys.readouterr().err
    assert code == 2 and "Phonon-2" in err and err.count("\n") == 1
    code, _ = run_cli(
        *args,
        "--session-option",
        "vad_model_path=/nonexistent/silero_vad.onnx",
        "--request-option",
        "audio_chunk_mode=vad",
    )
    assert code == 2 and "Silero VAD model not found" in capsys.readouterr().err
    code, out = run_cli(*args, "--mode", "streaming", "--format", "jsonl")
    assert code == 0 and json.loads(out.splitlines()[-1])["type"] == "done"


def test_console_script_process() -> None:
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "app.launcher",
            "transcribe",
            str(audio_path("quiet")),
            "--model",
            str(model_dir("tiny_b")),
            "--format",
            "json",
            *COMMON,
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["token_ids"] == expected("tiny_b")["clips"]["quiet"]["token_ids"]


def _jsonl(out: str) -> list[dict]:
    return [json.loads(line) for line in out.splitlines()]


def test_live_stream_of_a_file_equals_long_form() -> None:
    code, out = run_cli(
        "transcribe",
        str(audio_path("long")),
        "--model",
        str(model_dir("tiny_b")),
        "--mode",
        "streaming",
        "--format",
        "jsonl",
        *COMMON,
    )
    assert code == 0
    events = _jsonl(out)
    kinds = [e["type"] for e in events]
    assert kinds[-1] == "done" and "delta" in kinds and "snapshot" in kinds
    done = events[-1]
    assert done["text"] == expected("tiny_b")["long_form"]["text"]
    assert done["token_ids"] == expected("tiny_b")["long_form"]["token_ids"]
    assert done["text"].startswith("".join(e["text"] for e in events if e["type"] == "delta"))


def test_phonon_live_stream_from_stdin_with_hotwords(tmp_path: Path) -> None:
    from phonon_variant import make_phonon_variant

    model = make_phonon_variant(tmp_path / "tiny_phonon")
    audio = np.concatenate([load_audio_file(audio_path("medium")), np.zeros(16000, np.float32)])
    pcm = audio.astype("<f4").tobytes()
    results = {}
    for hotwords in ("", "umbrella"):
        out = io.StringIO()
        argv = [
            "transcribe",
            "-",
            "--model",
            str(model),
            "--mode",
            "streaming",
            "--format",
            "jsonl",
            "--input-format",
            "f32le",
            "--request-option",
            f"hotwords={hotwords}",
            *COMMON,
        ]
        assert main(argv, out=out, stdin=io.BytesIO(pcm)) == 0
        events = _jsonl(out.getvalue())
        kinds = [e["type"] for e in events]
        assert kinds[-1] == "done" and "snapshot" in kinds and "speech_end" in kinds
        done = events[-1]
        assert done["language"] == "en"
        assert "".join(e["text"] for e in events if e["type"] == "delta") == done["text"]  # deltas add up
        results[hotwords] = done["text"]
    assert "umbrella" in results["umbrella"] and results["umbrella"] != results[""]
