"""``captioneer serve`` itself: the flags, the refusal to listen beyond loopback without a key, and a real run
(the installed default model, here the bundled demo) as a separate process that stops cleanly."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from inference.cli import main
from tests.server.harness import REPO, SAMPLE_1, TEXT_1


def test_serve_refuses_other_addresses_without_a_key(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("CAPTIONEER_API_KEY", raising=False)
    assert main(["serve", "--host", "0.0.0.0"]) == 2
    err = capsys.readouterr().err
    assert "refusing to serve on 0.0.0.0 without an API key" in err and "--api-key" in err
    assert main(["serve", "--max-concurrent", "0"]) == 2
    assert "--max-concurrent must be at least 1" in capsys.readouterr().err
    assert main(["serve", "--model", "no_such_model"]) == 2
    assert "neither an existing path nor a known package id" in capsys.readouterr().err


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.mark.slow
def test_serve_runs_the_default_model_and_stops_on_sigterm(isolated_home: Path) -> None:
    port = _free_port()
    env = {**os.environ, "CAPTIONEER_HOME": str(isolated_home), "CAPTIONEER_API_KEY": "k"}
    process = subprocess.Popen(
        [sys.executable, "-m", "inference.cli", "serve", "--port", str(port), "--threads", "1"],
        cwd=REPO,
        env=env,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        url = f"http://127.0.0.1:{port}"
        headers = {"Authorization": "Bearer k"}
        deadline = time.monotonic() + 60
        while True:
            assert process.poll() is None, process.stderr.read() if process.stderr else ""
            try:
                models = httpx.get(f"{url}/v1/models", headers=headers)
                break
            except httpx.ConnectError:
                assert time.monotonic() < deadline, "the server did not start"
                time.sleep(0.2)
        assert [m["id"] for m in models.json()["data"]] == ["demo_parakeet_en"]
        response = httpx.post(
            f"{url}/v1/audio/transcriptions",
            headers=headers,
            timeout=60,
            files={"file": SAMPLE_1.read_bytes()},
        )  # no model field: the only one
        assert response.status_code == 200 and response.json()["text"] == TEXT_1
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            code = process.wait(30)
        except subprocess.TimeoutExpired:
            process.kill()
            raise
    err = process.stderr.read() if process.stderr else ""
    assert code == 0, err
    assert "serving demo_parakeet_en on http://127.0.0.1:" in err and "API key required" in err
    assert err.rstrip().endswith("captioneer: server stopped")
