"""Which family a model folder or file belongs to, read from its ``config.json`` or GGUF metadata."""

from __future__ import annotations

import json
from pathlib import Path

from inference.errors import ModelError
from inference.models.layout import locate_model

KNOWN_FAMILIES = ("parakeet_tdt", "confucius4_r2t2", "whisper_ct2")


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
        if _is_ct2_whisper(config_path.parent, config):
            return "whisper_ct2"
        if model_type == "whisper":
            raise ModelError(
                f"{config_path.parent} is a Hugging Face Transformers Whisper checkpoint, which Captioneer "
                "runs in the CTranslate2 layout",
                "convert it with ct2-transformers-converter (--copy_files tokenizer.json "
                "preprocessor_config.json), or use a Systran/faster-whisper-* model",
            )
        raise ModelError(
            f"{config_path} has model_type {model_type!r}, which no Captioneer family handles",
            f"use a checkpoint of one of: {', '.join(KNOWN_FAMILIES)}",
        )
    raise ModelError(
        f"{model_path} holds neither config.json nor a .gguf file", "point --model at a model directory"
    )


def _is_ct2_whisper(folder: Path, config: dict) -> bool:
    """A CTranslate2 Whisper folder: model.bin beside a config.json with the converter's Whisper keys."""
    return (folder / "model.bin").is_file() and "suppress_ids" in config and "suppress_ids_begin" in config


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
