"""Loading engines: the family registry and the entry point that picks the family.

``load_engine(model_path, family=None, session_options=..., backend=...)`` inspects the checkpoint
(``config.json`` or GGUF metadata) to infer the family when none is given. The interface engines
implement (``Engine``, ``Stream``) is in :mod:`inference.contract`.
"""

from __future__ import annotations

import importlib
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from inference.contract import Engine, JobControl
from inference.errors import BackendError, ModelError, UsageError

# Family -> "module:function" of its engine factory, imported only when that family is loaded, so a
# broken or heavy family never blocks the others.
FAMILY_FACTORIES: dict[str, str] = {
    "parakeet_tdt": "inference.families.parakeet_tdt.engine:create_engine",
    "confucius4_r2t2": "inference.families.confucius4_r2t2.engine:create_engine",
}
KNOWN_FAMILIES = tuple(FAMILY_FACTORIES)


@dataclass(frozen=True)
class EngineRequest:
    model_path: Path
    family: str
    session_options: dict[str, Any] = field(default_factory=dict)
    backend: str = "auto"
    threads: int | None = None
    # Long loads (a first R2T2 load converts gigabytes) report progress and stop when cancelled.
    control: JobControl = field(default_factory=lambda: JobControl(stage="load"), compare=False)


EngineFactory = Callable[[EngineRequest], Engine]


def detect_family(model_path: Path) -> str:
    """Infer the family from a checkpoint directory or GGUF file (``locate_model`` decides which file)."""
    from inference.models.layout import locate_model

    location = locate_model(model_path)
    if location.package is not None:
        return _family_from_gguf(location.package)
    config_path = location.config
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


def import_factory(target: str, family: str) -> EngineFactory:
    """The factory named by ``"module:function"``; a missing dependency is named as such."""
    module_name, _, function = target.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        missing = exc.name or str(exc)
        raise BackendError(
            f"the {family} engine cannot be loaded: the Python module {missing!r} is missing",
            "reinstall Captioneer with its dependencies (`pip install -e .`)",
        ) from exc
    except ImportError as exc:
        raise BackendError(
            f"the {family} engine cannot be loaded: {exc}", "reinstall Captioneer with its dependencies"
        ) from exc
    factory = getattr(module, function, None)
    if not callable(factory):
        raise BackendError(f"{target} is not an engine factory", "check the engine registry")
    return factory  # type: ignore[no-any-return]


def load_engine(
    model_path: Path,
    family: str | None = None,
    session_options: dict[str, Any] | None = None,
    backend: str = "auto",
    threads: int | None = None,
    control: JobControl | None = None,
) -> Engine:
    if family is not None and family not in KNOWN_FAMILIES:
        raise UsageError(f"unknown family {family!r}", f"choose one of: {', '.join(KNOWN_FAMILIES)}")
    resolved = family or detect_family(model_path)
    factory = import_factory(FAMILY_FACTORIES[resolved], resolved)
    request = EngineRequest(Path(model_path), resolved, dict(session_options or {}), backend, threads,
                            control or JobControl(stage="load"))  # fmt: skip
    return factory(request)
