"""Loading engines: the family registry and the entry point that picks the family.

``load_engine(model_path, family=None, session_options=..., backend=...)`` inspects the checkpoint
(``config.json`` or GGUF metadata) to infer the family when none is given. The interface engines
implement (``Engine``, ``Stream``) is in :mod:`inference.contract`.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from inference.contract import Engine, JobControl
from inference.errors import BackendError, UsageError
from inference.models.identify import KNOWN_FAMILIES, detect_family

# Family -> "module:function" of its engine factory, imported only when that family is loaded, so a
# broken or heavy family never blocks the others.
FAMILY_FACTORIES: dict[str, str] = {
    family: f"inference.families.{family}.engine:create_engine" for family in KNOWN_FAMILIES
}


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
    request = EngineRequest(
        Path(model_path),
        resolved,
        dict(session_options or {}),
        backend,
        threads,
        control or JobControl(stage="load"),
    )
    return factory(request)
