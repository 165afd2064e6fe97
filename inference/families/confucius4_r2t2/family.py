"""The confucius4_r2t2 family as the rest of Captioneer sees it (``inference/family.py``)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from inference.family import InstallConversion, LiveDefaults, ModelFamily
from inference.models.conversion import ConversionContext, ConversionResult
from inference.models.spec import PackageSpec

NAME = "confucius4_r2t2"


def _is_r2t2(folder: Path, config: Mapping[str, Any]) -> bool:
    return config.get("model_type") in ("qwen3_asr", NAME) or "thinker_config" in config


# The install module is imported when its hook runs: it loads gguf and the native layer.
def _build_thinker(context: ConversionContext) -> ConversionResult | None:
    from inference.families.confucius4_r2t2.install import build_thinker

    return build_thinker(context)


def _extra_space(package: PackageSpec) -> int:
    from inference.families.confucius4_r2t2.install import extra_space

    return extra_space(package)


FAMILY = ModelFamily(
    name=NAME,
    display_name="Confucius4-R2T2",
    engine_factory="inference.families.confucius4_r2t2.engine:create_engine",
    detect=_is_r2t2,
    # The thinker GGUF for llama.cpp is built at install time.
    install=InstallConversion(_build_thinker, extra_space=_extra_space),
    # Live captions in the window are VAD-endpointed: a paragraph and subtitle cues per utterance (one
    # undivided segment otherwise), and each utterance decoded fresh.
    live=LiveDefaults(session_options=(("endpointing", True),)),
)
