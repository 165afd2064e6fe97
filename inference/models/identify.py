"""Which family a model folder or file belongs to, read from its ``config.json`` or GGUF metadata.

The families are passed in (``inference.registry`` gives them): each one's ``detect`` looks at a folder's
parsed ``config.json``; a GGUF package names its family in ``audiocpp.model_spec.family``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

from inference.errors import ModelError
from inference.models.layout import locate_model


class KnownFamily(Protocol):
    @property
    def name(self) -> str: ...

    @property
    def detect(self) -> Callable[[Path, Mapping[str, Any]], bool]: ...


def detect_family(model_path: Path, families: Sequence[KnownFamily]) -> str:
    """Infer the family from a checkpoint directory or GGUF file (``locate_model`` decides which file)."""
    names = [family.name for family in families]
    location = locate_model(model_path)
    if location.package is not None:
        return _family_from_gguf(location.package, names)
    config_path = location.config
    if config_path.is_file():
        try:
            config = json.loads(config_path.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError) as exc:
            raise ModelError(
                f"cannot read {config_path}: {exc}", "re-download or re-import the model"
            ) from exc
        for family in families:  # in order: a family may refuse a near miss with the way out
            if family.detect(config_path.parent, config):
                return family.name
        model_type = str(config.get("model_type", ""))
        raise ModelError(
            f"{config_path} has model_type {model_type!r}, which no Captioneer family handles",
            f"use a checkpoint of one of: {', '.join(names)}",
        )
    raise ModelError(
        f"{model_path} holds neither config.json nor a .gguf file", "point --model at a model directory"
    )


def _family_from_gguf(path: Path, names: Sequence[str]) -> str:
    from inference.native.gguf_file import GgufFile  # metadata only; never loads ggml

    with GgufFile(path) as gguf_file:  # ModelError naming the file on corrupt input
        family = gguf_file.fields.get("audiocpp.model_spec.family")
    if not isinstance(family, str):
        raise ModelError(
            f"{path.name} is not an audio.cpp GGUF package (no audiocpp.model_spec.family)",
            "use a Captioneer/audio.cpp package from the model catalog",
        )
    if family not in names:
        raise ModelError(f"{path.name} is for family {family!r}, which Captioneer does not support")
    return family
