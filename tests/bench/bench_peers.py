"""Benchmark: Captioneer's Parakeet-TDT engine next to the runtimes people use for Parakeet on CPUs.

One full-size Parakeet-TDT 0.6B v3 with deterministic random weights (bench_parakeet.py's checkpoint, so
Captioneer runs the very same weights) is exported by ``tests/bench/peers/`` to each peer's layout:

* **onnx-asr** (ONNX Runtime wrapper, ``nemo-conformer-tdt``): fp32, and int8 from ``quantize_dynamic``;
* **sherpa-onnx** (k2-fsa, ``nemo_transducer``): fp32, and int8 (same int8 encoder, int8 decoder/joiner);
* **CrispASR** (ggml port): f16 and q8_0 GGUF from its own converter (``--crispasr-converter``);
* **transcribe.cpp** (ggml port, Handy's engine; PyPI ``transcribe-cpp``): f32 GGUF from its own converter
  (``--transcribe-cpp-converter``).

The ggml ports' converters are not in their wheels and read only NeMo ``.nemo`` archives: point the options
(or ``$CAPTIONEER_CRISPASR_CONVERTER`` / ``$CAPTIONEER_TRANSCRIBE_CPP_CONVERTER``) at the scripts in their
repositories; ``peers/export_nemo.py`` packs the checkpoint as a ``.nemo`` for them. Without a converter
that port's rows are skipped.

Every peer lives in its own virtual environment under the work dir (``--work`` or ``$CAPTIONEER_BENCH_WORK``,
default ``<user cache>/Captioneer/bench/peers``; never inside the repo), created on first use with pinned
versions, and runs in its own worker process (``peers/worker.py``); Captioneer runs in bench_parakeet.py's
worker. The parent alternates between all workers round by round (order reversed every other round) and
reports medians. All sides get the same threads (``--threads``, 2 by default): ``*_NUM_THREADS`` in the
environment, ORT's ``intra_op_num_threads``, sherpa-onnx's ``num_threads``, ggml's backend threads; each
worker reports what it uses and the bench stops when a pool differs (``machine.check_threads``).

    .venv/bin/python tests/bench/bench_peers.py --reference-python .venv-ref/bin/python \
        --rounds 3 --threads 2 --clips 10,60 --types f32,q8_0 [--peers onnx-asr:fp32,onnx-asr:int8,...]

Agreement: every peer's greedy token ids are compared with Captioneer f32's on the same clip (longest
common subsequence over the longer sequence, and whether the sequences are identical). The weights are
random, so the ids are arbitrary but deterministic: equal work gives equal ids up to float rounding; the
output is nearly degenerate (few distinct ids, printed under the table), so ``export_onnx_asr.py --verify``
compares encoder outputs directly. Where a peer
decodes differently by design (sherpa-onnx's TDT loop emits at most 5 tokens per frame where NeMo,
onnx-asr and Captioneer allow 10; its own fbank front end), the table says so.

``--layers N`` builds a reduced-depth variant (same construction, N encoder layers) to check the pipeline
quickly; figures for the note come from the full 24 layers only.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from functools import partial
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from tests.bench import bench_parakeet, machine  # noqa: E402

WORK_ENV = "CAPTIONEER_BENCH_WORK"
PEERS_DIR = Path(__file__).resolve().parent / "peers"
# Pinned so a rerun measures the same peer code; numpy/threadpoolctl for the worker and the thread check.
PEER_PACKAGES = {
    "onnx-asr": ["onnx-asr[cpu]==0.12.0", "onnxruntime==1.32.0", "threadpoolctl"],
    "sherpa-onnx": ["sherpa-onnx==2.0.1", "numpy", "threadpoolctl"],
    "crispasr": ["crispasr==0.8.45", "numpy", "threadpoolctl"],
    "transcribe-cpp": ["transcribe-cpp==0.4.1", "numpy", "threadpoolctl"],
}
ALL_PEERS = (
    "onnx-asr:fp32",
    "onnx-asr:int8",
    "sherpa-onnx:fp32",
    "sherpa-onnx:int8",
    "crispasr:f16",
    "crispasr:q8_0",
    "transcribe-cpp:f32",
)
# The ggml ports' converters live in their repositories, not in their wheels: where to find them.
CONVERTER_ENV = {
    "crispasr": ("CAPTIONEER_CRISPASR_CONVERTER", "models/convert-parakeet-to-gguf.py of CrispASR"),
    "transcribe-cpp": (
        "CAPTIONEER_TRANSCRIBE_CPP_CONVERTER",
        "scripts/convert-parakeet.py of transcribe.cpp (with its scripts/lib beside it)",
    ),
}
# The reference python needs these for the exports (torch + transformers are checked by machine.reference_python).
EXPORT_PACKAGES = ("onnx", "onnxruntime")
GGUF_PACKAGES = ("gguf", "sentencepiece", "yaml", "omegaconf")
NOTES = {
    "sherpa-onnx": "own fbank front end; TDT loop caps 5 tokens/frame (others 10)",
    "transcribe-cpp": "always local attention [256, 256] on full-attention checkpoints: clips over 20 s attend less",
}


def work_dir(option: Path | None) -> Path:
    if option:
        return option
    if os.environ.get(WORK_ENV):
        return Path(os.environ[WORK_ENV])
    return bench_parakeet.cache_dir().parent / "peers"


# ----------------------------------------------------------------------------------- setup


def checkpoint(work: Path, layers: int, threads: int, reference: str) -> Path:
    """bench_parakeet's full-size checkpoint (shared, in the user cache), or a reduced variant in the work dir."""
    if layers == 24:
        return bench_parakeet.ensure_model(threads, reference)
    out = work / f"checkpoint-{layers}layers"
    if not (out / "model.safetensors").is_file():
        code = (
            "import sys; sys.path.insert(0, sys.argv[1]); from pathlib import Path; "
            "from tests.bench.peers import common; common.create_reduced_model(Path(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]))"
        )
        subprocess.run([reference, "-c", code, str(ROOT), str(out), str(threads), str(layers)], check=True)
    return out


def ensure_export_packages(reference: str, packages: tuple[str, ...] = EXPORT_PACKAGES) -> None:
    probe = subprocess.run([reference, "-c", "import " + ", ".join(packages)], capture_output=True)
    if probe.returncode != 0:
        names = " ".join("pyyaml" if p == "yaml" else p for p in packages)
        raise SystemExit(
            f"the exports need {names} in the reference python: {reference} -m pip install {names}"
        )


GGML_TARGETS = {  # peer:precision → the GGUF its converter writes into the export folder
    "crispasr:f16": "crispasr-f16.gguf",
    "crispasr:q8_0": "crispasr-q8_0.gguf",
    # transcribe.cpp's converter takes the variant from the output folder's name.
    "transcribe-cpp:f32": "parakeet-tdt-0.6b-v3/transcribe-cpp-f32.gguf",
}
# transcribe.cpp's converter imports NeMo's ASRModel before it tries its own direct .nemo reader; this stand-in
# makes NeMo's loader fail at once so the converter takes that reader (what it does when NeMo rejects a model).
NEMO_STANDIN = (
    "class ASRModel:\n"
    "    @classmethod\n"
    "    def restore_from(cls, *args, **kwargs):\n"
    "        raise RuntimeError('NeMo is not installed; bench_peers uses the converter\\'s direct .nemo reader')\n"
    "    from_pretrained = restore_from\n"
)


def ggml_exports(
    out: Path,
    model: Path,
    peers: list[str],
    converters: dict[str, Path],
    threads: int,
    reference: str,
    work: Path,
) -> None:
    """The ggml ports' own converters (from their repositories: not in the wheels) run on a .nemo of the checkpoint."""
    missing = [p for p in peers if p in GGML_TARGETS and not (out / GGML_TARGETS[p]).is_file()]
    if not missing:
        return
    ensure_export_packages(reference, GGUF_PACKAGES)
    standin = work / "nemo-standin"
    (standin / "nemo" / "collections" / "asr").mkdir(parents=True, exist_ok=True)
    for package in ("nemo", "nemo/collections", "nemo/collections/asr"):
        (standin / package / "__init__.py").touch()
    (standin / "nemo" / "collections" / "asr" / "models.py").write_text(NEMO_STANDIN)
    nemo = out / "parakeet.nemo"
    env = machine.thread_env(threads)
    subprocess.run(
        [reference, str(PEERS_DIR / "export_nemo.py"), "--model", str(model), "--out", str(nemo)],
        check=True,
        env=env,
    )
    try:
        for peer in missing:
            tool, precision = peer.split(":")
            target = out / GGML_TARGETS[peer]
            target.parent.mkdir(parents=True, exist_ok=True)
            if tool == "crispasr":
                quant = [] if precision == "f16" else ["--quant", precision]
                cmd = [reference, str(converters[tool]), "--nemo", str(nemo), "--output", str(target), *quant]
                run_env = env
            else:
                cmd = [reference, str(converters[tool]), str(nemo), str(target)]
                run_env = dict(env, PYTHONPATH=str(standin))
            start = time.perf_counter()
            subprocess.run(cmd, check=True, env=run_env, stdout=subprocess.DEVNULL)
            print(f"{peer} converted by its own converter: {time.perf_counter() - start:.0f} s", flush=True)
    finally:
        nemo.unlink(missing_ok=True)  # 2.5 GB intermediate


def exports(
    work: Path, model: Path, peers: list[str], threads: int, reference: str, converters: dict[str, Path]
) -> Path:
    """One folder per checkpoint holding every peer's layout; rebuilt when the checkpoint changes."""
    stat = (model / "model.safetensors").stat()
    stamp = {"checkpoint": str(model), "size": stat.st_size, "mtime": stat.st_mtime}
    out = work / "exports" / model.name
    stamp_file = out / "checkpoint.json"
    if stamp_file.is_file() and json.loads(stamp_file.read_text()) != stamp:
        for f in out.iterdir():
            f.unlink()
    out.mkdir(parents=True, exist_ok=True)
    wanted = {p.split(":")[0] for p in peers} & {"onnx-asr", "sherpa-onnx"}
    int8 = any(p.endswith(":int8") for p in peers)
    scripts = PEERS_DIR
    need_onnx = not (out / "encoder-model.onnx").is_file() or (
        int8 and not (out / "encoder-model.int8.onnx").is_file()
    )
    if wanted and need_onnx:
        ensure_export_packages(reference)
        start = time.perf_counter()
        cmd = [
            reference,
            str(scripts / "export_onnx_asr.py"),
            "--model",
            str(model),
            "--out",
            str(out),
            "--threads",
            str(threads),
        ] + (["--int8"] if int8 else [])
        subprocess.run(cmd, check=True, env=machine.thread_env(threads))
        print(f"onnx-asr export: {time.perf_counter() - start:.0f} s", flush=True)
    if "sherpa-onnx" in wanted and not (
        (out / "joiner.onnx").is_file() and (not int8 or (out / "joiner.int8.onnx").is_file())
    ):
        ensure_export_packages(reference)
        cmd = [
            reference,
            str(scripts / "export_sherpa_onnx.py"),
            "--model",
            str(model),
            "--out",
            str(out),
            "--threads",
            str(threads),
        ] + (["--int8"] if int8 else [])
        subprocess.run(cmd, check=True, env=machine.thread_env(threads))
    ggml_exports(out, model, peers, converters, threads, reference, work)
    stamp_file.write_text(json.dumps(stamp))
    return out


def peer_python(work: Path, peer: str) -> str:
    """The peer's own venv (created with this interpreter's venv module, packages pinned), made on first use."""
    venv = work / "venvs" / peer
    python = venv / "bin" / "python"
    marker = venv / "captioneer-bench-packages.json"
    packages = PEER_PACKAGES[peer]
    if not (python.is_file() and marker.is_file() and json.loads(marker.read_text()) == packages):
        print(f"creating {venv} ({' '.join(packages)})", flush=True)
        subprocess.run([sys.executable, "-m", "venv", "--clear", str(venv)], check=True)
        subprocess.run([str(python), "-m", "pip", "install", "-q", *packages], check=True)
        marker.write_text(json.dumps(packages))
    return str(python)


# ----------------------------------------------------------------------------------- workers


class PeerWorker(bench_parakeet.Worker):
    """A peer's worker process; speaks bench_parakeet's worker protocol (run / close)."""

    def __init__(self, kind: str, python: str, model: Path, threads: int) -> None:
        peer, precision = kind.split(":")
        self._start(
            kind,
            [
                python,
                str(PEERS_DIR / "worker.py"),
                "--peer",
                peer,
                "--precision",
                precision,
                "--model",
                str(model),
                "--threads",
                str(threads),
            ],
            threads,
        )


def lcs(a: list[int], b: list[int]) -> int:
    """Length of the longest common subsequence (how many tokens agree, in order, allowing shifts)."""
    previous = [0] * (len(b) + 1)
    for x in a:
        current = [0]
        for j, y in enumerate(b):
            current.append(previous[j] + 1 if x == y else max(previous[j + 1], current[j]))
        previous = current
    return previous[-1]


def agreement(tokens: list[int], reference: list[int]) -> str:
    if tokens == reference:
        return f"identical ({len(reference)})"
    common = lcs(tokens, reference)
    return f"{100 * common / max(len(reference), len(tokens), 1):.1f}% ({len(tokens)}/{len(reference)})"


# ----------------------------------------------------------------------------------- main


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--clips", default="10,60", help="clip lengths in seconds")
    parser.add_argument(
        "--types", default="f32,q8_0", help="Captioneer storage types (f32 first: the reference)"
    )
    parser.add_argument("--peers", default=",".join(ALL_PEERS), help=f"any of {','.join(ALL_PEERS)}")
    parser.add_argument(
        "--work", type=Path, default=None, help=f"venvs and exports (default ${WORK_ENV}, else user cache)"
    )
    parser.add_argument(
        "--layers", type=int, default=24, help="encoder layers (24 = the real size; fewer: pipeline check)"
    )
    for tool, (env_name, what) in CONVERTER_ENV.items():
        parser.add_argument(
            f"--{tool}-converter",
            type=Path,
            default=os.environ.get(env_name) or None,
            help=f"{what} (default ${env_name}); without it the {tool} rows are skipped",
        )
    parser.add_argument("--setup-only", action="store_true", help="make the venvs and exports, run nothing")
    machine.add_reference_option(parser)
    args = parser.parse_args()

    machine.print_machine_header(args.threads)
    work = work_dir(args.work).resolve()
    if ROOT in (work, *work.parents):
        raise SystemExit(f"the work dir {work} is inside the repo; pass --work or ${WORK_ENV} elsewhere")
    types = args.types.split(",")
    if types[0] != "f32":
        raise SystemExit("--types must start with f32: it is the reference for ratios and agreement")
    peers = [p for p in args.peers.split(",") if p]
    unknown = [p for p in peers if p not in ALL_PEERS]
    if unknown:
        raise SystemExit(f"unknown peers {unknown}; choose from {', '.join(ALL_PEERS)}")
    converters = {tool: getattr(args, f"{tool.replace('-', '_')}_converter") for tool in CONVERTER_ENV}
    for tool, (env_name, what) in CONVERTER_ENV.items():
        if any(p.startswith(f"{tool}:") for p in peers) and not converters[tool]:
            print(
                f"{tool} skipped: its converter is not in its wheel; pass --{tool}-converter or ${env_name} ({what})",
                flush=True,
            )
            peers = [p for p in peers if not p.startswith(f"{tool}:")]
    reference = machine.reference_python(args.reference_python)
    print(f"work dir: {work}", flush=True)
    model = checkpoint(work, args.layers, args.threads, reference)
    export_dir = exports(
        work, model, peers, args.threads, reference, {k: v for k, v in converters.items() if v}
    )
    pythons = {peer: peer_python(work, peer) for peer in {p.split(":")[0] for p in peers}}
    if args.setup_only:
        return
    clips = {
        float(s): bench_parakeet.make_clip(float(s), bench_parakeet.cache_dir().parent / f"clip-{s}s.npy")
        for s in args.clips.split(",")
    }

    kinds = [f"captioneer:{t}" for t in types] + peers
    starters = {
        kind: partial(bench_parakeet.Worker, kind, model, args.threads, sys.executable)
        if kind.startswith("captioneer:")
        else partial(PeerWorker, kind, pythons[kind.split(":")[0]], export_dir, args.threads)
        for kind in kinds
    }
    results = machine.run_workers(starters, clips, args.rounds, args.threads)
    size = (model / "model.safetensors").stat().st_size
    print(
        f"Parakeet-TDT 0.6B v3 architecture ({args.layers} encoder layers), random weights ({size / 1e9:.2f} GB f32), "
        f"{args.threads} threads, {args.rounds} interleaved rounds, medians; agreement = greedy ids vs captioneer f32"
    )
    secs = list(clips)
    head = f"{'tool':14} {'precision':9}"
    for s in secs:
        head += f" {f'wall {s:.0f}s':>9} {'x RT':>6} {'vs f32':>7} {'cpu/wall':>8} {'cpu s':>7}"
    head += f" {'peak RSS':>9}  " + "  ".join(f"{f'agreement {s:.0f}s':>22}" for s in secs)
    print(head)
    ref = {s: statistics.median(r["wall"] for r in results[("captioneer:f32", s)]) for s in secs}
    ref_tokens = {s: results[("captioneer:f32", s)][-1]["tokens"] for s in secs}
    for kind in kinds:
        tool, precision = kind.split(":")
        line = f"{tool:14} {precision:9}"
        for s in secs:
            runs = results[(kind, s)]
            wall = statistics.median(r["wall"] for r in runs)
            busy = statistics.median(r["cpu"] / r["wall"] for r in runs)
            # CPU-seconds per call: less sensitive to load than wall time (ONNX Runtime's spinning counts too).
            cpu = statistics.median(r["cpu"] for r in runs)
            line += f" {wall:8.3f}s {s / wall:6.1f} {ref[s] / wall:6.2f}x {busy:8.2f} {cpu:6.3f}s"
        peak = max(r["peak_rss_mb"] for s in secs for r in results[(kind, s)])
        line += f" {peak:7.0f}MB  " + "  ".join(
            f"{agreement(results[(kind, s)][-1]['tokens'], ref_tokens[s]):>22}" for s in secs
        )
        print(line + (f"  [{NOTES[tool]}]" if tool in NOTES else ""))
    # Random weights make the greedy output nearly degenerate: say how many distinct ids the agreement rests on.
    for s in secs:
        spread = {kind: len(set(results[(kind, s)][-1]["tokens"])) for kind in kinds}
        print(
            f"distinct ids on the {s:.0f} s clip: " + ", ".join(f"{kind} {n}" for kind, n in spread.items())
        )


if __name__ == "__main__":
    main()
