"""How much each implementation slows down when other processes compete for the cores.

The full-size Parakeet-TDT 0.6B v3 encoder (random weights, the numpy checkpoint of
``bench_parakeet_stream.py``) on a ``--seconds`` clip, in three worker processes with the same pinned
threads: Captioneer (ggml), torch as ``bench_parakeet.py`` runs it (OpenMP's default active wait), and
torch with ``OMP_WAIT_POLICY=passive`` (what Captioneer sets for ggml's OpenMP). Each round runs every
worker with no extra load, then next to ``--hogs`` busy-loop processes; the table gives medians and the
slowdown under load. A comparison measured on a shared machine inherits these slowdowns, so a ratio
between implementations moves with the load even when nothing else changes.

    .venv/bin/python tests/bench/bench_load_sensitivity.py --reference-python .venv-ref/bin/python \\
        [--threads 2] [--hogs 2] [--rounds 3] [--seconds 10]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests" / "bench"))

from tests.bench import machine  # noqa: E402


def serve(kind: str, model: Path, features: Path, threads: int) -> None:
    """Worker: encode the saved features once per stdin line, reply wall and CPU seconds."""
    feats = np.load(features)
    valid = int(np.load(features.with_name("valid.npy")))
    if kind == "ggml":
        from inference.engine import load_engine

        engine = load_engine(model, "parakeet_tdt", {"weight_type": "f32"}, backend="cpu", threads=threads)
        effective = {"ggml_threads": engine.backend.threads}

        def run() -> None:
            engine.encoder.encode(feats, valid)
    else:
        import torch
        from transformers import ParakeetForTDT

        effective = machine.pin_torch_threads(threads)
        net = ParakeetForTDT.from_pretrained(model, dtype=torch.float32).eval()
        x = torch.from_numpy(feats)[None]
        mask = torch.from_numpy((np.arange(feats.shape[0]) < valid).astype(np.int64))[None]

        def run() -> None:
            with torch.inference_mode():
                net.encoder(input_features=x, attention_mask=mask)

    run()  # warm-up
    print(json.dumps({"ready": True, "threads": effective}), flush=True)
    for _ in sys.stdin:
        start, cpu = time.perf_counter(), machine.process_cpu_seconds()
        run()
        wall = time.perf_counter() - start
        print(json.dumps({"wall": wall, "cpu": machine.process_cpu_seconds() - cpu}), flush=True)


class Worker:
    def __init__(
        self, kind: str, python: str, env: dict[str, str], args: argparse.Namespace, features: Path
    ) -> None:
        self.kind = kind
        self.proc = subprocess.Popen(
            [
                python,
                __file__,
                "--serve",
                kind.split()[0],
                "--model",
                str(args.model),
                "--features",
                str(features),
                "--threads",
                str(args.threads),
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=env,
        )
        ready = json.loads(self._line())
        print(machine.check_threads(kind, args.threads, ready["threads"]), flush=True)

    def _line(self) -> str:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line:
            raise SystemExit(f"worker {self.kind} died (exit {self.proc.wait()})")
        return line

    def run(self) -> dict:
        assert self.proc.stdin is not None
        self.proc.stdin.write("run\n")
        self.proc.stdin.flush()
        return json.loads(self._line())

    def close(self) -> None:
        if self.proc.stdin:
            self.proc.stdin.close()
        self.proc.wait(timeout=60)


def start_hogs(count: int) -> list[subprocess.Popen]:
    return [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(count)]


def stop_hogs(hogs: list[subprocess.Popen]) -> None:
    for hog in hogs:
        hog.terminate()
    for hog in hogs:
        hog.wait(timeout=10)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--hogs", type=int, default=2, help="busy-loop processes in the loaded condition")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=10.0)
    machine.add_reference_option(parser)
    parser.add_argument("--serve", help=argparse.SUPPRESS)
    parser.add_argument("--model", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--features", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        return serve(args.serve, args.model, args.features, args.threads)

    from bench_parakeet_stream import ensure_model
    from clips import speech_clip

    from inference.families.parakeet_tdt.config import parse_config
    from inference.families.parakeet_tdt.frontend import compute_features
    from inference.paths import AppPaths

    machine.print_machine_header(args.threads)
    reference = machine.reference_python(args.reference_python)
    args.model = ensure_model()
    work = AppPaths.from_environment().cache / "bench" / "load_sensitivity"
    work.mkdir(parents=True, exist_ok=True)
    config = parse_config(json.loads((args.model / "config.json").read_text()), None, "config.json")
    features = compute_features(speech_clip(args.seconds), config.features)
    np.save(work / "features.npy", features.values)
    np.save(work / "valid.npy", np.asarray(features.valid_frames))
    env = machine.thread_env(args.threads)
    workers = [
        Worker("ggml", sys.executable, env, args, work / "features.npy"),
        Worker("torch (OpenMP default wait)", reference, env, args, work / "features.npy"),
        Worker(
            "torch (OMP_WAIT_POLICY=passive)",
            reference,
            dict(env, OMP_WAIT_POLICY="passive"),
            args,
            work / "features.npy",
        ),
    ]
    results: dict[tuple[str, str], list[dict]] = {}
    try:
        for round_no in range(args.rounds):
            for condition in ("alone", f"+{args.hogs} busy loops"):
                hogs = start_hogs(args.hogs) if condition != "alone" else []
                try:
                    order = workers if round_no % 2 == 0 else workers[::-1]
                    for worker in order:
                        results.setdefault((worker.kind, condition), []).append(worker.run())
                finally:
                    stop_hogs(hogs)
            print(f"round {round_no + 1}/{args.rounds} done", flush=True)
    finally:
        for worker in workers:
            worker.close()
    print()
    machine.print_machine_header(args.threads)
    print(
        f"Parakeet-TDT 0.6B v3 encoder (f32, random weights), {args.seconds:g} s clip, {args.threads} threads, "
        f"medians of {args.rounds} interleaved rounds"
    )
    print(
        f"{'implementation':34} {'alone s':>8} {'cpu/wall':>8} {'loaded s':>9} {'cpu/wall':>8} {'slowdown':>9}"
    )
    for worker in workers:
        alone, loaded = results[(worker.kind, "alone")], results[(worker.kind, f"+{args.hogs} busy loops")]
        a, b = statistics.median(r["wall"] for r in alone), statistics.median(r["wall"] for r in loaded)
        ca = statistics.median(r["cpu"] / r["wall"] for r in alone)
        cb = statistics.median(r["cpu"] / r["wall"] for r in loaded)
        print(f"{worker.kind:34} {a:8.3f} {ca:8.2f} {b:9.3f} {cb:8.2f} {b / a:8.2f}x")


if __name__ == "__main__":
    main()
