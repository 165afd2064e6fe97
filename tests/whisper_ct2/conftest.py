from __future__ import annotations

from collections.abc import Iterator

import pytest

from inference.engine import load_engine
from tests.whisper_ct2.whisper_fixtures import MODEL80


@pytest.fixture(scope="module")
def engine() -> Iterator[object]:
    """The fixture model in float32 (its float16 weights widened exactly), so decoding matches transformers."""
    loaded = load_engine(MODEL80, session_options={"compute_type": "float32"}, backend="cpu", threads=1)
    yield loaded
    loaded.close()
