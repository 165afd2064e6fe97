"""``POST /v1/audio/translations`` (OpenAI's route) on a Whisper model, through the official client."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from inference.models.spec import load_family_spec
from inference.server.config import ServerConfig
from inference.server.registry import ModelRegistry, ServedModel
from tests.server.harness import running_server
from tests.whisper_ct2.whisper_fixtures import CLIP_FILES, MODEL80, cases, expected


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
