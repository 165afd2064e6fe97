"""The parakeet_tdt family as the rest of Captioneer sees it (``inference/family.py``)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from inference.families.parakeet_tdt.importers import NemoImporter, Phonon2Importer
from inference.family import InstallConversion, LiveDefaults, ModelFamily, WeightVariant
from inference.models.conversion import ConversionContext, ConversionResult
from inference.models.spec import PackageSpec

NAME = "parakeet_tdt"


def _is_parakeet(folder: Path, config: Mapping[str, Any]) -> bool:
    return config.get("model_type") == NAME


# The install steps import the Phonon-2 reader only when a package of the family installs.
def _build_phonon2(context: ConversionContext) -> ConversionResult | None:
    from inference.families.parakeet_tdt.install import build_phonon2

    return build_phonon2(context)


def _extra_space(package: PackageSpec) -> int:
    from inference.families.parakeet_tdt.install import extra_space

    return extra_space(package)


def _preflight(package: PackageSpec) -> None:
    from inference.families.parakeet_tdt.phonon_source import preflight

    preflight(package)


FAMILY = ModelFamily(
    name=NAME,
    display_name="Parakeet-TDT",
    engine_factory="inference.families.parakeet_tdt.engine:create_engine",
    detect=_is_parakeet,
    # Phonon-2 packages ship the packed container: converted to the dense layout at install time.
    install=InstallConversion(_build_phonon2, extra_space=_extra_space, preflight=_preflight),
    # A .nemo goes first: a folder is Phonon-2's only when it holds model.fermion.
    source_importers=(NemoImporter(), Phonon2Importer()),
    # int8 weights run on ONNX Runtime's CPU kernels only, so that choice also picks the CPU backend (a GPU
    # build would refuse them).
    live=LiveDefaults(
        weights_setting="parakeet_weights",
        weight_variants={
            "int8": WeightVariant("cpu", (("conv_weight_type", "int8"), ("weight_type", "int8"))),
        },
    ),
)
