"""Shared by the peer exporters: the checkpoint's vocabulary and a reduced-depth variant for pipeline checks.

Stdlib + json only at import time; torch/transformers are imported inside the functions that need them, so the
bench's parent process (the app's python) can import this module too.
"""

from __future__ import annotations

import json
import logging
import warnings
from pathlib import Path

BLANK_PIECE = "<blk>"  # onnx-asr and sherpa-onnx find the blank by this name


def pieces(model: Path) -> list[str]:
    """Token pieces in id order, blank last, from the checkpoint's tokenizer.json (vocab_size entries)."""
    config = json.loads((model / "config.json").read_text())
    tok = json.loads((model / "tokenizer.json").read_text())
    by_id = {index: piece for piece, index in tok["model"]["vocab"].items()}
    for added in tok.get("added_tokens", []):
        by_id[added["id"]] = added["content"]
    vocab, blank = config["vocab_size"], config["blank_token_id"]
    out = [by_id.get(i, f"<unused{i}>") for i in range(vocab)]
    out[blank] = BLANK_PIECE
    # Both peers split each line on one space and map "▁" to a space: a piece must hold neither.
    bad = [p for p in out if " " in p or not p]
    if bad or len(set(out)) != len(out):
        raise SystemExit(f"vocabulary not usable by the peers (spaces, empty or repeated pieces): {bad[:5]}")
    return out


def write_vocab(model: Path, path: Path) -> None:
    """``piece id`` per line: onnx-asr's vocab.txt and sherpa-onnx's tokens.txt share this format."""
    path.write_text("".join(f"{piece} {i}\n" for i, piece in enumerate(pieces(model))), encoding="utf-8")


def create_reduced_model(out: Path, threads: int, layers: int) -> None:
    """bench_parakeet's checkpoint with ``layers`` encoder layers (same seed and construction otherwise).

    Only for checking the export/bench pipeline quickly; figures come from the full 24-layer checkpoint.
    """
    import transformers

    from tests.bench import bench_parakeet

    original = transformers.ParakeetEncoderConfig

    class Reduced(original):  # type: ignore[misc, valid-type]
        def __init__(self, **kwargs):  # noqa: ANN003
            kwargs["num_hidden_layers"] = layers
            super().__init__(**kwargs)

    transformers.ParakeetEncoderConfig = Reduced
    try:
        bench_parakeet.create_model(out, threads)
    finally:
        transformers.ParakeetEncoderConfig = original


def quiet() -> None:
    """The legacy exporter is chosen on purpose; quantize_dynamic logs a warning per shape tensor it skips."""
    warnings.filterwarnings("ignore", category=DeprecationWarning)
    warnings.filterwarnings("ignore", message=".*LSTM.*")
    logging.getLogger().setLevel(logging.ERROR)
