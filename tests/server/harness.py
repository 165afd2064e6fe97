"""A real uvicorn server on 127.0.0.1 (a free port) in a thread of the test process, and the test clips."""

from __future__ import annotations

import contextlib
import io
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import numpy as np
import soundfile
import uvicorn

from inference.audio.io import load_audio_file
from inference.client import WorkerPolicy
from inference.server.app import create_app
from inference.server.config import ServerConfig
from inference.server.registry import ModelRegistry, ServedModel
from inference.server.run import uvicorn_config

REPO = Path(__file__).resolve().parents[2]
DEMO_MODEL = REPO / "resources" / "demo_model"
SAMPLE_1 = REPO / "resources" / "samples" / "demo_sample_1.wav"
SAMPLE_2 = REPO / "resources" / "samples" / "demo_sample_2.wav"
TEXT_1 = "emma quickly closed the early bottle and sang"
FAULTY_FACTORY = "tests.worker.faulty_engine:create_engine"


@contextlib.contextmanager
def running_server(config: ServerConfig, registry: ModelRegistry) -> Iterator[str]:
    """Serve ``registry`` with ``config`` (its port is ignored: a free one is taken); yields the base URL."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(
        uvicorn_config(create_app(config, registry), grace_s=0, config=config)
    )  # as `captioneer serve` runs it
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, name="test-uvicorn", daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 20
        while not server.started:
            if not thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the test server did not start")
            time.sleep(0.02)
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(10)
        sock.close()
        assert not thread.is_alive(), "the test server did not stop"


def two_sentences() -> np.ndarray:
    """Sample 1, a second of silence, sample 2 and half a second of silence (16 kHz mono float32)."""
    first, second = load_audio_file(SAMPLE_1), load_audio_file(SAMPLE_2)
    silence = np.zeros(16000, np.float32)
    return np.concatenate([first, silence, second, silence[:8000]])


def wav_bytes(audio: np.ndarray, rate: int = 16000) -> bytes:
    out = io.BytesIO()
    soundfile.write(out, audio, rate, format="WAV", subtype="PCM_16")
    return out.getvalue()


def s16le(audio: np.ndarray) -> bytes:
    return (np.clip(audio, -1.0, 1.0) * 32767).astype("<i2").tobytes()


def openai_error(response: httpx.Response, status: int, code: str) -> str:
    """The OpenAI error body of ``response`` after checking its status, shape and code; returns the message."""
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert set(error) == {"message", "type", "param", "code"}
    assert error["code"] == code, error
    assert error["type"] == (
        "invalid_request_error" if status < 500 and status not in (401, 429) else error["type"]
    )
    return str(error["message"])


def fragile_model(policy: WorkerPolicy, revive_after_s: float = 2.0) -> ServedModel:
    """The faulty test engine (0.01 s per push) as model "fragile", supervised by ``policy`` (e.g. a restart
    limit of 0, so that the first death trips it)."""
    return ServedModel(
        "fragile",
        DEMO_MODEL,
        "faulty",
        None,
        (),
        1,
        factory=FAULTY_FACTORY,
        default_request_options={"delay_s": 0.01},
        policy=policy,
        revive_after_s=revive_after_s,
    )
