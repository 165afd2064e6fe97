"""Which models the window can caption with (Qt-free): the installed models as choices with their load options,
and the line that says which model is active."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from inference.errors import CaptioneerError
from inference.models.catalog import Catalog
from inference.models.identify import detect_family
from inference.paths import AppPaths


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
            catalog = Catalog(paths)
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
    catalog = Catalog(paths)
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
        backend, options = weight_choice(family, getattr(settings, "backend", "auto"), settings)
        options += live_options(family)
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
        family = detect_family(path)
        backend, options = weight_choice(family, "auto", settings)
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


def live_options(family: str | None) -> tuple[tuple[str, object], ...]:
    """Session options for captioning in the window. Confucius4-R2T2 streams are VAD-endpointed: a paragraph and
    subtitle cues per utterance (one undivided segment otherwise), and each utterance decoded fresh."""
    return (("endpointing", True),) if family == "confucius4_r2t2" else ()


def weight_choice(
    family: str | None, backend: str, settings: object | None
) -> tuple[str, tuple[tuple[str, object], ...]]:
    """(backend, session options) for a family under the user's weights setting: Parakeet-TDT's int8 weights run
    on ONNX Runtime's CPU kernels only, so that choice also picks the CPU backend (a GPU build would refuse them)."""
    if family == "parakeet_tdt" and getattr(settings, "parakeet_weights", "native") == "int8":
        return "cpu", (("conv_weight_type", "int8"), ("weight_type", "int8"))
    return backend, ()
