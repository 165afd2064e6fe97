"""``captioneer transcribe --task translate`` passes the task to a Whisper model as a request option."""

from __future__ import annotations

import io
import json
import subprocess
import sys
import wave
from pathlib import Path

import numpy as np
import pytest

from inference.cli import main
from tests.audio.wav_builders import wav_bytes
from tests.whisper_ct2.whisper_fixtures import CLIP_FILES, MODEL80, REPO, cases, expected


def run_cli(*argv: str) -> tuple[int, str]:
    out = io.StringIO()
    return main(list(argv), out=out, stdin=io.BytesIO(b"")), out.getvalue()


@pytest.mark.slow
def test_translate_from_the_command_line_equals_the_reference() -> None:
    case = next(c for c in cases("model80") if c["task"] == "translate")
    code, out = run_cli(
        "transcribe",
        str(CLIP_FILES[case["clip"]]),
        "--model",
        str(MODEL80),
        "--task",
        "translate",
        "--language",
        case["language"],
        "--request-option",
        f"max_new_tokens={expected()['max_new_tokens']}",
        "--session-option",
        "compute_type=float32",
        "--backend",
        "cpu",
        "--format",
        "json",
    )
    assert code == 0
    result = json.loads(out)
    assert result["token_ids"] == case["token_ids"] and result["language"] == case["language"]


def test_task_is_refused_for_a_family_without_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    demo = Path(__file__).resolve().parents[2] / "resources" / "demo_model"
    wav = tmp_path / "a.wav"
    with wave.open(str(wav), "wb") as handle:
        handle.setnchannels(1)
        handle.setsampwidth(2)
        handle.setframerate(16000)
        handle.writeframes(np.zeros(8000, "<i2").tobytes())
    code, _ = run_cli("transcribe", str(wav), "--model", str(demo), "--task", "translate")
    assert code == 2
    assert "does not take --task" in capsys.readouterr().err


@pytest.mark.slow
def test_context_from_the_command_line_is_the_initial_prompt() -> None:
    case = next(c for c in cases("model80") if c["initial_prompt"])
    code, out = run_cli(
        "transcribe",
        str(CLIP_FILES[case["clip"]]),
        "--model",
        str(MODEL80),
        "--context",
        case["initial_prompt"],
        "--language",
        case["language"],
        "--request-option",
        f"max_new_tokens={expected()['max_new_tokens']}",
        "--session-option",
        "compute_type=float32",
        "--backend",
        "cpu",
        "--format",
        "json",
    )
    assert code == 0
    assert json.loads(out)["token_ids"] == case["token_ids"]


@pytest.mark.slow
def test_a_language_by_name_and_no_ctranslate2_notice_on_stderr() -> None:
    # The fixture is saved in float16; on a CPU CTranslate2 runs it as float32 and says so on stderr.
    case = next(c for c in cases("model80") if c["task"] == "translate")
    done = subprocess.run(
        [sys.executable, "-m", "inference.cli", "transcribe", str(CLIP_FILES[case["clip"]])]
        + ["--model", str(MODEL80), "--task", "translate", "--language", "German", "--backend", "cpu"]
        + ["--request-option", f"max_new_tokens={expected()['max_new_tokens']}", "--format", "json"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert case["language"] == "de" and json.loads(done.stdout)["token_ids"] == case["token_ids"]
    assert "ctranslate2" not in done.stderr and "float16" not in done.stderr, done.stderr


def test_an_unknown_language_is_refused_before_the_model_loads(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    wav = tmp_path / "a.wav"
    wav.write_bytes(wav_bytes(np.zeros(8000), 16000))
    # --backend cuda fails when the model loads (no GPU here): the language must be refused before that.
    code, _ = run_cli(
        "transcribe", str(wav), "--model", str(MODEL80), "--language", "Klingon", "--backend", "cuda"
    )
    err = capsys.readouterr().err
    assert code == 2, err
    assert "the whisper_ct2 family does not know the language 'Klingon'" in err and "de (german)" in err
    assert "CUDA" not in err
