"""Fixtures: a tiny catalog, a private store location and a local hub server."""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from inference.models.catalog import Catalog
from inference.models.conversion import ConversionRegistry
from inference.models.hub import HubClient, RetryPolicy
from inference.models.spec import load_all_specs
from inference.models.store import ModelStore
from inference.paths import AppPaths
from inference.registry import FamilyRegistry
from tests.models.hub_server import HubServer, HubState

GGUF_REPO = "test-org/tiny-gguf"
ST_REPO = "test-org/tiny-st"


def payload(size: int, seed: int) -> bytes:
    """Deterministic, incompressible-looking bytes."""
    out = bytearray()
    block = hashlib.sha256(str(seed).encode()).digest()
    while len(out) < size:
        block = hashlib.sha256(block).digest()
        out += block
    return bytes(out[:size])


GGUF_BYTES = payload(600_000, 1)
CONFIG_BYTES = json.dumps({"model_type": "parakeet_tdt", "vocab_size": 8}).encode()
WEIGHTS_BYTES = payload(400_000, 2)


def write_specs(directory: Path, *, wrong_sha_for: str | None = None) -> None:
    gguf_sha = hashlib.sha256(GGUF_BYTES).hexdigest()
    config_sha = hashlib.sha256(CONFIG_BYTES).hexdigest()
    if wrong_sha_for == "gguf":
        gguf_sha = "0" * 64
    if wrong_sha_for == "config":
        config_sha = "0" * 64
    spec = {
        "schema_version": 1,
        "family": "parakeet_tdt",
        "name": "Tiny test family",
        "languages": ["en"],
        "license": "test",
        "session_options": {},
        "request_options": {},
        "packages": [
            {
                "id": "tiny_gguf",
                "name": "Tiny GGUF",
                "format": "gguf",
                "quantization": "q8_0",
                "default": True,
                "hf_repo": GGUF_REPO,
                "revision": "main",
                "strip_prefix": "Sub-GGUF/",
                "files": [{"path": "Sub-GGUF/tiny-q8_0.gguf", "sha256": gguf_sha}],
                "size_bytes": len(GGUF_BYTES),
            },
            {
                "id": "tiny_st",
                "name": "Tiny safetensors",
                "format": "safetensors",
                "quantization": "f32",
                "hf_repo": ST_REPO,
                "revision": "0123456789abcdef0123456789abcdef01234567",
                "target_dir": "tiny-model",
                "files": [{"path": "config.json", "sha256": config_sha}, {"path": "model.safetensors"}],
                "size_bytes": len(CONFIG_BYTES) + len(WEIGHTS_BYTES),
                "size_is_estimate": True,
            },
            {
                "id": "tiny_missing",
                "name": "Tiny missing repo",
                "format": "gguf",
                "hf_repo": "test-org/nothing",
                "revision": "main",
                "files": [{"path": "x.gguf"}],
                "size_bytes": 10,
            },
            {
                "id": "tiny_archive",
                "name": "Tiny archive",
                "format": "phonon2-archive",
                "hf_repo": ST_REPO,
                "revision": "main",
                "files": [{"path": "model.safetensors"}],
                "size_bytes": 10,
            },
            {
                "id": "demo_bundled",
                "name": "Bundled demo",
                "format": "bundled",
                "bundled_path": "resources/none",
                "files": [],
                "size_bytes": 0,
            },
        ],
    }
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "parakeet_tdt.json").write_text(json.dumps(spec), encoding="utf-8")


@pytest.fixture
def app_paths(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AppPaths:
    home = tmp_path / "home"
    specs = tmp_path / "specs"
    write_specs(specs)
    monkeypatch.setenv("CAPTIONEER_HOME", str(home))
    monkeypatch.setenv("CAPTIONEER_MODEL_SPECS", str(specs))
    monkeypatch.delenv("CAPTIONEER_MODELS_DIR", raising=False)
    monkeypatch.delenv("HF_TOKEN", raising=False)
    monkeypatch.setenv("HF_HUB_DISABLE_IMPLICIT_TOKEN", "1")
    return AppPaths.from_environment()


@pytest.fixture
def hub_state() -> HubState:
    state = HubState()
    state.add(GGUF_REPO, "Sub-GGUF/tiny-q8_0.gguf", GGUF_BYTES, lfs=True)
    state.add(ST_REPO, "config.json", CONFIG_BYTES)
    state.add(ST_REPO, "model.safetensors", WEIGHTS_BYTES, lfs=True)
    return state


@pytest.fixture
def hub(hub_state: HubState, monkeypatch: pytest.MonkeyPatch) -> Iterator[HubServer]:
    with HubServer(hub_state) as server:
        monkeypatch.setenv("HF_ENDPOINT", server.endpoint)
        yield server


FAST_RETRY = RetryPolicy(attempts=4, base_delay_s=0.01, max_delay_s=0.05)


def make_store(
    paths: AppPaths, endpoint: str | None = None, token: str | None = None, **kwargs
) -> ModelStore:
    """A store on the local hub. Without ``conversions`` it has the families' importers and detection but no
    install-time conversion, so the tiny catalog's ``tiny_archive`` stands for a package whose conversion this
    build lacks (the shipped registry would convert it)."""
    kwargs.setdefault("conversions", importers_without_conversions())
    return ModelStore(paths, Catalog(paths, load_all_specs()), hub=hub_client(endpoint, token), **kwargs)


def importers_without_conversions() -> ConversionRegistry:
    """The families' source importers and detection, without their install-time conversions."""
    families = FamilyRegistry().conversions()
    return ConversionRegistry(
        source_importers=families.source_importers, detect_family=families.detect_family
    )


def hub_client(endpoint: str | None = None, token: str | None = None) -> HubClient:
    """A client of the local hub (``HF_ENDPOINT``) with quick retries and small chunks."""
    return HubClient(
        endpoint=endpoint or os.environ.get("HF_ENDPOINT"),
        token=token,
        retry=FAST_RETRY,
        chunk_size=32 * 1024,
        read_timeout_s=5,
    )
