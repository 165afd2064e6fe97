"""``POST /v1/audio/translations`` (OpenAI's route) on a Whisper model, through the official client."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from inference.engine import load_engine
from inference.models.spec import load_family_spec
from inference.server.config import ServerConfig
from inference.server.registry import ModelRegistry, ServedModel
from tests.server.harness import running_server
from tests.whisper_ct2.whisper_fixtures import CLIP_FILES, MODEL80, cases, clip, expected, request_options


@pytest.fixture(scope="module")
def url() -> Iterator[str]:
    whisper = ServedModel(
        "whisper",
        MODEL80,
        "whisper_ct2",
        load_family_spec("whisper_ct2"),
        (),
        1,
        session_options={"compute_type": "float32"},
        default_request_options={"max_new_tokens": expected()["max_new_tokens"]},
    )
    registry = ModelRegistry([whisper])
    registry.start(backend="cpu", threads=1)
    try:
        with running_server(ServerConfig(), registry) as base:
            yield base
    finally:
        registry.close()


def test_translations_route_gives_the_reference_translation(url: str) -> None:
    import openai

    case = next(c for c in cases("model80") if c["task"] == "translate" and not c["initial_prompt"])
    client = openai.OpenAI(base_url=f"{url}/v1", api_key="unused")
    with CLIP_FILES[case["clip"]].open("rb") as audio:
        result = client.audio.translations.create(
            model="whisper", file=audio, extra_body={"language": case["language"]}
        )
    assert result.text.strip() == case["text"].strip()
    # The same clip transcribed differs: the task reached the model.
    with CLIP_FILES[case["clip"]].open("rb") as audio:
        plain = client.audio.transcriptions.create(model="whisper", file=audio, language=case["language"])
    assert plain.text != result.text


def _case_with_prompt() -> dict[str, Any]:
    return next(c for c in cases("model80") if c["initial_prompt"])


def test_the_prompt_field_reaches_whisper_as_its_initial_prompt(url: str) -> None:
    import openai

    case = _case_with_prompt()
    client = openai.OpenAI(base_url=f"{url}/v1", api_key="unused")
    with CLIP_FILES[case["clip"]].open("rb") as audio:
        result = client.audio.transcriptions.create(
            model="whisper", file=audio, language=case["language"], prompt=case["initial_prompt"]
        )
    assert result.text.strip() == case["text"].strip()


def test_the_prompt_field_reaches_a_translation_too(url: str) -> None:
    case = _case_with_prompt()
    options = {**request_options(case), "task": "translate", "language": "de"}
    with load_engine(
        MODEL80, session_options={"compute_type": "float32"}, backend="cpu", threads=1
    ) as engine:  # type: ignore[attr-defined]
        offline = engine.transcribe(clip(case["clip"]), **options)
    with CLIP_FILES[case["clip"]].open("rb") as audio:
        answer = httpx.post(
            f"{url}/v1/audio/translations",
            data={"model": "whisper", "language": "de", "prompt": case["initial_prompt"]},
            files={"file": audio},
            timeout=120,
        )
    assert answer.status_code == 200, answer.text
    assert answer.json()["text"] == offline.text.strip()


@pytest.mark.parametrize(("route", "task"), [("translations", "translate"), ("transcriptions", "transcribe")])
def test_verbose_json_names_the_task_of_the_route(url: str, route: str, task: str) -> None:
    with CLIP_FILES["sample1"].open("rb") as audio:
        answer = httpx.post(
            f"{url}/v1/audio/{route}",
            data={"model": "whisper", "language": "de", "response_format": "verbose_json"},
            files={"file": audio},
            timeout=120,
        )
    assert answer.status_code == 200, answer.text
    assert answer.json()["task"] == task


def test_languages_are_taken_by_name_and_bad_ones_refused_before_the_model(url: str) -> None:
    def send(language: str) -> httpx.Response:
        with CLIP_FILES["sample1"].open("rb") as audio:
            return httpx.post(
                f"{url}/v1/audio/translations",
                data={"model": "whisper", "language": language},
                files={"file": audio},
                timeout=120,
            )

    by_code, by_name = send("de"), send(" German ")
    assert by_code.status_code == by_name.status_code == 200, by_name.text
    assert by_name.json()["text"] == by_code.json()["text"]
    refused = send("Klingon")
    error = refused.json()["error"]
    # The server's own check (unsupported_language), not the engine's after a trip to the worker (invalid_value).
    assert (
        refused.status_code == 400
        and error["code"] == "unsupported_language"
        and error["param"] == "language"
    )
    assert (
        "model 'whisper' does not know the language 'Klingon'" in error["message"]
        and "de (german)" in error["message"]
    )
