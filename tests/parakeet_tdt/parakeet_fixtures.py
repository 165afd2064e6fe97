"""Paths and loaders for the Parakeet-TDT reference fixtures (made by tests/reference/parakeet_tdt/make_fixtures.py)."""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path

import numpy as np

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "parakeet_tdt"
MODELS = ("tiny_a", "tiny_b")
CLIPS = ("short", "medium", "long", "noisy", "quiet")


def model_dir(name: str) -> Path:
    return FIXTURES / "models" / name


def audio_path(clip: str) -> Path:
    return FIXTURES / "audio" / f"{clip}.wav"


@lru_cache(maxsize=4)
def expected(model: str) -> dict:
    return json.loads((FIXTURES / "expected" / f"{model}.json").read_text())


@lru_cache(maxsize=4)
def expected_arrays(name: str) -> dict[str, np.ndarray]:
    with np.load(FIXTURES / "expected" / f"{name}.npz") as data:
        return {k: data[k] for k in data.files}
