"""Thinker decode speed on libllama at the Qwen3-ASR-1.7B thinker shape, random weights.

Writes an f32 GGUF (hidden 2048, 28 layers, 16/8 heads, head_dim 128, ffn 6144, vocab 151936;
~6.6 GB) straight from random numbers, quantizes it to q8_0 (and q4_k), then times greedy decode
steps after a short embedding prefill. Speed does not depend on the weight values.

    nice -n 10 /work/venv/bin/python tests/bench/bench_thinker_decode.py --work /tmp/thinker-bench
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

import gguf
import numpy as np

from inference.native import llama

SHAPE = {"hidden": 2048, "layers": 28, "heads": 16, "kv_heads": 8, "head_dim": 128, "ffn": 6144, "vocab": 151936}


def write_random_gguf(path: Path, layers: int) -> None:
    s = SHAPE
    rng = np.random.default_rng(0)
    writer = gguf.GGUFWriter(str(path), "qwen3")
    writer.add_context_length(65536)
    writer.add_embedding_length(s["hidden"])
    writer.add_block_count(layers)
    writer.add_feed_forward_length(s["ffn"])
    writer.add_head_count(s["heads"])
    writer.add_head_count_kv(s["kv_heads"])
    writer.add_key_length(s["head_dim"])
    writer.add_value_length(s["head_dim"])
    writer.add_rope_freq_base(1e6)
    writer.add_layer_norm_rms_eps(1e-6)
    writer.add_file_type(gguf.LlamaFileType.ALL_F32)
    printable = [chr(c) for c in range(33, 127)] + [chr(256 + i) for i in range(256 - 94)]
    tokens = printable + ["Ġt", "he"] + [f"[PAD{i}]" for i in range(258, s["vocab"])]
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre("qwen2")
    writer.add_token_list(tokens)
    writer.add_token_types([1] * 258 + [5] * (s["vocab"] - 258))
    writer.add_token_merges(["Ġ t", "h e"])
    h, q, kv, f = s["hidden"], s["heads"] * s["head_dim"], s["kv_heads"] * s["head_dim"], s["ffn"]
    plan = [("token_embd.weight", (s["vocab"], h))]
    for i in range(layers):
        plan += [
            (f"blk.{i}.attn_norm.weight", (h,)), (f"blk.{i}.attn_q.weight", (q, h)),
            (f"blk.{i}.attn_k.weight", (kv, h)), (f"blk.{i}.attn_v.weight", (kv, h)),
            (f"blk.{i}.attn_output.weight", (h, q)), (f"blk.{i}.attn_q_norm.weight", (s["head_dim"],)),
            (f"blk.{i}.attn_k_norm.weight", (s["head_dim"],)), (f"blk.{i}.ffn_norm.weight", (h,)),
            (f"blk.{i}.ffn_gate.weight", (f, h)), (f"blk.{i}.ffn_up.weight", (f, h)),
            (f"blk.{i}.ffn_down.weight", (h, f)),
        ]
    plan.append(("output_norm.weight", (h,)))
    for name, shape in plan:
        writer.add_tensor_info(name, shape, np.dtype(np.float32), int(np.prod(shape)) * 4)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_ti_data_to_file()
    for _name, shape in plan:
        if len(shape) == 1:
            data = np.ones(shape, dtype=np.float32)
        else:
            data = rng.standard_normal(shape, dtype=np.float32) * np.float32(1.0 / np.sqrt(shape[1]))
        writer.write_tensor_data(data)
    writer.close()


def time_decode(path: Path, threads: int, steps: int, kv_type: str, flash_attn: bool | None) -> list[float]:
    with llama.LlamaModel(path) as model, llama.LlamaContext(
        model, llama.ContextOptions(n_ctx=1024, n_batch=256, n_threads=threads, kv_type=kv_type, flash_attn=flash_attn)
    ) as ctx:
        rng = np.random.default_rng(1)
        ctx.decode_embeddings(rng.standard_normal((96, model.n_embd)).astype(np.float32) * 0.05)
        token, per_step = 300, []
        for _ in range(steps):
            start = time.perf_counter()
            logits = ctx.decode_tokens([token])[0]
            token = int(np.argmax(logits))
            per_step.append(time.perf_counter() - start)
        return per_step


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--work", type=Path, default=Path("/tmp/thinker-bench"))
    parser.add_argument("--threads", type=int, default=llama.default_threads())
    parser.add_argument("--steps", type=int, default=24)
    parser.add_argument("--rounds", type=int, default=3, help="A/B rounds, interleaved")
    parser.add_argument("--layers", type=int, default=SHAPE["layers"])
    parser.add_argument("--types", default="f32,q8_0,q4_k")
    args = parser.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    llama.install_log_router()
    f32 = args.work / f"thinker-l{args.layers}-f32.gguf"
    if not f32.exists():
        t0 = time.perf_counter()
        write_random_gguf(f32, args.layers)
        print(f"wrote {f32} in {time.perf_counter() - t0:.0f} s")
    paths = {"f32": f32}
    for kind in args.types.split(","):
        if kind != "f32":
            paths[kind] = args.work / f"thinker-l{args.layers}-{kind}.gguf"
            if not paths[kind].exists():
                t0 = time.perf_counter()
                llama.quantize_gguf(f32, paths[kind], kind, n_threads=args.threads)
                print(f"quantized {kind} in {time.perf_counter() - t0:.0f} s")
    kinds = [k for k in args.types.split(",") if k in paths]
    results: dict[str, list[float]] = {k: [] for k in kinds}
    for _ in range(args.rounds):
        for kind in kinds:
            exact = kind == "f32"
            steps = time_decode(paths[kind], args.threads, args.steps, "f32" if exact else "f16",
                                False if exact else None)
            results[kind].append(1.0 / statistics.median(steps[2:]))
    print(f"decode tokens/s, {args.threads} threads, median per round over {args.steps} steps:")
    for kind in kinds:
        rates = results[kind]
        print(f"  {kind:5s} {statistics.median(rates):6.2f} tok/s  (rounds: {', '.join(f'{r:.2f}' for r in rates)})")


if __name__ == "__main__":
    main()
