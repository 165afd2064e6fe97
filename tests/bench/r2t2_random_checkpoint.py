"""Full-size Qwen3-ASR / Confucius4-R2T2 checkpoints with random bf16 weights, written with numpy alone.

The shapes are ``bench_r2t2_stream.SHAPES`` (0.6B and 1.7B); the tokenizer, special ids and prompt files are the
tiny fixture's, so the vocabulary past its few hundred tokens is padding the tokenizer never produces. Tensors
are generated and written one at a time (a 1.7B checkpoint is 4.6 GB; it never sits in memory whole). No torch:
``bench_r2t2_stream.py`` builds the same shapes through transformers when the reference venv is at hand.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from inference.families.confucius4_r2t2.checkpoint import expected_tensor_shapes  # noqa: E402
from inference.families.confucius4_r2t2.config import parse_model_config  # noqa: E402

FIXTURE = REPO / "tests" / "fixtures" / "confucius4_r2t2" / "checkpoint_hf"
SIDECARS = ("tokenizer.json", "tokenizer_config.json", "processor_config.json", "chat_template.jinja")
BLOCK = 1 << 22  # values generated per slice


def model_config(shape: dict) -> dict:
    config = json.loads((FIXTURE / "config.json").read_text(encoding="utf-8"))
    config["audio_config"].update(shape["audio"])
    config["text_config"].update(shape["text"])
    config["text_config"]["layer_types"] = ["full_attention"] * shape["text"]["num_hidden_layers"]
    config["dtype"] = "bfloat16"
    return config


def _bf16(values: np.ndarray) -> bytes:
    bits = np.ascontiguousarray(values, dtype=np.float32).view(np.uint32)
    return ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype("<u2").tobytes()


def _write_tensor(handle, name: str, shape: tuple[int, ...], rng: np.random.Generator) -> None:
    count = int(np.prod(shape))
    if name.endswith("norm.weight") or name.endswith("ln_post.weight") or "layer_norm.weight" in name:
        handle.write(_bf16(np.ones(count, np.float32)))
        return
    if name.endswith(".bias"):
        handle.write(_bf16(np.zeros(count, np.float32)))
        return
    for start in range(0, count, BLOCK):
        handle.write(_bf16(0.02 * rng.standard_normal(min(BLOCK, count - start), dtype=np.float32)))


def build(directory: Path, shape: dict, seed: int = 0) -> Path:
    """``directory`` with config, tokenizer files and model.safetensors (kept when already complete)."""
    if (directory / "config.json").is_file():
        return directory
    directory.mkdir(parents=True, exist_ok=True)
    config = model_config(shape)
    shapes = expected_tensor_shapes(parse_model_config(config, str(directory / "config.json")))
    header, offset = {}, 0
    for name, dims in shapes.items():
        size = 2 * int(np.prod(dims))
        header[name] = {"dtype": "BF16", "shape": list(dims), "data_offsets": [offset, offset + size]}
        offset += size
    encoded = json.dumps(header).encode()
    encoded += b" " * (-len(encoded) % 8)
    rng = np.random.default_rng(seed)
    partial = directory / "model.safetensors.partial"
    with partial.open("wb") as handle:
        handle.write(len(encoded).to_bytes(8, "little"))
        handle.write(encoded)
        for name, dims in shapes.items():
            _write_tensor(handle, name, dims, rng)
    partial.replace(directory / "model.safetensors")
    for name in SIDECARS:
        shutil.copy(FIXTURE / name, directory / name)
    generation = {"eos_token_id": config["eos_token_id"], "pad_token_id": 330, "max_new_tokens": 512}
    (directory / "generation_config.json").write_text(json.dumps(generation), encoding="utf-8")
    (directory / "config.json").write_text(json.dumps(config, indent=1), encoding="utf-8")  # last: complete
    return directory
