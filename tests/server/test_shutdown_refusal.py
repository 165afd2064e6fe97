"""While `captioneer serve` drains requests in flight after SIGTERM, new clients get the documented 503 with
Retry-After (they are not refused at the socket), and the request in flight still finishes."""

from __future__ import annotations

import base64
import threading
import time

import httpx
import numpy as np

from inference.server.registry import ModelRegistry
from tests.server.harness import openai_error, wav_bytes
from tests.server.test_shutdown import stoppable_server


def test_new_requests_during_the_grace_get_a_503_not_a_refused_connection(registry: ModelRegistry) -> None:
    faulty = registry.get("faulty")
    slow = {
        "model": "faulty",
        "audio": base64.b64encode(wav_bytes(np.full(16000 * 5, 0.01, np.float32))).decode(),
        "options": {"delay_s": 2.0},
    }  # 10 s of "inference", well within the grace
    answers: list[httpx.Response] = []
    with (
        stoppable_server(registry, grace_s=120) as (url, server),
        httpx.Client(base_url=url, timeout=120) as http,
    ):
        first = threading.Thread(
            target=lambda: answers.append(http.post("/v1/audio/transcriptions", json=slow))
        )
        first.start()
        deadline = time.monotonic() + 60
        while faulty.active == 0:
            assert time.monotonic() < deadline, "the slow request never started"
            time.sleep(0.01)
        server.stop()
        with httpx.Client(base_url=url, timeout=60) as other:  # a new connection
            late = other.get("/v1/models")
        message = openai_error(late, 503, "server_shutting_down")
        assert "shutting down" in message and late.headers["retry-after"] == "5"
        first.join(120)
    assert answers and answers[0].status_code == 200, answers
    assert faulty.active == 0
