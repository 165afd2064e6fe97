"""Child process for ``test_quantised_decoding.py``: quantised libllama decoding that may crash natively.

Writes a tiny Qwen3 GGUF whose matrices fit whole q4_k blocks (rows of 256), quantizes it to the
requested type, loads it with Captioneer's default placement (or extra buffer types forced on/off) and decodes a prompt. Prints one JSON line: the relative error of the logits against the f32
numpy reference and the argmax agreement. A native crash kills only this process.

    python -m tests.native.quantised_decode_child WORK_DIR q8_0|q4_k [--extra-bufts on|off|default]
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from pathlib import Path

import numpy as np

from inference.native import llama
from tests.native import qwen3_numpy as ref

# hidden 256 and ffn 512: every matrix row is one q4_k super-block, so libllama keeps the requested
# type instead of falling back, and the AMX / CPU_REPACK buffer types would accept these weights.
CFG = ref.TinyQwen3(
    hidden_size=256, intermediate_size=512, head_dim=64, num_attention_heads=4, num_key_value_heads=2
)
PROMPT = np.array([5, 17, 200, 33, 99, 100, 7, 8, 258, 259, 12, 40, 41, 42, 43, 44], dtype=np.int64)


class _BufferLog(logging.Handler):
    """Keeps libllama's "<name> model buffer size" lines: where the weights were placed."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        if "model buffer size" in message:
            self.lines.append(message.strip())


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("work", type=Path)
    parser.add_argument("storage", choices=("q8_0", "q4_k"))
    parser.add_argument("--extra-bufts", choices=("on", "off", "default"), default="default")
    args = parser.parse_args()
    logger = logging.getLogger("captioneer.llama")
    logger.setLevel(logging.DEBUG)
    buffers = _BufferLog()
    logger.addHandler(buffers)
    llama.install_log_router(logger)

    weights = ref.random_weights(CFG, seed=3, embed_std=0.3, residual_gain=2.0)
    f32_path = ref.write_qwen3_gguf(args.work / "tiny256-f32.gguf", weights, CFG)
    quantised = args.work / f"tiny256-{args.storage}.gguf"
    llama.quantize_gguf(f32_path, quantised, args.storage, n_threads=1)
    expected = ref.qwen3_logits(weights, CFG, weights["embed_tokens.weight"][PROMPT])
    extra = {"on": {"use_extra_bufts": True}, "off": {"use_extra_bufts": False}, "default": {}}[
        args.extra_bufts
    ]
    options = llama.ContextOptions(n_ctx=128, n_batch=32, n_threads=2, kv_type="f16")
    with llama.LlamaModel(quantised, **extra) as model, llama.LlamaContext(model, options) as ctx:
        prefill = ctx.decode_tokens(PROMPT, logits="all")  # batched: the mul_mat path of prefill
        steps = [ctx.decode_tokens([int(np.argmax(prefill[-1]))])[0]]  # one row: the decode path
        used_extra = model.use_extra_bufts
    result = {
        "relative_error": ref.relative_error(prefill, expected),
        "argmax_agreement": float(np.mean(np.argmax(prefill, axis=1) == np.argmax(expected, axis=1))),
        "finite": bool(np.isfinite(prefill).all() and np.isfinite(steps[0]).all()),
        "use_extra_bufts": used_extra,
        "buffers": buffers.lines,
    }
    sys.stdout.write(json.dumps(result) + "\n")


if __name__ == "__main__":
    main()
