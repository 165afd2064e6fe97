"""The install-time conversions this build ships, one per family that needs one (see ``conversion.py``)."""

from __future__ import annotations

from inference.families.parakeet_tdt import install as parakeet_install
from inference.families.parakeet_tdt import phonon_source
from inference.models.conversion import ConversionContext, ConversionRegistry, ConversionResult
from inference.models.spec import PackageSpec


# The confucius4_r2t2 module is imported when its hook runs: it loads gguf and the native layer.
def _confucius4_r2t2_thinker(context: ConversionContext) -> ConversionResult | None:
    from inference.families.confucius4_r2t2.install import build_thinker

    return build_thinker(context)


def _confucius4_r2t2_space(package: PackageSpec) -> int:
    from inference.families.confucius4_r2t2.install import extra_space

    return extra_space(package)


def default_conversions() -> ConversionRegistry:
    """The converters this build ships: the confucius4_r2t2 thinker GGUF (llama.cpp) and the Phonon-2
    container → dense parakeet_tdt checkpoint (``phonon2-archive`` packages), both at install time."""
    registry = ConversionRegistry()
    registry.register("confucius4_r2t2", _confucius4_r2t2_thinker, extra_space=_confucius4_r2t2_space)
    registry.register(
        "parakeet_tdt",
        parakeet_install.build_phonon2,
        extra_space=parakeet_install.extra_space,
        preflight=phonon_source.preflight,
    )
    return registry
