"""Which family a model folder or file belongs to, read from its ``config.json`` or GGUF metadata."""

from __future__ import annotations

import json
from pathlib import Path

from inference.errors import ModelError
from inference.models.layout import locate_model

KNOWN_FAMILIES = ("parakeet_tdt", "confucius4_r2t2")


def detect_family(model_path: Path) -> str:
    """Infer the family from a checkpoint directory or GGUF file (``locate_model`` decides which file)."""
    location = locate_model(model_path)
    if location.package is not None:
        return _family_from_gguf(location.package)
    config_path = location.config
    if config_path.is_file():
        try:
            config = json.loads(config_path.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError) as exc:
            raise ModelError(
                f"cannot read {config_path}: {exc}", "re-download or re-import the model"
            ) from exc
        model_type = str(config.get("model_type", ""))
        if model_type in ("parakeet_tdt",):
            return "parakeet_tdt"
        if model_type in ("qwen3_asr", "confucius4_r2t2") or "thinker_config" in config:
            return "confucius4_r2t2"
        raise ModelError(
            f"{config_path} has model_type {model_type!r}, which no Captioneer family handles",
            f"use a checkpoint of one of: {', '.join(KNOWN_FAMILIES)}",
        )
    raise ModelError(
        f"{model_path} holds neither config.json nor a .gguf file", "point --model at a model directory"
    )


def _family_from_gguf(path: Path) -> str:
    from inference.native.gguf_file import GgufFile  # metadata only; never loads ggml

    with GgufFile(path) as gguf_file:  # ModelError naming the file on corrupt input
        family = gguf_file.fields.get("audiocpp.model_spec.family")
    if not isinstance(family, str):
        raise ModelError(
            f"{path.name} is not an audio.cpp GGUF package (no audiocpp.model_spec.family)",
            "use a Captioneer/audio.cpp package from the model catalog",
        )
    if family not in KNOWN_FAMILIES:
        raise ModelError(f"{path.name} is for family {family!r}, which Captioneer does not support")
    return family
