"""The Phonon-style tiny fixture: ``tiny_a`` with the runtime config the Phonon-2 converter writes.

The converter's weight transforms (docs/families/parakeet_tdt.md §7.2 (a), (b)) change numbers, not structure, and are applied
before a package is written; what selects the variant at run time is config (c):
``audiocpp_word_timestamp_mode=token_duration`` and ``audiocpp_punctuation_token_ids``, the sorted ids of
the vocabulary pieces without an alphanumeric character (``str.isalnum``). Built on demand in a temporary
directory so the repository carries no second copy of the weights.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from parakeet_fixtures import model_dir

BASE = "tiny_a"


def punctuation_ids(tokenizer_json: dict, vocabulary_size: int) -> list[int]:
    """Ids below ``vocabulary_size`` (blank excluded) whose piece has no alphanumeric character."""
    pieces: dict[int, str] = {i: p for p, i in tokenizer_json["model"]["vocab"].items()}
    for added in tokenizer_json.get("added_tokens", []):
        pieces[added["id"]] = added["content"]
    return sorted(i for i, p in pieces.items() if i < vocabulary_size and not any(c.isalnum() for c in p))


def make_phonon_variant(dst: Path) -> Path:
    src = model_dir(BASE)
    dst.mkdir(parents=True, exist_ok=True)
    for path in src.iterdir():
        shutil.copyfile(path, dst / path.name)
    config = json.loads((src / "config.json").read_text())
    tokenizer = json.loads((src / "tokenizer.json").read_text())
    config["audiocpp_word_timestamp_mode"] = "token_duration"
    config["audiocpp_punctuation_token_ids"] = punctuation_ids(tokenizer, config["blank_token_id"])
    (dst / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    return dst
