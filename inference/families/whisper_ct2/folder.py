"""A CTranslate2 Whisper model folder: which files it must hold and what its configs say.

The layout of ``ct2-transformers-converter`` (and the ``Systran/faster-whisper-*`` repositories): ``model.bin``,
``config.json`` (``lang_ids``, ``suppress_ids``, ``suppress_ids_begin``, ``alignment_heads``), ``tokenizer.json``,
``vocabulary.json`` or ``vocabulary.txt``, and ``preprocessor_config.json`` (mel bins; absent in older
conversions, which all have 80).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from inference.errors import ModelError
from inference.families.whisper_ct2.frontend import FeatureConfig

WEIGHTS_FILE = "model.bin"
CONFIG_FILE = "config.json"
TOKENIZER_FILE = "tokenizer.json"
PREPROCESSOR_FILE = "preprocessor_config.json"
VOCABULARY_FILES = ("vocabulary.json", "vocabulary.txt")
# Keys ct2-transformers-converter writes into a Whisper model's config.json
WHISPER_CONFIG_KEYS = ("suppress_ids", "suppress_ids_begin", "lang_ids", "alignment_heads")


def is_ct2_whisper_config(config: dict[str, Any]) -> bool:
    return "suppress_ids" in config and "suppress_ids_begin" in config


@dataclass(frozen=True)
class WhisperFolder:
    root: Path
    features: FeatureConfig
    lang_ids: tuple[int, ...]
    alignment_heads: tuple[tuple[int, int], ...]

    @property
    def tokenizer_path(self) -> Path:
        return self.root / TOKENIZER_FILE


def open_whisper_folder(path: Path) -> WhisperFolder:
    """Checks a CTranslate2 Whisper folder (or a file in it) and reads its configs; ModelError names what is missing."""
    root = Path(path)
    if root.is_file():
        root = root.parent
    if not root.is_dir():
        raise ModelError(f"model not found: {path}", "pass a CTranslate2 Whisper model folder")
    config = _read_json(root / CONFIG_FILE, required=True)
    if not is_ct2_whisper_config(config):
        if config.get("model_type") == "whisper":
            raise ModelError(
                f"{root} is a Hugging Face Transformers Whisper checkpoint, not a CTranslate2 one",
                "convert it with `ct2-transformers-converter --model <folder> --output_dir <new folder> "
                "--copy_files tokenizer.json preprocessor_config.json`, or use a Systran/faster-whisper-* model",
            )
        raise ModelError(
            f"{root / CONFIG_FILE} is not a CTranslate2 Whisper config (no suppress_ids)",
            "point --model at a CTranslate2 Whisper folder such as Systran/faster-whisper-small",
        )
    for name in (WEIGHTS_FILE, TOKENIZER_FILE):
        if not (root / name).is_file():
            raise ModelError(
                f"{root} has no {name}", "re-download the model (a CTranslate2 Whisper folder needs it)"
            )
    if not any((root / name).is_file() for name in VOCABULARY_FILES):
        raise ModelError(f"{root} has neither vocabulary.json nor vocabulary.txt", "re-download the model")
    preprocessor = _read_json(root / PREPROCESSOR_FILE, required=False)
    try:
        features = FeatureConfig(
            n_mels=int(preprocessor.get("feature_size", 80)),
            n_fft=int(preprocessor.get("n_fft", 400)),
            hop_length=int(preprocessor.get("hop_length", 160)),
            sampling_rate=int(preprocessor.get("sampling_rate", 16000)),
            chunk_length_s=int(preprocessor.get("chunk_length", 30)),
        )
        lang_ids = tuple(int(i) for i in config.get("lang_ids") or ())
        heads = tuple((int(layer), int(head)) for layer, head in config.get("alignment_heads") or ())
    except (TypeError, ValueError) as exc:
        raise ModelError(f"{root} has an invalid Whisper config: {exc}", "re-download the model") from exc
    if features.sampling_rate != 16000 or features.n_mels not in (80, 128):
        raise ModelError(
            f"{root / PREPROCESSOR_FILE} asks for {features.n_mels} mel bins at {features.sampling_rate} Hz; "
            "Whisper models use 80 or 128 bins at 16000 Hz",
            "re-download the model's preprocessor_config.json",
        )
    return WhisperFolder(root, features, lang_ids, heads)


def _read_json(path: Path, required: bool) -> dict[str, Any]:
    if not path.is_file():
        if required:
            raise ModelError(f"{path.parent} has no {path.name}", "point --model at a model folder")
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise ModelError(f"cannot read {path}: {exc}", "re-download the model") from exc
    if not isinstance(data, dict):
        raise ModelError(f"{path} is not a JSON object", "re-download the model")
    return data
