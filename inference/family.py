"""What a model family tells the rest of Captioneer about itself: one :class:`ModelFamily` per family folder.

Each ``inference/families/<name>/family.py`` exports ``FAMILY``, a :class:`ModelFamily`; ``inference.registry``
lists them. Everything outside a family folder (the store, the engine loader, the worker, the CLI, the server and
the app) asks the registry instead of naming a family. The descriptor itself is light: the engine, the
conversions and the importers are imported when they run, so a broken or heavy family never blocks the others.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from inference.contract import Engine, JobControl
from inference.models.conversion import Converter, Preflight, SpaceEstimate
from inference.models.source_import import SourceImporter

# Session options as (name, value) pairs: hashable, so a model choice holding them can be compared.
OptionPairs = tuple[tuple[str, object], ...]


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

# Whether a model folder's parsed ``config.json`` is one of the family's checkpoints. It may raise a
# ``ModelError`` naming the way out for a near miss (a layout the family knows but cannot load).
Detector = Callable[[Path, Mapping[str, Any]], bool]


@dataclass(frozen=True)
class InstallConversion:
    """The install-time step of the family's packages (``inference/models/conversion.py``)."""

    converter: Converter
    extra_space: SpaceEstimate | None = None
    preflight: Preflight | None = None


@dataclass(frozen=True)
class WeightVariant:
    """A choice of weights the app offers for the family: the backend it needs (None: the user's) and the
    session options that select it."""

    backend: str | None
    session_options: OptionPairs


@dataclass(frozen=True)
class LiveDefaults:
    """What the app and the CLI use when they caption live with this family."""

    # Session options for captioning in the window.
    session_options: OptionPairs = ()
    # The app setting that picks one of ``weight_variants`` (any other value: the family's defaults).
    weights_setting: str | None = None
    weight_variants: Mapping[str, WeightVariant] = field(default_factory=dict)


@dataclass(frozen=True)
class ModelFamily:
    """One model family, as the rest of Captioneer sees it."""

    # The family's id: ``family`` in its spec and in installed packages, ``audiocpp.model_spec.family`` in GGUF.
    name: str
    # How people call it in messages and menus ("Whisper", "Parakeet-TDT").
    display_name: str
    # ``"module:function"`` of ``create_engine(EngineRequest) -> Engine``, imported when a model loads.
    engine_factory: str
    detect: Detector
    # Its options and packages; None: ``model_specs/<name>.json`` (the catalog's folder).
    spec_file: Path | None = None
    install: InstallConversion | None = None
    # Local files converted into packages by ``captioneer models import`` (checked in this order).
    source_importers: tuple[SourceImporter, ...] = ()
    live: LiveDefaults = field(default_factory=LiveDefaults)
