"""The whisper_ct2 family as the rest of Captioneer sees it (``inference/family.py``)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from inference.errors import ModelError
from inference.family import ModelFamily

NAME = "whisper_ct2"


def _is_ct2_whisper(folder: Path, config: Mapping[str, Any]) -> bool:
    """A CTranslate2 Whisper folder: model.bin beside a config.json with the converter's Whisper keys. A Hugging
    Face Transformers Whisper checkpoint is refused with the way to convert it."""
    if (folder / "model.bin").is_file() and "suppress_ids" in config and "suppress_ids_begin" in config:
        return True
    if config.get("model_type") == "whisper":
        raise ModelError(
            f"{folder} is a Hugging Face Transformers Whisper checkpoint, which Captioneer "
            "runs in the CTranslate2 layout",
            "convert it with ct2-transformers-converter (--copy_files tokenizer.json "
            "preprocessor_config.json), or use a Systran/faster-whisper-* model",
        )
    return False


FAMILY = ModelFamily(
    name=NAME,
    display_name="Whisper",
    engine_factory="inference.families.whisper_ct2.engine:create_engine",
    detect=_is_ct2_whisper,
)
