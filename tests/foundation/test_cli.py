"""The CLI contract: exit codes, one-line errors naming the problem and the fix, catalog commands."""

from __future__ import annotations

import argparse
import io
import json
import subprocess
import sys
import wave
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from inference.cli import main


def run_cli(*argv: str, stdin: bytes = b"") -> tuple[int, str]:
    out = io.StringIO()
    code = main(list(argv), out=out, stdin=io.BytesIO(stdin))
    return code, out.getvalue()


def write_wav(path: Path, seconds: float = 0.5, rate: int = 16000) -> Path:
    samples = (np.sin(np.arange(int(seconds * rate)) * 0.05) * 8000).astype("<i2")
    with wave.open(str(path), "wb") as handle:
        handle.setnchannels(1)
        handle.setsampwidth(2)
        handle.setframerate(rate)
        handle.writeframes(samples.tobytes())
    return path


def test_help_exits_zero() -> None:
    code, out = run_cli("--help")
    assert code == 0
    assert "transcribe" in out and "models" in out


def test_no_subcommand_prints_help() -> None:
    # The `captioneer` launcher opens the GUI without arguments; the bare CLI prints help.
    code, out = run_cli()
    assert code == 0 and "usage" in out


def test_missing_audio_file_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    code, _ = run_cli("transcribe", "nonexistent.wav")
    err = capsys.readouterr().err
    assert code == 2
    assert err.count("\n") == 1
    assert "audio file not found: nonexistent.wav" in err


def test_unknown_family(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    wav = write_wav(tmp_path / "a.wav")
    code, _ = run_cli("transcribe", str(wav), "--family", "whisper")
    assert code == 2
    assert "unknown family 'whisper'" in capsys.readouterr().err


def test_unknown_flag_is_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    code, _ = run_cli("transcribe", "x.wav", "--frobnicate")
    assert code == 2
    assert "--frobnicate" in capsys.readouterr().err


def test_bad_format_choice(capsys: pytest.CaptureFixture[str]) -> None:
    code, _ = run_cli("transcribe", "x.wav", "--format", "docx")
    assert code == 2
    assert "docx" in capsys.readouterr().err


def test_no_model_installed_explains_how_to_get_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # An empty catalog: no bundled demo either.
    specs = tmp_path / "specs"
    specs.mkdir()
    monkeypatch.setenv("CAPTIONEER_MODEL_SPECS", str(specs))
    wav = write_wav(tmp_path / "a.wav")
    code, _ = run_cli("transcribe", str(wav))
    assert code == 2
    err = capsys.readouterr().err
    assert "no model is installed" in err and "captioneer models install" in err


def test_model_path_with_foreign_config(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    model = tmp_path / "m"
    model.mkdir()
    (model / "config.json").write_text(json.dumps({"model_type": "wav2vec2"}))
    wav = write_wav(tmp_path / "a.wav")
    code, _ = run_cli("transcribe", str(wav), "--model", str(model))
    assert code == 2
    err = capsys.readouterr().err
    assert "model_type 'wav2vec2'" in err


def test_nemo_archive_rejected_with_fix(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    nemo = tmp_path / "parakeet.nemo"
    nemo.write_bytes(b"PK\x03\x04")
    wav = write_wav(tmp_path / "a.wav")
    code, _ = run_cli("transcribe", str(wav), "--model", str(nemo))
    assert code == 2
    assert "NeMo archive" in capsys.readouterr().err


def _fake_parakeet_dir(tmp_path: Path) -> Path:
    model = tmp_path / "pk"
    model.mkdir()
    (model / "config.json").write_text(json.dumps({"model_type": "parakeet_tdt"}))
    return model


def test_unknown_session_option_names_known_ones(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    wav = write_wav(tmp_path / "a.wav")
    model = _fake_parakeet_dir(tmp_path)
    code, _ = run_cli("transcribe", str(wav), "--model", str(model), "--session-option", "bogus=1")
    assert code == 2
    err = capsys.readouterr().err
    assert "unknown session option 'bogus'" in err and "offline_mode" in err


def test_out_of_range_request_option(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    wav = write_wav(tmp_path / "a.wav")
    model = _fake_parakeet_dir(tmp_path)
    code, _ = run_cli("transcribe", str(wav), "--model", str(model), "--request-option", "hotwords_score=101")
    assert code == 2
    assert "hotwords_score" in capsys.readouterr().err


def test_malformed_key_value(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    wav = write_wav(tmp_path / "a.wav")
    model = _fake_parakeet_dir(tmp_path)
    code, _ = run_cli("transcribe", str(wav), "--model", str(model), "--session-option", "offline_mode")
    assert code == 2
    assert "KEY=VALUE" in capsys.readouterr().err


def test_language_rejected_for_family_without_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    wav = write_wav(tmp_path / "a.wav")
    model = _fake_parakeet_dir(tmp_path)
    code, _ = run_cli("transcribe", str(wav), "--model", str(model), "--language", "en")
    assert code == 2
    assert "does not take --language" in capsys.readouterr().err


def test_jsonl_requires_streaming(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    wav = write_wav(tmp_path / "a.wav")
    code, _ = run_cli("transcribe", str(wav), "--format", "jsonl")
    assert code == 2
    assert "--mode streaming" in capsys.readouterr().err


def test_not_a_wav_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bogus = tmp_path / "notes.wav"
    bogus.write_text("hello, I am text")
    model = _fake_parakeet_dir(tmp_path)
    code, _ = run_cli("transcribe", str(bogus), "--model", str(model))
    assert code == 2
    assert "notes.wav" in capsys.readouterr().err


def test_stdin_rate_validated(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    model = _fake_parakeet_dir(tmp_path)
    code, _ = run_cli("transcribe", "-", "--model", str(model), "--input-rate", "50", stdin=b"\0\0" * 100)
    assert code == 2
    assert "--input-rate" in capsys.readouterr().err


def test_models_list_shows_catalog() -> None:
    code, out = run_cli("models", "list")
    assert code == 0
    assert "parakeet_tdt_q8_0" in out and "confucius4_r2t2_q8_0" in out


def test_models_list_json_and_info() -> None:
    code, out = run_cli("models", "list", "--json")
    assert code == 0
    rows = json.loads(out)
    assert {r["family"] for r in rows} == {"parakeet_tdt", "confucius4_r2t2", "whisper_ct2"}
    assert all(r["installed"] in (True, False) for r in rows)
    code, out = run_cli("models", "info", "confucius4_r2t2_q8_0")
    assert code == 0
    info = json.loads(out)
    assert info["hf_repo"] == "davidxifeng/Confucius4-R2T2-gguf"
    assert info["files"][0]["sha256"].startswith("19f5ccd6")


def test_models_info_unknown_id(capsys: pytest.CaptureFixture[str]) -> None:
    code, _ = run_cli("models", "info", "nope")
    assert code == 2
    assert "unknown model package 'nope'" in capsys.readouterr().err


def test_models_path_respects_captioneer_home(isolated_home: Path) -> None:
    code, out = run_cli("models", "path")
    assert code == 0
    assert out.strip() == str(isolated_home / "models")


def test_console_script_runs_as_a_process(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "app.launcher", "transcribe", str(tmp_path / "missing.wav")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2
    assert proc.stderr.strip().startswith("captioneer: error: audio file not found")


def _parsers(parser: argparse.ArgumentParser) -> Iterator[argparse.ArgumentParser]:
    """``parser`` and every subcommand's parser under it, depth first."""
    yield parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child in dict.fromkeys(action.choices.values()):
                yield from _parsers(child)


def test_help_lists_every_command_and_explains_every_option_without_markup() -> None:
    from inference.cli import build_parser

    parser = build_parser()
    top = parser.format_help()
    commands = top[top.index("commands:") :]
    for command in ("gui", "dictate", "transcribe", "models", "serve"):
        assert f"\n    {command} " in commands, command  # in the command list, with its help line
    walked = list(_parsers(parser))
    assert len(walked) >= 13  # the top, 5 commands, 7 models subcommands
    for each in walked:
        text = each.format_help()
        assert "``" not in text, each.prog  # reST markup reads as noise in a terminal
        for action in each._actions:
            if isinstance(action, argparse._HelpAction | argparse._SubParsersAction):
                continue
            assert action.help and action.help != argparse.SUPPRESS, (each.prog, action.dest)
    transcribe = next(p for p in walked if p.prog == "captioneer transcribe").format_help()
    assert "WAV file" not in transcribe and all(name in transcribe for name in ("WAV", "FLAC", "OGG", "MP3"))


@pytest.mark.parametrize("command", ["gui", "dictate"])
def test_the_app_s_commands_print_the_help_the_command_list_gives(
    command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from app.launcher import main as launcher_main
    from inference.cli import build_parser

    with pytest.raises(SystemExit) as exited:
        launcher_main([command, "--help"])
    assert exited.value.code == 0
    text = capsys.readouterr().out
    assert text.startswith(f"usage: captioneer {command} ") and "``" not in text
    listed = next(p for p in _parsers(build_parser()) if p.prog == f"captioneer {command}").format_help()
    assert text.split("options:")[1] == listed.split("options:")[1]  # one definition of the options


def test_an_unwritable_output_is_refused_before_transcribing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    wav = write_wav(tmp_path / "a.wav")
    code, _ = run_cli("transcribe", str(wav), "-o", str(tmp_path / "missing" / "a.srt"))
    err = capsys.readouterr().err
    assert code == 2 and "the folder" in err and "does not exist" in err and "Traceback" not in err
    code, _ = run_cli("transcribe", str(wav), "-o", str(tmp_path))
    assert code == 2 and "is a folder" in capsys.readouterr().err


def test_a_text_file_named_wav_is_named_in_the_error_not_a_python_object(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    fake = tmp_path / "notes.wav"
    fake.write_text("this is not audio")
    code, _ = run_cli("transcribe", str(fake))
    err = capsys.readouterr().err
    assert code == 2 and "notes.wav is not an audio file" in err and "BytesIO" not in err and "0x" not in err


def test_without_a_display_the_window_says_so_in_one_line() -> None:
    from app.main import missing_display

    problem = missing_display({}, "linux")
    assert problem is not None and "QT_QPA_PLATFORM=offscreen" in problem and "\n" not in problem
    assert missing_display({"DISPLAY": ":0"}, "linux") is None
    assert missing_display({"QT_QPA_PLATFORM": "offscreen"}, "linux") is None
    env = {
        key: value
        for key, value in __import__("os").environ.items()
        if key not in ("DISPLAY", "WAYLAND_DISPLAY", "QT_QPA_PLATFORM")
    }
    done = subprocess.run(
        [sys.executable, "-m", "app.launcher"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        cwd=Path(__file__).resolve().parents[2],
    )
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and "no display" in done.stderr


def test_translate_is_refused_by_name_for_a_family_without_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    wav = write_wav(tmp_path / "a.wav")
    code, _ = run_cli("transcribe", str(wav), "--task", "translate")
    err = capsys.readouterr().err
    assert code == 2 and "parakeet_tdt family does not take --task" in err and "whisper_ct2" in err


def test_a_streamed_file_never_pushes_two_chunks_at_once() -> None:
    """A push of more than a chunk is a backlog that R2T2 decodes at once (catch-up); a file streamed with a
    chunk shorter than the usual 320 ms pieces must still be decoded chunk by chunk."""
    from inference.cli import stream_push_samples

    assert stream_push_samples({}) == 5120
    assert stream_push_samples({"chunk_size_ms": 1000.0}) == 5120
    assert stream_push_samples({"chunk_size_ms": 160.0}) == 2560
    assert stream_push_samples({"chunk_size_ms": 80}) == 1280
