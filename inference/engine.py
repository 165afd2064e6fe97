"""Loading engines: the entry point that picks the family and imports its factory.

``load_engine(model_path, family=None, session_options=..., backend=...)`` inspects the checkpoint
(``config.json`` or GGUF metadata) to infer the family when none is given; the families are those of
``inference.registry``. The interface engines implement (``Engine``, ``Stream``) is in :mod:`inference.contract`;
what an engine factory receives (``EngineRequest``) is in :mod:`inference.family`.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

from inference.contract import Engine, JobControl
from inference.errors import BackendError
from inference.family import EngineFactory, EngineRequest
from inference.registry import FamilyRegistry

__all__ = ["EngineFactory", "EngineRequest", "import_factory", "load_engine"]


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
        raise BackendError(f"{target} is not an engine factory", "check the family's engine_factory")
    return factory  # type: ignore[no-any-return]


def load_engine(
    model_path: Path,
    family: str | None = None,
    session_options: dict[str, Any] | None = None,
    backend: str = "auto",
    threads: int | None = None,
    control: JobControl | None = None,
    families: FamilyRegistry | None = None,
) -> Engine:
    registry = families or FamilyRegistry.from_environment()
    resolved = registry.get(family).name if family is not None else registry.detect_family(model_path)
    factory = import_factory(registry.get(resolved).engine_factory, resolved)
    request = EngineRequest(
        Path(model_path),
        resolved,
        dict(session_options or {}),
        backend,
        threads,
        control or JobControl(stage="load"),
    )
    return factory(request)
