"""Thinker decode speed on libllama at the Qwen3-ASR-1.7B thinker shape, random weights.

Writes an f32 GGUF (hidden 2048, 28 layers, 16/8 heads, head_dim 128, ffn 6144, vocab 151936;
~6.6 GB) straight from random numbers, quantizes it to q8_0 (and q4_k), then times greedy decode
steps after an embedding prefill, with libllama's extra buffer types (AMX / CPU_REPACK weight layouts)
on and off. Speed does not depend on the weight values.

    nice -n 10 .venv/bin/python tests/bench/bench_thinker_decode.py --work /tmp/thinker-bench --extra-bufts on,off
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import gguf
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from inference.native import backend, llama  # noqa: E402
from tests.bench import machine  # noqa: E402

SHAPE = {
    "hidden": 2048,
    "layers": 28,
    "heads": 16,
    "kv_heads": 8,
    "head_dim": 128,
    "ffn": 6144,
    "vocab": 151936,
}


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
            (f"blk.{i}.attn_norm.weight", (h,)),
            (f"blk.{i}.attn_q.weight", (q, h)),
            (f"blk.{i}.attn_k.weight", (kv, h)),
            (f"blk.{i}.attn_v.weight", (kv, h)),
            (f"blk.{i}.attn_output.weight", (h, q)),
            (f"blk.{i}.attn_q_norm.weight", (s["head_dim"],)),
            (f"blk.{i}.attn_k_norm.weight", (s["head_dim"],)),
            (f"blk.{i}.ffn_norm.weight", (h,)),
            (f"blk.{i}.ffn_gate.weight", (f, h)),
            (f"blk.{i}.ffn_up.weight", (f, h)),
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


def time_run(
    path: Path,
    threads: int,
    steps: int,
    kv_type: str,
    flash_attn: bool | None,
    extra_bufts: bool,
    prefill: int,
) -> tuple[float, list[float]]:
    """Seconds for one ``prefill``-row embedding prefill, and the seconds of each greedy decode step."""
    with (
        llama.LlamaModel(path, use_extra_bufts=extra_bufts) as model,
        llama.LlamaContext(
            model,
            llama.ContextOptions(
                n_ctx=1024, n_batch=512, n_threads=threads, kv_type=kv_type, flash_attn=flash_attn
            ),
        ) as ctx,
    ):
        rng = np.random.default_rng(1)
        rows = rng.standard_normal((prefill, model.n_embd)).astype(np.float32) * 0.05
        start = time.perf_counter()
        ctx.decode_embeddings(rows)
        prefill_s = time.perf_counter() - start
        token, per_step = 300, []
        for _ in range(steps):
            start = time.perf_counter()
            logits = ctx.decode_tokens([token])[0]
            token = int(np.argmax(logits))
            per_step.append(time.perf_counter() - start)
        return prefill_s, per_step


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--work", type=Path, default=Path("/tmp/thinker-bench"))
    parser.add_argument("--threads", type=int, default=llama.default_threads())
    parser.add_argument("--steps", type=int, default=24)
    parser.add_argument("--rounds", type=int, default=3, help="A/B rounds, interleaved")
    parser.add_argument("--layers", type=int, default=SHAPE["layers"])
    parser.add_argument("--types", default="f32,q8_0,q4_k")
    parser.add_argument("--prefill", type=int, default=256, help="embedding rows prefilled before decoding")
    parser.add_argument(
        "--extra-bufts",
        default="on,off",
        help="libllama extra buffer types (AMX / CPU_REPACK) to compare: on, off or on,off",
    )
    args = parser.parse_args()
    machine.print_machine_header(args.threads)
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
    settings = [{"on": True, "off": False}[v] for v in args.extra_bufts.split(",")]
    if True in settings and "amx_int8" in backend.cpu_features():
        print(
            "extra buffer types include the AMX kernels that crash on this CPU (llama.cpp #20824): measuring off only"
        )
        settings = [False]
    runs = [(kind, extra) for kind in kinds for extra in settings]
    decode: dict[tuple[str, bool], list[float]] = {run: [] for run in runs}
    prefill: dict[tuple[str, bool], list[float]] = {run: [] for run in runs}
    for _ in range(args.rounds):
        for kind, extra in runs:  # interleaved, so a slow spell of the machine hits every variant
            exact = kind == "f32"
            prefill_s, steps = time_run(
                paths[kind],
                args.threads,
                args.steps,
                "f32" if exact else "f16",
                False if exact else None,
                extra,
                args.prefill,
            )
            prefill[(kind, extra)].append(args.prefill / prefill_s)
            decode[(kind, extra)].append(1.0 / statistics.median(steps[2:]))
    print(
        f"libllama n_threads = n_threads_batch = {args.threads}; ggml CPU features: {' '.join(backend.cpu_features())}"
    )
    print(
        f"prefill of {args.prefill} embedding rows and decode (median step of {args.steps}), medians of "
        f"{args.rounds} interleaved rounds, tokens/s:"
    )
    for kind, extra in runs:
        p, d = prefill[(kind, extra)], decode[(kind, extra)]
        print(
            f"  {kind:5s} extra_bufts={'on ' if extra else 'off'}  prefill {statistics.median(p):7.1f}  "
            f"decode {statistics.median(d):6.2f}  (decode rounds: {', '.join(f'{r:.2f}' for r in d)})"
        )


if __name__ == "__main__":
    main()
