"""Naming the served models: package ids, paths and their folder names, and no two models with one name."""

from __future__ import annotations

import pytest

from inference.errors import ModelError, UsageError
from inference.paths import AppPaths
from inference.server.errors import ApiError
from inference.server.registry import ModelRegistry, resolve_models
from tests.server.harness import DEMO_MODEL


def test_models_are_named_by_package_id_or_path() -> None:
    paths = AppPaths.from_environment()
    by_id, by_path = resolve_models(["demo_parakeet_en", str(DEMO_MODEL)], paths, 3)
    assert (by_id.id, by_id.family, by_id.languages, by_id.aliases) == (
        "demo_parakeet_en",
        "parakeet_tdt",
        ("en",),
        (),
    )
    assert (
        by_path.id == str(DEMO_MODEL) and by_path.aliases == ("demo_model",) and by_path.max_concurrent == 3
    )
    assert len(by_path.languages) > 1  # a bare checkpoint: its family's languages
    registry = ModelRegistry([by_id, by_path])
    assert registry.get("demo_model") is by_path and registry.get("demo_parakeet_en") is by_id
    with pytest.raises(ApiError) as missing:
        registry.get(None)
    assert missing.value.status == 400 and missing.value.code == "missing_model"
    (default,) = resolve_models([], paths, 1)
    assert default.id == "demo_parakeet_en"  # nothing installed: the bundled demo
    with pytest.raises(UsageError, match="both called 'demo_parakeet_en'"):
        ModelRegistry(resolve_models(["demo_parakeet_en", "demo_parakeet_en"], paths, 1))
    with pytest.raises(ModelError, match="neither an existing path nor a known package id"):
        resolve_models(["nope"], paths, 1)


def test_max_concurrent_is_capped_by_the_streams_one_engine_serves() -> None:
    (model,) = resolve_models([str(DEMO_MODEL)], AppPaths.from_environment(), 50)
    model.start(threads=1)
    try:
        assert model.engine is not None
        limit = model.engine.capabilities.streams_per_engine
        assert 1 <= limit < 50 and model.max_concurrent == limit
    finally:
        model.close()
