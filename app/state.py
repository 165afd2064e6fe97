"""Qt-free application state: which model is active and how to describe it to the user."""

from __future__ import annotations

from dataclasses import dataclass

from inference.errors import CaptioneerError
from inference.models.catalog import Catalog
from inference.paths import AppPaths


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
