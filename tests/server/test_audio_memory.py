"""A real ``captioneer serve`` process fed the files that used to take it to gigabytes, each sent by as many
clients at once as the default ``--max-concurrent`` lets in: a 718 KB FLAC declaring 655 350 Hz for 300 s, a 7 KB
WAV declaring 1 Hz (3500 s once resampled) and FLACs that state no length (STREAMINFO total_samples 0), over and
under the limit. Each is refused or decoded within a fixed peak RSS over the idle server (the kernel's high-water
mark, reset before each case) and the server returns to its idle size afterwards."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

from inference.server.config import ServerConfig
from tests.audio.test_audio_limits import flac, without_length
from tests.audio.wav_builders import PCM, chunk, fmt_body, riff
from tests.server.harness import REPO, SAMPLE_1

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="reads the server's RSS from /proc")
CLIENTS = ServerConfig().max_concurrent
MAX_AUDIO_S = 120  # keeps the over-limit case short; the default limit is checked the same way
PEAK_BOUND_MB = 300
IDLE_MARGIN_MB = 30


def _status_mb(pid: int, field: str) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    raise AssertionError(f"no {field} in /proc/{pid}/status")


def _reset_peak(pid: int) -> None:
    Path(f"/proc/{pid}/clear_refs").write_text("5")  # VmHWM starts again from the current RSS


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, int]]:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    home = tmp_path_factory.mktemp("home")
    process = subprocess.Popen(
        [sys.executable, "-m", "inference.cli", "serve", "--port", str(port), "--threads", "1"]
        + ["--max-audio-s", str(MAX_AUDIO_S)],
        cwd=REPO,
        env={**os.environ, "CAPTIONEER_HOME": str(home)},
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            assert process.poll() is None, "the server exited"
            try:
                httpx.get(f"{url}/health", timeout=5)
                break
            except httpx.TransportError:
                assert time.monotonic() < deadline, "the server did not start"
                time.sleep(0.2)
        yield url, process.pid
    finally:
        process.terminate()
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _send_at_once(url: str, name: str, data: bytes) -> list[httpx.Response]:
    def send(_: int) -> httpx.Response:
        return httpx.post(
            f"{url}/v1/audio/transcriptions",
            data={"busy_timeout_ms": "120000"},
            files={"file": (name, data)},
            timeout=300,
        )

    with ThreadPoolExecutor(CLIENTS) as pool:
        return list(pool.map(send, range(CLIENTS)))


def _settled_rss(pid: int, idle_mb: float) -> float:
    """The server's RSS once it is back within the margin of idle (or whatever it is at the deadline)."""
    deadline = time.monotonic() + 60
    while (now := _status_mb(pid, "VmRSS")) > idle_mb + IDLE_MARGIN_MB and time.monotonic() < deadline:
        time.sleep(0.1)
    return now


CASES = [
    ("fast.flac", lambda: flac(655350, 300.0), 400, "declares a sample rate of 655350 Hz"),
    (
        "slow.wav",
        lambda: riff(chunk(b"fmt ", fmt_body(PCM, 1, 1, 16)), chunk(b"data", b"\0" * 7000)),
        400,
        "declares a sample rate of 1 Hz",
    ),
    (
        "endless.flac",
        lambda: without_length(flac(48000, MAX_AUDIO_S + 30, channels=2)),
        413,
        f"lasts more than {MAX_AUDIO_S} s, more than this server's limit of {MAX_AUDIO_S} s",
    ),
    ("unstated.flac", lambda: without_length(flac(48000, 60.0, channels=2)), 200, None),
]


@pytest.mark.slow
def test_hostile_audio_is_refused_or_decoded_in_bounded_memory_that_is_given_back(
    server: tuple[str, int],
) -> None:
    url, pid = server
    warm_up = flac(48000, 2.0, channels=2)  # loads soundfile and soxr once, as any first FLAC does
    assert _send_at_once(url, "warm.flac", warm_up)[0].status_code == 200
    assert (
        httpx.post(
            f"{url}/v1/audio/transcriptions", files={"file": SAMPLE_1.read_bytes()}, timeout=300
        ).status_code
        == 200
    )
    idle = _settled_rss(pid, _status_mb(pid, "VmRSS"))
    figures = []
    for name, make, status, message in CASES:
        data = make()
        _reset_peak(pid)
        answers = _send_at_once(url, name, data)
        peak = _status_mb(pid, "VmHWM") - idle
        after = _settled_rss(pid, idle) - idle
        figures.append(f"{name} ({len(data) // 1024} KB): peak +{peak:.0f} MB, after +{after:.0f} MB")
        assert [a.status_code for a in answers] == [status] * CLIENTS, (name, answers[0].text)
        if message is not None:
            assert message in answers[0].json()["error"]["message"], answers[0].text
        else:
            assert answers[0].json()["usage"]["seconds"] == 60
        assert peak <= PEAK_BOUND_MB, figures
        assert after <= IDLE_MARGIN_MB, figures
    print("; ".join(figures))
