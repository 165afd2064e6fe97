"""One server for the module's tests: the bundled demo model and a test engine that is slow or fails on
request, each in its own worker process. Extra servers with other settings reuse the same workers."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from inference.models.spec import load_family_spec
from inference.server.config import ServerConfig
from inference.server.registry import ModelRegistry, ServedModel
from tests.server.harness import DEMO_MODEL, FAULTY_FACTORY, running_server


@pytest.fixture(scope="session")
def registry() -> Iterator[ModelRegistry]:
    demo = ServedModel(
        "demo",
        DEMO_MODEL,
        "parakeet_tdt",
        load_family_spec("parakeet_tdt"),
        ("en",),
        2,
        aliases=("demo_model",),
    )
    # The test engine "transcribes" 0.05 s per audio second or push unless a request asks for more (delay_s).
    faulty = ServedModel(
        "faulty",
        DEMO_MODEL,
        "faulty",
        None,
        (),
        1,
        factory=FAULTY_FACTORY,
        default_request_options={"delay_s": 0.05},
    )
    models = ModelRegistry([demo, faulty])
    models.start(threads=1)
    try:
        yield models
    finally:
        models.close()


@pytest.fixture(scope="session")
def base_url(registry: ModelRegistry) -> Iterator[str]:
    with running_server(ServerConfig(), registry) as url:
        yield url


@pytest.fixture
def http(base_url: str) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=base_url, timeout=60) as client:
        yield client
