"""Requests that used to be 500s (or echoed the server's own paths): each is a 4xx in OpenAI's error shape that
names the problem, with no server path and no 5000-character echo in it."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from inference.audio.io import load_audio_file
from inference.server.app import _unexpected
from inference.server.config import ServerConfig
from inference.server.registry import ModelRegistry
from tests.server.harness import SAMPLE_1, openai_error, running_server, s16le, wav_bytes

HUGE = "9" * 5000


@pytest.fixture(scope="module")
def audio_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("served_audio")
    (root / "loop").symlink_to(root / "loop")
    (root / "a").symlink_to(root / "b")
    (root / "b").symlink_to(root / "a")
    return root


@pytest.fixture(scope="module")
def dir_http(registry: ModelRegistry, audio_dir: Path) -> Iterator[httpx.Client]:
    with (
        running_server(ServerConfig(audio_dir=audio_dir), registry) as url,
        httpx.Client(base_url=url, timeout=60) as http,
    ):
        yield http


def _no_server_path(message: str, audio_dir: Path) -> None:
    assert str(audio_dir) not in message and str(audio_dir.resolve()) not in message, message


@pytest.mark.parametrize("name", ["loop", "a"])
def test_a_symlink_loop_is_a_400_without_the_audio_dir(
    dir_http: httpx.Client, audio_dir: Path, name: str
) -> None:
    response = dir_http.post("/v1/audio/transcriptions", json={"model": "demo", "audio_path": name})
    message = openai_error(response, 400, "file_not_readable")
    assert "link loop" in message
    _no_server_path(message, audio_dir)


def test_a_300_character_audio_path_is_a_400_without_the_audio_dir(
    dir_http: httpx.Client, audio_dir: Path
) -> None:
    response = dir_http.post("/v1/audio/transcriptions", json={"model": "demo", "audio_path": "x" * 300})
    message = openai_error(response, 400, "file_not_readable")
    assert "too long" in message and "300 characters" in message and len(message) < 200
    _no_server_path(message, audio_dir)


def test_a_path_outside_the_audio_dir_does_not_name_it(dir_http: httpx.Client, audio_dir: Path) -> None:
    for value in ("..", "/etc/passwd"):
        response = dir_http.post("/v1/audio/transcriptions", json={"model": "demo", "audio_path": value})
        _no_server_path(openai_error(response, 403, "path_not_allowed"), audio_dir)


def test_deeply_nested_form_options_are_a_400(http: httpx.Client) -> None:
    deep = '{"a":' * 100_000 + "1" + "}" * 100_000
    response = http.post(
        "/v1/audio/transcriptions",
        files={"file": ("talk.wav", wav_bytes(load_audio_file(SAMPLE_1)), "audio/wav")},
        data={"model": "demo", "options": deep},
    )
    assert "nested too deeply" in openai_error(response, 400, "invalid_value")


def test_a_5000_digit_busy_timeout_is_a_400_everywhere(http: httpx.Client) -> None:
    wav = wav_bytes(load_audio_file(SAMPLE_1))
    form = http.post(
        "/v1/audio/transcriptions",
        files={"file": ("talk.wav", wav, "audio/wav")},
        data={"model": "demo", "busy_timeout_ms": HUGE},
    )
    as_text = http.post(
        "/v1/audio/transcriptions", json={"model": "demo", "audio": "AAAA", "busy_timeout_ms": HUGE}
    )
    live = http.post(
        f"/v1/audio/transcriptions/live?model=demo&busy_timeout_ms={HUGE}",
        content=s16le(load_audio_file(SAMPLE_1)),
    )
    for response in (form, as_text, live):
        message = openai_error(response, 400, "invalid_value")
        assert "busy_timeout_ms" in message and "5000 characters" in message and len(message) < 300
    as_number = http.post(
        "/v1/audio/transcriptions",
        content=b'{"model": "demo", "audio": "AAAA", "busy_timeout_ms": ' + HUGE.encode() + b"}",
        headers={"content-type": "application/json"},
    )
    assert "4300 digits" in openai_error(as_number, 400, "invalid_json")


def test_a_5000_digit_query_number_on_live_is_a_short_400(http: httpx.Client) -> None:
    response = http.post(
        f"/v1/audio/transcriptions/live?model=demo&sample_rate={HUGE}", content=b"\x00" * 3200
    )
    message = openai_error(response, 400, "invalid_value")
    assert "sample_rate" in message and len(message) < 300


class _Leaky(Exception):
    pass


def test_a_500_names_no_exception_text() -> None:
    """The catch-all answer: what failed is in the server log, not in the answer (it may hold paths)."""
    response = asyncio.run(_unexpected(None, _Leaky("/home/someone/secret/path")))  # type: ignore[arg-type]
    body = json.loads(bytes(response.body))
    assert response.status_code == 500 and "/home/someone" not in body["error"]["message"]
    assert "_Leaky" in body["error"]["message"]
