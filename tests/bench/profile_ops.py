"""Per-op profile of the full-size encoders: where the time goes on ggml, and on torch for the same module.

* Parakeet-TDT 0.6B v3 encoder (random weights, the numpy checkpoint of ``bench_parakeet_stream.py``) on a
  ``--seconds`` clip of speech;
* the Qwen3-ASR-1.7B / Confucius4-R2T2 audio tower (random bf16 weights built by ``bench_r2t2.py --tower-only``
  with the reference python; without one this part is skipped) on a ``--tower-seconds`` clip;
* with ``--parts thinker``: the 1.7B-shaped thinker on libllama (random GGUF of ``bench_thinker_decode.py``),
  prefill of ``--prefill`` tokens and single-token decode, timed through libllama's eval callback (ggml only).

ggml side: ``backend.profiler = OpProfiler()`` runs each graph node as its own one-node graph (same buffers,
same results) and times it. torch side (``--reference-python`` or ``$CAPTIONEER_REFERENCE_PYTHON``; skipped
with ``--no-torch``): ``torch.profiler`` self CPU time by aten op on the same inputs. Both are grouped into the
same categories; the products are also listed by weight type and shape. Shares are what to compare on a
loaded machine; absolute times are only comparable within one run.

    .venv/bin/python tests/bench/profile_ops.py --reference-python .venv-ref/bin/python [--threads 2]
        [--parts parakeet,tower] [--types f32] [--seconds 10] [--tower-seconds 20] [--reps 2]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests" / "bench"))

from tests.bench import machine  # noqa: E402

CATEGORIES = (
    "matmul weights",
    "matmul attention",
    "conv",
    "softmax/attention",
    "norm",
    "activation",
    "elementwise",
    "copy/layout",
    "other",
)

# ---------------------------------------------------------------------------------- grouping

_GGML_GROUPS = {
    "conv": {"IM2COL", "CONV_2D_DW", "SSM_CONV", "CONV_TRANSPOSE_1D", "CONV_2D", "POOL_2D"},
    "softmax/attention": {"SOFT_MAX", "FLASH_ATTN_EXT"},
    "norm": {"NORM", "RMS_NORM", "GROUP_NORM", "L2_NORM"},
    "activation": {
        "GELU",
        "GELU_ERF",
        "GELU_QUICK",
        "SILU",
        "RELU",
        "SIGMOID",
        "TANH",
        "SWIGLU",
        "GEGLU",
        "GEGLU_ERF",
        "REGLU",
        "GLU",
        "EXP",
        "LOG",
        "SQR",
        "SQRT",
        "CLAMP",
    },
    "elementwise": {"ADD", "SUB", "MUL", "DIV", "SCALE", "ADD1", "ACC"},
    "copy/layout": {
        "CONT",
        "CPY",
        "DUP",
        "CONCAT",
        "PAD",
        "PAD_EXT",
        "GET_ROWS",
        "REPEAT",
        "SET_ROWS",
        "ROPE",
    },
}
_TORCH_GROUPS = {  # first match wins; weights vs attention products told apart by op (an approximation)
    "matmul weights": ("aten::mm", "aten::addmm", "aten::linear", "aten::_addmm_activation", "mkldnn_linear"),
    "matmul attention": ("aten::bmm", "aten::baddbmm", "aten::matmul"),
    "conv": ("conv", "aten::_convolution", "aten::mkldnn_convolution", "aten::im2col"),
    "softmax/attention": ("softmax", "scaled_dot_product", "_flash_attention", "aten::_safe_softmax"),
    "norm": ("layer_norm", "batch_norm", "rms_norm", "group_norm", "aten::native_layer_norm"),
    "activation": ("gelu", "silu", "glu", "sigmoid", "relu", "tanh", "aten::exp", "aten::log"),
    "elementwise": (
        "aten::add",
        "aten::mul",
        "aten::div",
        "aten::sub",
        "aten::where",
        "aten::masked_fill",
        "aten::rsub",
        "aten::pow",
        "aten::sqrt",
        "aten::rsqrt",
        "aten::neg",
        "aten::eq",
        "aten::ne",
    ),
    "copy/layout": (
        "copy_",
        "aten::contiguous",
        "aten::clone",
        "aten::cat",
        "aten::pad",
        "aten::constant_pad",
        "aten::index",
        "aten::_to_copy",
        "aten::to",
        "aten::fill_",
        "aten::zero",
        "aten::stack",
        "aten::empty",
        "aten::arange",
        "aten::embedding",
        "aten::gather",
        "aten::flip",
    ),
}


PRODUCT_OPS = (
    "MUL_MAT",
    "CUSTOM",
)  # CUSTOM: OpenBLAS f32 (inference/native/blas.py), int8 (native/int8.py) or packed f32 (native/packed_f32.py)


def _int8_product(record: Any) -> bool:
    """An int8 weight product (sources x, weight, scales; the weight is I8)."""
    return record.op == "CUSTOM" and any(src.type == "i8" for src in record.srcs)


def ggml_category(record: Any) -> str:
    if record.op in PRODUCT_OPS:
        if any(src.op == "IM2COL" for src in record.srcs) or all(src.op == "PAD" for src in record.srcs):
            return "conv"  # im2col columns, or both sides zero-padded (ops.conv2d's short products)
        return "matmul weights" if record.srcs[0].weight or _int8_product(record) else "matmul attention"
    for name, ops in _GGML_GROUPS.items():
        if record.op in ops:
            return name
    return "other"


def torch_category(op: str) -> str:
    for name, keys in _TORCH_GROUPS.items():
        if any(key in op for key in keys):
            return name
    return "other"


def per_node_medians(records: list[Any], runs: int) -> list[Any]:
    """One record per node with its median time over the ``runs`` identical profiled runs (robust to a
    run being descheduled on a loaded machine)."""
    if len(records) % runs:
        raise SystemExit(f"{len(records)} node timings do not split into {runs} identical runs")
    n = len(records) // runs
    return [
        replace(records[i], seconds=statistics.median(records[i + k * n].seconds for k in range(runs)))
        for i in range(n)
    ]


def ggml_breakdown(records: list[Any]) -> tuple[dict[str, tuple[float, float]], list[tuple]]:
    """{category: (seconds per run, flops per run)} and the products grouped by type and shape."""
    groups: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0])
    products: dict[tuple, list[float]] = defaultdict(lambda: [0, 0.0, 0.0])
    for r in records:
        cat = ggml_category(r)
        groups[cat][0] += r.seconds
        groups[cat][1] += r.flops
        if (
            r.op == "CUSTOM" and len(r.srcs) == 1
        ):  # a packed f32 weight (native/packed_f32.py): x is the only source
            x = r.srcs[0]
            rows = x.ne[1] * x.ne[2] * x.ne[3]
            n = r.ne[0] * r.ne[1] * r.ne[2] * r.ne[3] // rows
            key = ("weight", "f32xf32/onnxruntime-packed", f"{x.ne[0]}x{n}", _row_class(rows))
            products[key][0] += 1
            products[key][1] += r.seconds
            products[key][2] += r.flops
        elif r.op in PRODUCT_OPS:
            int8 = _int8_product(r)
            a, b = (r.srcs[1], r.srcs[0]) if int8 else (r.srcs[0], r.srcs[1])  # int8: (x, weight, scales)
            rows = b.ne[1] * b.ne[2] * b.ne[3]
            role = "conv" if cat == "conv" else ("weight" if a.weight or int8 else "act")
            library = "/onnxruntime" if int8 else "/openblas" if r.op == "CUSTOM" else ""
            # The int8 weight keeps its logical (N, K) shape: ne = (K, N) like any weight.
            key = (
                role,
                f"{a.type}x{b.type}{library}",
                f"{a.ne[0]}x{a.ne[1]}" + (f"x{a.ne[2]}" if a.ne[2] > 1 else ""),
                _row_class(rows),
            )
            products[key][0] += 1
            products[key][1] += r.seconds
            products[key][2] += r.flops
    table = sorted(((*k, *v) for k, v in products.items()), key=lambda row: -row[5])
    return {k: (v[0], v[1]) for k, v in groups.items()}, table


def _row_class(rows: int) -> str:
    if rows == 1:
        return "1 row"
    if rows <= 16:
        return "2-16 rows"
    return f"{rows} rows"


def torch_breakdown(rows: list[dict]) -> tuple[dict[str, tuple[float, float]], list[dict]]:
    groups: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0])
    for row in rows:
        cat = torch_category(row["op"])
        groups[cat][0] += row["self_s"]
        groups[cat][1] += row["flops"]
    return {k: (v[0], v[1]) for k, v in groups.items()}, sorted(rows, key=lambda r: -r["self_s"])


# ---------------------------------------------------------------------------------- printing


def print_categories(
    title: str, ggml: dict[str, tuple[float, float]], torch: dict | None, wall: dict
) -> None:
    print(f"\n{title}")
    total_g = sum(v[0] for v in ggml.values())
    total_t = sum(v[0] for v in torch.values()) if torch else 0.0
    head = f"{'category':20} {'ggml s':>8} {'share':>6} {'GFLOP/s':>8}"
    if torch:
        head += f" | {'torch s':>8} {'share':>6} {'GFLOP/s':>8} | {'ggml/torch':>10}"
    print(head)
    for cat in CATEGORIES:
        g = ggml.get(cat, (0.0, 0.0))
        line = f"{cat:20} {g[0]:8.3f} {100 * g[0] / total_g:5.1f}% {_gflops(g):>8}"
        if torch:
            t = torch.get(cat, (0.0, 0.0))
            ratio = f"{g[0] / t[0]:9.2f}x" if t[0] > 1e-3 else f"{'-':>10}"
            line += f" | {t[0]:8.3f} {100 * t[0] / total_t:5.1f}% {_gflops(t):>8} | {ratio}"
        print(line)
    line = f"{'sum of ops':20} {total_g:8.3f} {'':6} {'':8}"
    if torch:
        line += f" | {total_t:8.3f} {'':6} {'':8} | {total_g / total_t:9.2f}x"
    print(line)
    print("unprofiled wall: " + ", ".join(f"{k} {v:.3f} s" for k, v in wall.items()))


def _gflops(entry: tuple[float, float]) -> str:
    return f"{entry[1] / entry[0] / 1e9:8.1f}" if entry[1] and entry[0] else f"{'':8}"


def print_products(table: list[tuple], total: float, limit: int = 12) -> None:
    print(
        f"  {'products (ggml)':8} {'types':10} {'K x N':>14} {'rows':>10} {'n/run':>6} {'s':>7} {'share':>6} {'GFLOP/s':>8}"
    )
    for role, types, shape, rows, count, seconds, flops in table[:limit]:
        print(
            f"  {role:15} {types:10} {shape:>14} {rows:>10} {count:6.0f} {seconds:7.3f} {100 * seconds / total:5.1f}% "
            f"{flops / seconds / 1e9 if seconds else 0:8.1f}"
        )


def print_torch_top(rows: list[dict], total: float, limit: int = 12) -> None:
    print(f"  {'torch ops (self CPU)':40} {'calls':>6} {'s':>7} {'share':>6} {'GFLOP/s':>8}")
    for row in rows[:limit]:
        rate = f"{row['flops'] / row['self_s'] / 1e9:8.1f}" if row["flops"] and row["self_s"] else ""
        print(
            f"  {row['op'][:40]:40} {row['calls']:6.0f} {row['self_s']:7.3f} {100 * row['self_s'] / total:5.1f}% {rate:>8}"
        )


# ---------------------------------------------------------------------------------- torch worker


def torch_profile(args: argparse.Namespace) -> None:
    """Runs in the reference python: profile one module on saved inputs, print one JSON line."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    effective = machine.pin_torch_threads(args.threads)
    work = Path(args.work)
    if args.torch_profile == "parakeet":
        from transformers import ParakeetForTDT

        net = ParakeetForTDT.from_pretrained(args.model, dtype=torch.float32).eval()
        feats = torch.from_numpy(np.load(work / "parakeet_features.npy"))[None]
        mask = torch.from_numpy(np.load(work / "parakeet_mask.npy"))[None]

        def run() -> None:
            net.encoder(input_features=feats, attention_mask=mask)
    else:
        from transformers import Qwen3ASRForConditionalGeneration

        model = Qwen3ASRForConditionalGeneration.from_pretrained(args.model, dtype=torch.float32).eval()
        mel = torch.from_numpy(np.load(work / "tower_mel.npy"))[None]
        frames = int(np.load(work / "tower_frames.npy"))
        tmask = torch.zeros(1, mel.shape[-1], dtype=torch.long)
        tmask[0, :frames] = 1

        def run() -> None:
            model.model.get_audio_features(mel, tmask)

    walls = []
    with torch.inference_mode():
        run()  # warm-up
        for _ in range(args.reps):
            started = time.perf_counter()
            run()
            walls.append(time.perf_counter() - started)
        with profile(activities=[ProfilerActivity.CPU], with_flops=True) as prof:
            for _ in range(args.reps):
                run()
    rows = [
        {
            "op": e.key,
            "calls": e.count / args.reps,
            "self_s": e.self_cpu_time_total / 1e6 / args.reps,
            "flops": (e.flops or 0) / args.reps,
        }
        for e in prof.key_averages()
        if e.self_cpu_time_total > 0
    ]
    print(json.dumps({"threads": effective, "wall": statistics.median(walls), "rows": rows}), flush=True)


def run_torch(reference: str, part: str, model: Path, args: argparse.Namespace) -> dict:
    done = subprocess.run(
        [
            reference,
            __file__,
            "--torch-profile",
            part,
            "--model",
            str(model),
            "--work",
            str(args.work),
            "--threads",
            str(args.threads),
            "--reps",
            str(args.reps),
        ],
        capture_output=True,
        text=True,
        env=machine.thread_env(args.threads),
    )
    if done.returncode != 0:
        raise SystemExit(f"the torch {part} profile failed:\n{done.stderr[-3000:]}")
    result = json.loads(done.stdout.strip().splitlines()[-1])
    print(machine.check_threads("torch", args.threads, result["threads"]), flush=True)
    return result


# ---------------------------------------------------------------------------------- ggml side


def profile_ggml(backend: Any, run: Any, reps: int) -> tuple[list[Any], float, float]:
    """(node records of ``reps`` profiled runs, median plain wall, median profiled wall)."""
    from inference.native.profiler import OpProfiler

    run()  # warm-up: graph build, first touch of the weights
    cpu0, plain = machine.process_cpu_seconds(), []
    for _ in range(reps):
        started = time.perf_counter()
        run()
        plain.append(time.perf_counter() - started)
    busy = (machine.process_cpu_seconds() - cpu0) / sum(plain)
    print(f"ggml: threads {backend.threads} asked, {busy:.2f} CPU-s per wall-s in the plain runs", flush=True)
    profiler = OpProfiler()
    backend.profiler = profiler
    try:
        for _ in range(reps):
            run()
    finally:
        backend.profiler = None
    return profiler.records, statistics.median(plain), statistics.median(profiler.graph_seconds)


def parakeet_part(args: argparse.Namespace, reference: str | None) -> None:
    from bench_parakeet_stream import ensure_model
    from clips import speech_clip

    from inference.engine import load_engine
    from inference.families.parakeet_tdt.frontend import compute_features

    model = ensure_model()
    audio = speech_clip(args.seconds)
    for kind in args.types.split(","):
        options = machine.parakeet_weight_options(kind)
        with machine.gemm_of(kind):
            engine = load_engine(model, "parakeet_tdt", options, backend="cpu", threads=args.threads)
        try:
            features = compute_features(audio, engine.config.features)
            np.save(args.work / "parakeet_features.npy", features.values)
            np.save(
                args.work / "parakeet_mask.npy",
                (np.arange(features.values.shape[0]) < features.valid_frames).astype(np.int64),
            )
            encode = partial(engine.encoder.encode, features.values, features.valid_frames)
            records, plain, profiled = profile_ggml(engine.backend, encode, args.reps)
        finally:
            engine.close()
        report(
            f"Parakeet-TDT 0.6B v3 encoder, {args.seconds:g} s clip, weights {kind}",
            records,
            args,
            {"ggml plain": plain, "ggml profiled": profiled},
            reference,
            "parakeet",
            model,
            kind == "f32",
        )


def tower_part(args: argparse.Namespace, reference: str | None) -> None:
    if reference is None:
        print("\nR2T2 tower: skipped (its random checkpoint is built with torch: pass --reference-python)")
        return
    from bench_r2t2 import build_model
    from r2t2_fixtures import load_audio

    from inference.families.confucius4_r2t2.audio_tower import AudioTower
    from inference.families.confucius4_r2t2.checkpoint import load_checkpoint
    from inference.families.confucius4_r2t2.frontend import log_mel
    from inference.native import open_backend

    model_dir = args.work / "r2t2-tower-model"
    build_model(model_dir, False, reference, tower_only=True)
    clip = np.resize(load_audio()["clip_long"], int(args.tower_seconds * 16000)).astype(np.float32)
    mel = log_mel(clip)
    valid = mel.values[:, : mel.valid_frames]
    np.save(args.work / "tower_mel.npy", mel.values)
    np.save(args.work / "tower_frames.npy", np.asarray(mel.valid_frames))
    checkpoint = load_checkpoint(model_dir)
    for kind in args.tower_types.split(","):
        with open_backend("cpu", threads=args.threads) as backend:
            tower = AudioTower(backend, checkpoint.files, checkpoint.config.audio, storage=kind)
            try:
                records, plain, profiled = profile_ggml(backend, partial(tower.encode, valid), args.reps)
            finally:
                tower.close()
        report(
            f"R2T2 / Qwen3-ASR-1.7B audio tower, {args.tower_seconds:g} s clip, weights {kind}",
            records,
            args,
            {"ggml plain": plain, "ggml profiled": profiled},
            reference,
            "tower",
            model_dir,
            kind == "native",
        )


def thinker_part(args: argparse.Namespace) -> None:
    """The Qwen3-1.7B-shaped thinker on libllama: prefill and decode, timed node by node through the
    scheduler's eval callback (libllama's ``cb_eval``: asking for every node makes the scheduler compute
    one node at a time). ggml only: torch's 1.7B thinker does not fit beside the others on a 2-core box."""
    from bench_thinker_decode import write_random_gguf

    from inference.native import llama
    from inference.native.bindings import check_node_layout, load_api

    check_node_layout(load_api())
    llama.install_log_router()
    work: Path = args.thinker_work
    work.mkdir(parents=True, exist_ok=True)
    f32 = work / f"thinker-l{args.thinker_layers}-f32.gguf"
    for kind in args.thinker_types.split(","):
        path = work / f"thinker-l{args.thinker_layers}-{kind}.gguf"
        if not path.exists():
            if not f32.exists():
                write_random_gguf(f32, args.thinker_layers)
            llama.quantize_gguf(f32, path, kind, n_threads=args.threads)
        phases, walls = profile_thinker(path, args)
        for phase, records in phases.items():
            runs = args.reps * (args.steps if phase == "decode" else 1)
            title = f"thinker {phase} (Qwen3-1.7B shape, {args.thinker_layers} layers, {kind}, " + (
                f"{args.prefill} tokens)" if phase == "prefill" else "one token after the prompt)"
            )
            groups, products = ggml_breakdown(per_node_medians(records, runs))
            print(
                f"\n=== {title}; {args.threads} threads; CPU {machine.cpu_name()}; per-node medians of {runs} runs"
            )
            print_categories(
                "by category (seconds per run)",
                groups,
                None,
                {"libllama plain": statistics.median(walls[phase])},
            )
            print_products(products, sum(v[0] for v in groups.values()))


def profile_thinker(
    path: Path, args: argparse.Namespace
) -> tuple[dict[str, list[Any]], dict[str, list[float]]]:
    """Node records (prefill, decode) of ``args.reps`` profiled runs and the unprofiled walls."""
    import ctypes

    from inference.native import llama
    from inference.native.bindings import load_api
    from inference.native.profiler import is_empty_op, timed_node

    api = load_api()
    model = llama.LlamaModel(path)
    ll = model._ll
    state: dict[str, Any] = {"on": False, "t": 0.0, "records": []}

    def callback(tensor: int, ask: bool, _user: int, state: dict[str, Any] = state) -> bool:
        if ask:
            return state["on"] and not is_empty_op(api, tensor)
        now = time.perf_counter()
        state["records"].append(timed_node(api, tensor, now - state["t"]))
        state["t"] = time.perf_counter()
        return True

    hook = ll.ggml_backend_sched_eval_callback(callback)  # kept alive while the context lives
    params = ll.llama_context_default_params()
    params.n_ctx, params.n_batch, params.n_ubatch, params.n_seq_max = 1024, 512, 512, 1
    params.n_threads = params.n_threads_batch = args.threads
    params.type_k = params.type_v = llama.KV_CACHE_TYPES["f16"]
    params.flash_attn_type = -1  # libllama decides, as the thinker does for quantised weights
    params.cb_eval = hook
    handle = ll.llama_init_from_model(model.handle, params)
    memory = ll.llama_get_memory(handle)
    prompt = (ctypes.c_int32 * args.prefill)(*[(7 * i) % 200 + 10 for i in range(args.prefill)])
    one = (ctypes.c_int32 * 1)(42)

    def decode(tokens: Any, n: int) -> None:
        state["t"] = time.perf_counter()
        if ll.llama_decode(handle, ll.llama_batch_get_one(tokens, n)) != 0:
            raise SystemExit("llama_decode failed")

    phases: dict[str, list[Any]] = {"prefill": [], "decode": []}
    walls: dict[str, list[float]] = {"prefill": [], "decode": []}
    try:
        for rep in range(args.reps + 1):  # the first is a warm-up
            for profiled in (False, True):
                ll.llama_memory_clear(memory, True)
                state["on"], state["records"] = profiled, []
                started = time.perf_counter()
                decode(prompt, args.prefill)
                prefill_s = time.perf_counter() - started
                prefill_records = state["records"]
                state["records"] = []
                started = time.perf_counter()
                for _ in range(args.steps):
                    decode(one, 1)
                step_s = (time.perf_counter() - started) / args.steps
                if rep and profiled:
                    phases["prefill"] += prefill_records
                    phases["decode"] += state["records"]
                elif rep:
                    walls["prefill"].append(prefill_s)
                    walls["decode"].append(step_s)
    finally:
        ll.llama_free(handle)
        model.close()
    return phases, walls


def print_other_ops(records: list[Any], total: float, limit: int = 10) -> None:
    """The ops other than products, by op and result shape: where the time beside the GEMMs goes."""
    kinds: dict[tuple[str, str], list[float]] = defaultdict(lambda: [0, 0.0])
    for r in records:
        if r.op not in PRODUCT_OPS:
            shape = "x".join(str(n) for n in r.ne if n > 1) or "1"
            kinds[(r.op, shape)][0] += 1
            kinds[(r.op, shape)][1] += r.seconds
    print(f"  {'other ops (ggml)':24} {'result ne':>18} {'n/run':>6} {'s':>7} {'share':>6}")
    for (op, shape), (count, seconds) in sorted(kinds.items(), key=lambda kv: -kv[1][1])[:limit]:
        print(f"  {op:24} {shape:>18} {count:6.0f} {seconds:7.3f} {100 * seconds / total:5.1f}%")


def report(
    title: str,
    records: list[Any],
    args: argparse.Namespace,
    wall: dict[str, float],
    reference: str | None,
    part: str,
    model: Path,
    with_torch: bool,
) -> None:
    medians = per_node_medians(records, args.reps)
    groups, products = ggml_breakdown(medians)
    torch_groups, torch_rows = None, []
    if with_torch and reference is not None and not args.no_torch:
        result = run_torch(reference, part, model, args)
        torch_groups, torch_rows = torch_breakdown(result["rows"])
        wall["torch plain"] = result["wall"]
    print(
        f"\n=== {title}; {args.threads} threads; CPU {machine.cpu_name()}; ggml: per-node medians of {args.reps} "
        f"runs; torch: means of {args.reps} runs"
    )
    print_categories("by category (seconds per run)", groups, torch_groups, wall)
    total = sum(v[0] for v in groups.values())
    print_products(products, total)
    print_other_ops(medians, total)
    if torch_rows:
        print_torch_top(torch_rows, sum(r["self_s"] for r in torch_rows))
    print(machine.machine_header(args.threads, interval=0.2).splitlines()[1], flush=True)


def main(argv: Iterable[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--parts", default="parakeet,tower")
    parser.add_argument(
        "--types",
        default="f32",
        help="Parakeet weight types, TYPE/CONV sets conv_weight_type too (torch is profiled with f32)",
    )
    parser.add_argument("--tower-types", default="native", help="tower weight types (torch: with native)")
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--tower-seconds", type=float, default=20.0)
    parser.add_argument("--reps", type=int, default=2)
    parser.add_argument(
        "--work", type=Path, default=None, help="scratch folder (default: the user cache dir)"
    )
    parser.add_argument("--no-torch", action="store_true", help="profile the ggml side only")
    parser.add_argument(
        "--thinker-work",
        type=Path,
        default=Path("/tmp/thinker-bench"),
        help="random thinker GGUFs (shared with bench_thinker_decode.py; made when missing)",
    )
    parser.add_argument("--thinker-layers", type=int, default=28)
    parser.add_argument("--thinker-types", default="q8_0", help="thinker storage types (part 'thinker')")
    parser.add_argument("--prefill", type=int, default=256, help="thinker prompt tokens")
    parser.add_argument("--steps", type=int, default=8, help="thinker decode steps per run")
    machine.add_reference_option(parser)
    parser.add_argument("--torch-profile", choices=("parakeet", "tower"), help=argparse.SUPPRESS)
    parser.add_argument("--model", help=argparse.SUPPRESS)
    args = parser.parse_args(list(argv) if argv is not None else None)
    if args.torch_profile:
        return torch_profile(args)

    from inference.paths import AppPaths

    args.work = args.work or AppPaths.from_environment().cache / "bench" / "profile_ops"
    args.work.mkdir(parents=True, exist_ok=True)
    sys.path.insert(0, str(ROOT / "tests" / "confucius4_r2t2"))
    machine.print_machine_header(args.threads)
    reference = None
    if not args.no_torch or "tower" in args.parts:
        try:
            reference = machine.reference_python(args.reference_python)
        except SystemExit as exc:
            print(f"no torch side: {exc}")
    if "parakeet" in args.parts:
        parakeet_part(args, reference)
    if "tower" in args.parts:
        tower_part(args, reference)
    if "thinker" in args.parts:
        thinker_part(args)


if __name__ == "__main__":
    main()
