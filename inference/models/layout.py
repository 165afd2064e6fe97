"""Which file is the model: the one rule for turning a model path into its weight files.

Every loader (both families, the thinker converter, family detection, the store's import) asks
:func:`locate_model`, so a folder can never mean one file to one of them and another file to the next.

The rule, for a path that exists:

* a ``.gguf`` file is an audio.cpp package (self-contained: config and tokenizer are embedded);
* ``config.json``, a ``*.safetensors`` file, a ``model.safetensors.index.json`` or a CTranslate2 ``model.bin``
  stands for its folder;
* a folder holding exactly one ``.gguf`` is that package, whatever else lies beside it (a package copied into
  a checkpoint folder is the model the user meant); several ``.gguf`` files are ambiguous and refused;
* otherwise the folder is a Hugging Face checkpoint: the shards listed by ``model.safetensors.index.json``
  when there is one, else every ``*.safetensors`` in name order (usually just ``model.safetensors``);
* a NeMo archive (``.nemo``, a tar) is refused with the way out.

Caches the engines write (``.captioneer/``) are sub-folders and never match.
"""

from __future__ import annotations

import json
import tarfile
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from inference.errors import ModelError

CONFIG_FILE = "config.json"
SHARD_INDEX = "model.safetensors.index.json"
CT2_WEIGHTS = "model.bin"  # CTranslate2 models (whisper_ct2), which the family reads itself
GGUF_SUFFIX = ".gguf"
SAFETENSORS_SUFFIX = ".safetensors"


@dataclass(frozen=True)
class ModelLocation:
    root: Path  # the folder the model lives in (a package's folder for a .gguf)
    kind: Literal["gguf", "safetensors"]
    # The package (one path) or the safetensors shards in load order; empty when a folder has no weights yet,
    # so a family can first name the config or tokenizer it misses.
    weights: tuple[Path, ...]

    @property
    def package(self) -> Path | None:
        """The audio.cpp GGUF package, or None for a safetensors checkpoint."""
        return self.weights[0] if self.kind == "gguf" else None

    @property
    def config(self) -> Path:
        return self.root / CONFIG_FILE

    def require_weights(self) -> tuple[Path, ...]:
        if not self.weights:
            raise ModelError(
                f"{self.root} has no model.safetensors or .gguf weights",
                "download the model weights, or pass the folder or .gguf file that holds them",
            )
        return self.weights


def locate_model(path: str | Path) -> ModelLocation:
    """Where the weights of the model at ``path`` (a folder or a file in it) are; ModelError when nothing fits."""
    path = Path(path)
    if not path.exists():
        raise ModelError(
            f"model not found: {path}", "pass an existing model folder, .gguf file or package id"
        )
    if path.is_file():
        if path.suffix == GGUF_SUFFIX:
            return ModelLocation(path.parent, "gguf", (path,))
        if path.name in (CONFIG_FILE, SHARD_INDEX, CT2_WEIGHTS) or path.suffix == SAFETENSORS_SUFFIX:
            return _folder(path.parent)
        if path.suffix == ".nemo" or _is_tar(path):
            raise nemo_error(path)
        raise ModelError(f"unsupported model file {path.name}", "pass a model folder or a .gguf file")
    return _folder(path)


def _folder(folder: Path) -> ModelLocation:
    packages = sorted(p for p in folder.glob(f"*{GGUF_SUFFIX}") if p.is_file())
    if len(packages) == 1:
        return ModelLocation(folder, "gguf", (packages[0],))
    if packages:
        names = ", ".join(p.name for p in packages)
        raise ModelError(
            f"{folder} holds {len(packages)} .gguf packages ({names})", "pass the .gguf file to load"
        )
    index = folder / SHARD_INDEX
    if index.is_file():
        return ModelLocation(folder, "safetensors", _shards(index))
    weights = tuple(sorted(p for p in folder.glob(f"*{SAFETENSORS_SUFFIX}") if p.is_file()))
    nemo = sorted(folder.glob("*.nemo"))
    if nemo and not weights and not (folder / CONFIG_FILE).is_file():
        raise nemo_error(nemo[0])
    return ModelLocation(folder, "safetensors", weights)


def _shards(index: Path) -> tuple[Path, ...]:
    """The shard files ``model.safetensors.index.json`` lists, in name order, each checked to exist."""
    try:
        weight_map = json.loads(index.read_text(encoding="utf-8"))["weight_map"]
        names = sorted({str(name) for name in weight_map.values()})
    except (OSError, ValueError, KeyError, TypeError, AttributeError, RecursionError) as exc:
        raise ModelError(f"{index} is not a readable shard index ({exc})", "re-download the model") from exc
    shards = []
    for name in names:
        shard = index.parent / name
        if Path(name).name != name or not shard.is_file():
            raise ModelError(
                f"{index} lists the shard {name!r}, which is not in {index.parent}",
                "re-download the model (a shard is missing)",
            )
        shards.append(shard)
    if not shards:
        raise ModelError(f"{index} lists no shards", "re-download the model")
    return tuple(shards)


def _is_tar(path: Path) -> bool:
    try:
        return tarfile.is_tarfile(path) and not zipfile.is_zipfile(path)
    except OSError:
        return False


def nemo_error(path: Path) -> ModelError:
    return ModelError(
        f"{path} is a NeMo archive, which Captioneer cannot load directly",
        "use the Hugging Face layout (config.json + model.safetensors + tokenizer.json, e.g. "
        "nvidia/parakeet-tdt-0.6b-v3) or an audio.cpp GGUF package",
    )
