from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from inference.engine import load_engine
from tests.whisper_ct2.whisper_fixtures import MODEL80, MODELS

_loaded: dict[str, Any] = {}


def fixture_engine(model: str) -> Any:
    """A fixture model in float32 (its float16 weights widened exactly), so decoding matches transformers."""
    if model not in _loaded:
        _loaded[model] = load_engine(
            MODELS[model], session_options={"compute_type": "float32"}, backend="cpu", threads=1
        )
    return _loaded[model]


@pytest.fixture(scope="module")
def engine() -> Iterator[Any]:
    loaded = load_engine(MODEL80, session_options={"compute_type": "float32"}, backend="cpu", threads=1)
    yield loaded
    loaded.close()


@pytest.fixture(scope="module")
def engines() -> Iterator[Any]:
    yield fixture_engine
    for loaded in _loaded.values():
        loaded.close()
    _loaded.clear()
