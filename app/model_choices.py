"""Which models the window can caption with (Qt-free): the installed models as choices with their load options,
and the line that says which model is active."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from inference.errors import CaptioneerError
from inference.family import LiveDefaults
from inference.models.catalog import Catalog
from inference.paths import AppPaths
from inference.registry import FamilyRegistry


@dataclass(frozen=True)
class ModelChoice:
    """What to load: a label for people, the path, and the family options the user picked."""

    label: str
    path: Path
    family: str | None = None
    session_options: tuple[tuple[str, object], ...] = ()
    request_options: tuple[tuple[str, object], ...] = ()
    backend: str = "auto"
    threads: int | None = None
    stream_mode: str = "auto"  # auto | native | segmented (see RemoteEngine.open_stream)

    @property
    def load_key(self) -> tuple[object, ...]:
        """What makes a loaded engine: request options and stream mode do not (one load serves them all)."""
        return (self.path, self.family, self.session_options, self.backend, self.threads)


@dataclass(frozen=True)
class AppState:
    paths: AppPaths
    model_summary: str

    @classmethod
    def load(cls, paths: AppPaths) -> AppState:
        try:
            catalog = FamilyRegistry.from_environment().catalog(paths)
            model_path, package = catalog.resolve_model(None)
            name = package.name if package else str(model_path)
            summary = f"Model: {name}"
            if package is not None and package.format == "bundled":
                summary += " — install a real model from File → Models…"
        except CaptioneerError as exc:
            summary = f"No model available: {exc}"
        return cls(paths=paths, model_summary=summary)


def installed_models(paths: AppPaths, settings: object | None = None) -> list[ModelChoice]:
    """Every installed package (and the bundled demo model), as choices for the model picker."""
    families = FamilyRegistry.from_environment()
    catalog: Catalog = families.catalog(paths)
    choices = []
    for entry in catalog.entries():
        if not entry.installed:
            continue
        path = catalog.installed_path(entry.package)
        if path is None:
            continue
        # The bundled demo model was trained on single sentences and drops words in long windows, so its captions
        # come segment by segment (figures: tests/bench/README.md, "Figures behind code comments").
        mode = "segmented" if entry.package.format == "bundled" else "auto"
        family = entry.package.family
        backend, options = weight_choice(family, getattr(settings, "backend", "auto"), settings, families)
        options += live_options(family, families)
        choices.append(
            ModelChoice(
                entry.package.name,
                path,
                family,
                options,
                backend=backend,
                threads=getattr(settings, "threads", None),
                stream_mode=mode,
            )
        )
    if not choices:  # the catalog's fallback: the bundled demo model
        path, package = catalog.resolve_model(None)
        family = families.detect_family(path)
        backend, options = weight_choice(family, "auto", settings, families)
        choices.append(
            ModelChoice(
                package.name if package else path.name,
                path,
                family,
                options,
                backend=backend,
                stream_mode="segmented",
            )
        )
    return choices


def live_options(
    family: str | None, families: FamilyRegistry | None = None
) -> tuple[tuple[str, object], ...]:
    """Session options for captioning in the window, as the family's descriptor gives them."""
    return _live_defaults(family, families).session_options


def weight_choice(
    family: str | None, backend: str, settings: object | None, families: FamilyRegistry | None = None
) -> tuple[str, tuple[tuple[str, object], ...]]:
    """(backend, session options) for a family under the user's weights setting (the family's descriptor names
    the setting and what each value needs; a variant that needs a backend overrides the user's)."""
    live = _live_defaults(family, families)
    if live.weights_setting is None:
        return backend, ()
    variant = live.weight_variants.get(str(getattr(settings, live.weights_setting, "")))
    if variant is None:
        return backend, ()
    return variant.backend or backend, variant.session_options


def _live_defaults(family: str | None, families: FamilyRegistry | None) -> LiveDefaults:
    registry = families or FamilyRegistry.from_environment()
    return registry.get(family).live if family in registry.names() else LiveDefaults()
