"""Where Captioneer keeps its files.

``CAPTIONEER_HOME`` (if set) puts everything under one directory — the tests use it; otherwise the
platform's conventional locations come from platformdirs.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from pathlib import Path

import platformdirs

APP_NAME = "Captioneer"
REPO_ROOT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class AppPaths:
    config: Path
    data: Path
    cache: Path
    models: Path
    logs: Path

    @classmethod
    def from_environment(cls, env: dict[str, str] | None = None) -> AppPaths:
        env = dict(os.environ) if env is None else env
        home = env.get("CAPTIONEER_HOME")
        if home:
            root = Path(home).expanduser()
            paths = cls(root / "config", root / "data", root / "cache", root / "models", root / "logs")
        else:
            data = Path(platformdirs.user_data_dir(APP_NAME, appauthor=False))
            paths = cls(
                config=Path(platformdirs.user_config_dir(APP_NAME, appauthor=False)),
                data=data,
                cache=Path(platformdirs.user_cache_dir(APP_NAME, appauthor=False)),
                models=data / "models",
                logs=Path(platformdirs.user_log_dir(APP_NAME, appauthor=False)),
            )
        models_override = env.get("CAPTIONEER_MODELS_DIR")
        if models_override:
            paths = AppPaths(
                paths.config, paths.data, paths.cache, Path(models_override).expanduser(), paths.logs
            )
        return paths

    def ensure(self) -> AppPaths:
        for path in (self.config, self.data, self.cache, self.models, self.logs):
            path.mkdir(parents=True, exist_ok=True)
        return self


def data_root() -> Path:
    """Where ``model_specs/`` and ``resources/`` are: the checkout (editable installs, tests) or, for an
    installed wheel, ``<prefix>/share/captioneer`` (pyproject's data-files)."""
    if (REPO_ROOT / "model_specs").is_dir():
        return REPO_ROOT
    installed = Path(sys.prefix) / "share" / "captioneer"
    return installed if installed.is_dir() else REPO_ROOT


def model_specs_dir() -> Path:
    """The directory holding ``<family>.json`` catalog files (checkout, installed copy, or override)."""
    override = os.environ.get("CAPTIONEER_MODEL_SPECS")
    return Path(override) if override else data_root() / "model_specs"


def resources_dir() -> Path:
    return data_root() / "resources"
