"""The one engine interface every family implements, and the entry point that picks the family.

``load_engine(model_path, family=None, session_options=..., backend=...)`` inspects the checkpoint
(``config.json`` or GGUF metadata) to infer the family when none is given.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from inference.errors import ModelError, NotImplementedFamilyError, UsageError
from inference.transcript import StreamEvent, Transcript

KNOWN_FAMILIES = ("parakeet_tdt", "confucius4_r2t2")


class Stream(Protocol):
    def push(self, pcm_f32_mono_16k: np.ndarray) -> list[StreamEvent]: ...

    def finish(self) -> Transcript: ...


class Engine(Protocol):
    family: str

    def transcribe(self, audio: np.ndarray, **request_options: Any) -> Transcript: ...

    def open_stream(self, **request_options: Any) -> Stream: ...

    def close(self) -> None: ...


@dataclass(frozen=True)
class EngineRequest:
    model_path: Path
    family: str
    session_options: dict[str, Any] = field(default_factory=dict)
    backend: str = "auto"
    threads: int | None = None


EngineFactory = Callable[[EngineRequest], Engine]


def detect_family(model_path: Path) -> str:
    """Infer the family from a checkpoint directory or GGUF file."""
    if not model_path.exists():
        raise ModelError(f"model not found: {model_path}", "pass an existing model directory, GGUF file or package id")
    if model_path.is_file():
        if model_path.suffix == ".gguf":
            return _family_from_gguf(model_path)
        if model_path.suffix == ".nemo":
            raise ModelError(
                f"{model_path.name} is a NeMo archive, which Captioneer does not load",
                "use the Hugging Face layout (config.json + model.safetensors) of the same model",
            )
        raise ModelError(f"unsupported model file {model_path.name}", "pass a model directory or a .gguf file")
    ggufs = sorted(model_path.glob("*.gguf"))
    config_path = model_path / "config.json"
    if config_path.is_file():
        try:
            config = json.loads(config_path.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError) as exc:
            raise ModelError(f"cannot read {config_path}: {exc}", "re-download or re-import the model") from exc
        model_type = str(config.get("model_type", ""))
        if model_type in ("parakeet_tdt",):
            return "parakeet_tdt"
        if model_type in ("qwen3_asr", "confucius4_r2t2") or "thinker_config" in config:
            return "confucius4_r2t2"
        raise ModelError(
            f"{config_path} has model_type {model_type!r}, which no Captioneer family handles",
            f"use a checkpoint of one of: {', '.join(KNOWN_FAMILIES)}",
        )
    if ggufs:
        return _family_from_gguf(ggufs[0])
    raise ModelError(f"{model_path} holds neither config.json nor a .gguf file", "point --model at a model directory")


def _family_from_gguf(path: Path) -> str:
    from inference.native.gguf_file import GgufFile  # metadata only; never loads ggml

    with GgufFile(path) as gguf_file:  # ModelError naming the file on corrupt input
        family = gguf_file.fields.get("audiocpp.model_spec.family")
    if not isinstance(family, str):
        raise ModelError(
            f"{path.name} is not an audio.cpp GGUF package (no audiocpp.model_spec.family)",
            "use a Captioneer/audio.cpp package from the model catalog",
        )
    if family not in KNOWN_FAMILIES:
        raise ModelError(f"{path.name} is for family {family!r}, which Captioneer does not support")
    return family


def _factories() -> dict[str, EngineFactory]:
    """Family → engine factory. Imported lazily so a broken family never blocks the others."""
    factories: dict[str, EngineFactory] = {}
    try:
        from inference.families.parakeet_tdt.engine import create_engine as parakeet_factory
    except ImportError:
        pass
    else:
        factories["parakeet_tdt"] = parakeet_factory
    try:
        from inference.families.confucius4_r2t2.engine import create_engine as r2t2_factory
    except ImportError:
        pass
    else:
        factories["confucius4_r2t2"] = r2t2_factory
    return factories


def load_engine(
    model_path: Path,
    family: str | None = None,
    session_options: dict[str, Any] | None = None,
    backend: str = "auto",
    threads: int | None = None,
) -> Engine:
    if family is not None and family not in KNOWN_FAMILIES:
        raise UsageError(f"unknown family {family!r}", f"choose one of: {', '.join(KNOWN_FAMILIES)}")
    resolved = family or detect_family(model_path)
    factory = _factories().get(resolved)
    if factory is None:
        raise NotImplementedFamilyError(
            f"the {resolved} engine is not implemented in this build yet",
            "see the project's issue tracker; no transcript is produced rather than a fake one",
        )
    request = EngineRequest(Path(model_path), resolved, dict(session_options or {}), backend, threads)
    return factory(request)
