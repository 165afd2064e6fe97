"""``captioneer models install/remove/import/verify/cleanup`` end to end against the local hub."""

from __future__ import annotations

import io
import json

from inference.cli import main
from inference.models.progress import InstallProgress
from inference.models.terminal import TerminalProgress
from tests.models.hub_fixtures import GGUF_BYTES


def run(*argv: str) -> tuple[int, str]:
    out = io.StringIO()
    code = main(list(argv), out=out)
    return code, out.getvalue()


def test_install_verify_remove_cycle(app_paths, hub, capsys):
    code, text = run("models", "install", "tiny_gguf")
    assert code == 0, capsys.readouterr().err
    installed = app_paths.models / "tiny_gguf" / "tiny-q8_0.gguf"
    assert text == f"installed tiny_gguf: {installed}\n"
    assert installed.read_bytes() == GGUF_BYTES
    err = capsys.readouterr().err
    assert "downloading tiny-q8_0.gguf" in err and "\r" not in err  # plain lines when not a terminal

    code, text = run("models", "list", "--json")
    rows = {row["id"]: row for row in json.loads(text)}
    assert rows["tiny_gguf"]["installed"] is True and rows["tiny_st"]["installed"] is False

    code, text = run("models", "verify", "tiny_gguf")
    assert code == 0 and text.endswith("tiny_gguf is intact\n")

    installed.write_bytes(b"tampered" + GGUF_BYTES[8:])
    code, text = run("models", "verify", "tiny_gguf")
    assert code == 2 and "BAD tiny-q8_0.gguf" in text
    err = capsys.readouterr().err
    assert "tiny_gguf is damaged" in err and "--force" in err

    code, text = run("models", "remove", "tiny_gguf")
    assert code == 0 and not installed.exists()


def test_hub_refusal_is_one_plain_line_with_exit_1(app_paths, hub, capsys):
    code, _ = run("models", "install", "tiny_missing")
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 1
    assert err[-1].startswith("captioneer: error: the hub refused test-org/nothing")
    assert "Traceback" not in "\n".join(err)


def test_usage_errors_exit_2(app_paths, capsys):
    assert run("models", "install", "no_such")[0] == 2
    assert run("models", "install", "demo_bundled")[0] == 2
    assert run("models", "remove", "tiny_st")[0] == 2
    assert run("models", "install")[0] == 2


def test_import_then_list_and_cleanup(app_paths, tmp_path):
    folder = tmp_path / "My Model"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({"model_type": "qwen3_asr"}), encoding="utf-8")
    (folder / "model.safetensors").write_bytes(b"\0" * 100)
    code, text = run("models", "import", str(folder))
    assert code == 0 and text.startswith("imported as My_Model: ")
    code, text = run("models", "list")
    assert "My_Model" in text and "confucius4_r2t2" in text
    (app_paths.models / ".tmp-x-1").mkdir()  # nobody holds x's lock: its writer died, however recent it is
    assert run("models", "cleanup")[1] == "removed 1 leftover item(s)\n"
    (app_paths.models / ".partial" / "x").mkdir(
        parents=True
    )  # a recent partial download is kept for resuming
    assert run("models", "cleanup")[1] == "removed 0 leftover item(s)\n"
    assert run("models", "cleanup", "--all")[1] == "removed 1 leftover item(s)\n"


def test_terminal_progress_draws_a_bar_on_a_tty(monkeypatch):
    monkeypatch.setenv("COLUMNS", "160")
    stream = io.StringIO()
    bar = TerminalProgress(stream, is_tty=True)
    bar(InstallProgress("p", "downloading", 50, 100, "f.gguf", 1e6, 30.0))
    bar(InstallProgress("p", "downloading", 100, 100, "f.gguf", 1e6, 0.0))
    bar.close()
    text = stream.getvalue()
    assert text.count("\r") == 2 and "50.0%" in text and "100.0%" in text
    assert "1.0 MB/s" in text and "30 s left" in text


def test_models_dir_override_is_the_install_target(app_paths, hub, tmp_path, monkeypatch):
    elsewhere = tmp_path / "big-disk" / "models"
    monkeypatch.setenv("CAPTIONEER_MODELS_DIR", str(elsewhere))
    assert run("models", "path") == (0, f"{elsewhere}\n")
    code, text = run("models", "install", "tiny_gguf")
    assert code == 0 and text == f"installed tiny_gguf: {elsewhere / 'tiny_gguf' / 'tiny-q8_0.gguf'}\n"
    assert not (app_paths.models / "tiny_gguf").exists()


def test_no_network_fails_fast_with_default_retries(app_paths, monkeypatch, capsys):
    import time

    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")  # nothing listens on the discard port
    started = time.monotonic()
    code, _ = run("models", "install", "tiny_gguf")
    assert code == 1
    assert time.monotonic() - started < 10
    assert "cannot connect" in capsys.readouterr().err


def test_conversion_progress_reads_as_a_percentage_not_bytes():
    from inference.models.progress import describe

    report = InstallProgress("p", "converting", 41, 82, message="converting joint.head.weight")
    assert describe(report) == "converting: 50%, converting joint.head.weight"
    assert (
        describe(InstallProgress("p", "verifying", 512, 1024, "a.bin")) == "verifying a.bin: 512 B of 1.0 KB"
    )
