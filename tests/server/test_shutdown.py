"""Stopping `captioneer serve` with work in flight: requests already running finish within the grace period,
new ones get a 503, a live upload ends where it is with its transcript and [DONE], and past the grace the
answer is an OpenAI-shaped error (JSON, or an SSE error event and [DONE]), never a plain-text 500."""

from __future__ import annotations

import base64
import contextlib
import threading
import time
from collections.abc import Iterator

import httpx
import numpy as np

from inference.server.app import create_app
from inference.server.config import ServerConfig
from inference.server.registry import ModelRegistry
from inference.server.run import DrainingServer, bind, uvicorn_config
from inference.server.shutdown import ShutdownState
from tests.server.harness import TEXT_1, s16le, two_sentences, wav_bytes
from tests.server.live_client import post_live, split


@contextlib.contextmanager
def stoppable_server(registry: ModelRegistry, grace_s: float) -> Iterator[tuple[str, DrainingServer]]:
    sock = bind("127.0.0.1", 0)
    shutdown = ShutdownState(grace_s)
    app = create_app(ServerConfig(grace_s=grace_s), registry, shutdown)
    server = DrainingServer(uvicorn_config(app, grace_s), shutdown)
    thread = threading.Thread(target=server.run, args=([sock],), daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        assert time.monotonic() < deadline and thread.is_alive(), "the server did not start"
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}", server
    finally:
        server.stop()
        thread.join(30)
        sock.close()
        assert not thread.is_alive()


def test_a_live_upload_cut_by_a_shutdown_gets_its_transcript_and_done(registry: ModelRegistry) -> None:
    with stoppable_server(registry, grace_s=10) as (url, server):
        pieces = split(s16le(two_sentences()), 3200)  # 0.1 s each

        def stop_midway() -> Iterator[bytes]:
            for index, piece in enumerate(pieces):
                if index == 55:  # after the first sentence and its pause
                    threading.Timer(0.05, server.stop).start()
                yield piece

        result = post_live(
            url,
            {"model": "demo", "sample_rate": 16000, "sample_format": "s16le"},
            stop_midway(),
            pace_s=0.05,
            timeout_s=60,
        )
        started = time.monotonic()
    assert time.monotonic() - started < 8  # the server did not wait for its whole grace
    assert result.status == 200 and result.done_marker
    notices = [e for e in result.events if e["type"] == "error"]
    assert (
        len(notices) == 1
        and notices[0]["fatal"] is False
        and "shutting down" in notices[0]["error"]["message"]
    )
    assert notices[0]["error"]["type"] == "server_error"  # the server's doing, not a bad request
    done = result.of_type("transcript.text.done")[0]
    assert done["text"].startswith(TEXT_1)
    assert 5000 < done["timing"]["audio_duration_ms"] < 9000  # cut where it was, not at the end of the body


def test_past_the_grace_a_running_request_gets_an_openai_error_and_new_ones_a_503(
    registry: ModelRegistry,
) -> None:
    slow = {
        "model": "faulty",
        "audio": base64.b64encode(wav_bytes(np.full(48000, 0.01, np.float32))).decode(),
        "options": {"delay_s": 2.0},
    }  # 6 s of "inference"
    answers: list[httpx.Response] = []
    with (
        stoppable_server(registry, grace_s=1) as (url, server),
        httpx.Client(base_url=url, timeout=30) as http,
    ):
        first = threading.Thread(
            target=lambda: answers.append(http.post("/v1/audio/transcriptions", json=slow))
        )
        first.start()
        while registry.get("faulty").active == 0:
            time.sleep(0.01)
        server.stop()
        time.sleep(0.2)
        with httpx.Client(base_url=url, timeout=5) as other:
            try:
                late = other.get("/v1/models")
                assert late.status_code == 503 and late.json()["error"]["code"] == "server_shutting_down"
            except httpx.ConnectError:
                pass  # the listening socket may already be closed: refusing the connection is fine too
        first.join(30)
    response = answers[0]
    assert response.status_code == 503, response.text
    assert response.json()["error"]["code"] == "server_shutting_down"
    assert registry.get("faulty").active == 0


def test_a_busy_port_is_a_clear_error_before_anything_says_serving() -> None:
    import pytest

    from inference.errors import UsageError

    taken = bind("127.0.0.1", 0)
    try:
        with pytest.raises(UsageError) as refused:
            bind("127.0.0.1", taken.getsockname()[1])
    finally:
        taken.close()
    assert "cannot listen on 127.0.0.1:" in refused.value.message and "--port" in str(refused.value.fix)
