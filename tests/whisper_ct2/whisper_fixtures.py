"""The tiny Whisper fixture (tests/reference/whisper_ct2/make_fixtures.py) and its clips."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np
import soundfile

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "tests" / "fixtures" / "whisper_ct2"
MODEL80 = FIXTURES / "model80"
MODELS = {"model80": MODEL80, "model128": FIXTURES / "model128"}
CLIP_FILES = {
    "sample1": REPO / "resources" / "samples" / "demo_sample_1.wav",
    "sample2": REPO / "resources" / "samples" / "demo_sample_2.wav",
    "short": REPO / "tests" / "fixtures" / "parakeet_tdt" / "audio" / "short.wav",
    "long": REPO / "tests" / "fixtures" / "parakeet_tdt" / "audio" / "long.wav",
}


@cache
def expected() -> dict[str, Any]:
    return json.loads((FIXTURES / "expected.json").read_text(encoding="utf-8"))  # type: ignore[no-any-return]


def cases(model: str) -> list[dict[str, Any]]:
    return expected()["models"][model]["cases"]  # type: ignore[no-any-return]


def clip(name: str) -> np.ndarray:
    """A clip as the generator read it (float32 samples of the 16-bit file); long40 is long.wav tiled to 40 s."""
    if name == "long40":
        long = clip("long")
        n = int(expected()["long40"]["seconds"] * 16000)
        return np.tile(long, -(-n // long.size))[:n]
    samples, rate = soundfile.read(str(CLIP_FILES[name]), dtype="float32")
    assert rate == 16000 and samples.ndim == 1
    return samples  # type: ignore[no-any-return]


def request_options(case: dict[str, Any]) -> dict[str, Any]:
    options: dict[str, Any] = {"task": case["task"], "max_new_tokens": expected()["max_new_tokens"]}
    if case["language"]:
        options["language"] = case["language"]
    if case["initial_prompt"]:
        options["initial_prompt"] = case["initial_prompt"]
    return options
