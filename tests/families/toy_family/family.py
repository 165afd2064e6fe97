"""The toy_tones family's descriptor (``inference/family.py``)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from inference.family import InstallConversion, LiveDefaults, ModelFamily
from inference.models.conversion import ConversionContext, ConversionResult

NAME = "toy_tones"
HERE = Path(__file__).resolve().parent


def _is_toy(folder: Path, config: Mapping[str, Any]) -> bool:
    return config.get("model_type") == NAME


def _build_codebook(context: ConversionContext) -> ConversionResult | None:
    from .codebook import build_codebook  # imported when a package installs, like a real family's converter

    return build_codebook(context)


FAMILY = ModelFamily(
    name=NAME,
    display_name="Toy tones",
    engine_factory=f"{__package__}.engine:create_engine",
    detect=_is_toy,
    spec_file=HERE / "toy_tones.json",
    install=InstallConversion(_build_codebook),
    live=LiveDefaults(session_options=(("min_level", 0.02),)),
)
