"""Matmul throughput of the native graph layer vs numpy's BLAS, plus the graph layer's overhead.

Run:  nice -n 10 .venv/bin/python tests/bench/bench_native.py [--reps 9] [--threads N] [--reference-python PY]
(--threads also sets numpy's BLAS threads; default: ggml uses the physical cores, numpy its own. With a
reference python (option or $CAPTIONEER_REFERENCE_PYTHON), torch's f32 ``F.linear`` (MKL) on the same shapes
is timed in a worker with the same pinned threads, interleaved with the other candidates.)

Shapes are the models': batched (weight 1024x4096, 64-512 rows: the encoders) and vector-like
(weight 2048x6144, 1-4 rows: the thinker's decode). ggml and numpy runs alternate (A/B) so that
noise from other processes hits both; figures are medians. "overhead" is the time the graph layer
adds around ggml's compute (setting the input, reading the output, Python calls) relative to
compute; the tiny-graph line gives the fixed per-call cost. Storage ``f32`` is the default path (products
with 64+ rows on OpenBLAS, inference/native/blas.py), ``f32@ggml`` ggml's own f32 product.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

# OpenBLAS worker threads spin for a while after each call; in an A/B loop that spinning steals a core from
# the ggml run that follows (measured: ggml f32 fell from ~236 to ~130 GF/s with 2 threads). Make them sleep
# almost at once so each side gets the cores it asked for.
if __name__ == "__main__":
    os.environ.setdefault("OPENBLAS_THREAD_TIMEOUT", "4")
# numpy's BLAS must use the same thread count as ggml; its pool is sized when numpy is imported.
if __name__ == "__main__" and "--threads" in sys.argv:
    _threads = sys.argv[sys.argv.index("--threads") + 1]
    for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[_var] = _threads

import numpy as np  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from inference.native import Graph, load_weights, open_backend  # noqa: E402
from tests.bench import machine  # noqa: E402

BATCHED = ((1024, 4096), (64, 128, 256, 512))
VECTOR = ((2048, 6144), (1, 2, 4))
STORAGES = ("f32", "f32@ggml", "bf16", "f16", "q8_0")  # f32: big products on OpenBLAS (native/blas.py)


def timed(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def interleaved_medians(fns: list[Callable[[], object]], reps: int) -> list[float]:
    """Run the candidates in turn (A, B, C, A, B, C, ...) and return each one's median time; a candidate
    that returns a float (a worker timing itself) is taken at its word."""
    for fn in fns:
        fn()  # warm-up
    samples: list[list[float]] = [[] for _ in fns]
    for _ in range(reps):
        for fn, times in zip(fns, samples, strict=True):
            start = time.perf_counter()
            result = fn()
            times.append(result if isinstance(result, float) else time.perf_counter() - start)
    return [statistics.median(times) for times in samples]


class TorchLinear:
    """A worker in the reference python timing torch's f32 ``F.linear`` on request (threads pinned)."""

    def __init__(self, python: str, threads: int) -> None:
        self.proc = subprocess.Popen(
            [python, __file__, "--torch-worker", "--threads", str(threads)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=machine.thread_env(threads),
        )
        print(machine.check_threads("torch", threads, json.loads(self._line())["threads"]))

    def _line(self) -> str:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line:
            raise SystemExit("the torch worker died")
        return line

    def __call__(self, rows: int, weight_shape: tuple[int, int]) -> float:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps([rows, *weight_shape]) + "\n")
        self.proc.stdin.flush()
        return float(json.loads(self._line()))

    def close(self) -> None:
        if self.proc.stdin:
            self.proc.stdin.close()
        self.proc.wait(timeout=30)


def torch_worker(threads: int) -> None:
    import torch

    effective = machine.pin_torch_threads(threads)
    print(json.dumps({"threads": effective}), flush=True)
    cache: dict[tuple[int, ...], tuple] = {}
    with torch.inference_mode():
        for line in sys.stdin:
            rows, out_dim, in_dim = json.loads(line)
            if (rows, out_dim, in_dim) not in cache:
                cache[(rows, out_dim, in_dim)] = (
                    torch.randn(rows, in_dim),
                    torch.randn(out_dim, in_dim) * 0.02,
                )
            x, w = cache[(rows, out_dim, in_dim)]
            start = time.perf_counter()
            torch.nn.functional.linear(x, w)
            print(json.dumps(time.perf_counter() - start), flush=True)


def bench_matmul(
    backend,
    storage: str,
    weight_shape: tuple[int, int],
    rows_list,
    reps: int,
    torch_linear: TorchLinear | None = None,
) -> list[dict]:
    out_dim, in_dim = weight_shape
    rng = np.random.default_rng(0)
    w = (rng.standard_normal(weight_shape) * 0.02).astype(np.float32)
    results = []
    with load_weights(backend, arrays={"w": w}, storage=storage) as store:
        for rows in rows_list:
            x = rng.standard_normal((rows, in_dim)).astype(np.float32)

            def build(g, rows=rows):
                g.output("y", g.linear(g.input("x", (rows, in_dim)), store["w"]))

            with Graph(backend, build) as graph:
                out = np.empty((rows, out_dim), np.float32)

                def io_only(graph=graph, x=x, out=out):  # what the layer adds around compute()
                    graph.set_input("x", x)
                    graph.get_output("y", out)

                fns = [lambda graph=graph, x=x: graph.run(x=x), lambda x=x: x @ w.T, io_only]
                if torch_linear is not None:
                    fns.append(lambda rows=rows: torch_linear(rows, weight_shape))
                ggml_s, numpy_s, io_s, *torch_s = interleaved_medians(fns, reps)
            flops = 2.0 * rows * in_dim * out_dim
            results.append(
                {
                    "storage": storage,
                    "weight": f"{out_dim}x{in_dim}",
                    "rows": rows,
                    "ggml_gflops": flops / ggml_s / 1e9,
                    "numpy_f32_gflops": flops / numpy_s / 1e9,
                    "ratio": numpy_s / ggml_s,
                    "overhead_pct": 100.0 * io_s / (ggml_s - io_s),
                    "torch_f32_gflops": flops / torch_s[0] / 1e9 if torch_s else float("nan"),
                }
            )
    return results


def bench_call_overhead(backend, reps: int) -> float:
    """Microseconds per run() of a one-op graph on 8 floats: the fixed cost of the Python layer."""
    x = np.ones(8, np.float32)
    with Graph(backend, lambda g: g.output("y", g.relu(g.input("x", (8,))))) as graph:
        samples = []
        for _ in range(reps):
            start = time.perf_counter()
            for _ in range(1000):
                graph.run(x=x)
            samples.append((time.perf_counter() - start) / 1000)
        run_us = statistics.median(samples) * 1e6
        samples = []
        for _ in range(reps):
            start = time.perf_counter()
            for _ in range(1000):
                graph.compute()
            samples.append((time.perf_counter() - start) / 1000)
        compute_us = statistics.median(samples) * 1e6
    print(f"tiny graph: run() {run_us:.1f} us/call, of which compute() {compute_us:.1f} us")
    return run_us


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=9)
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--backend", default="cpu")
    machine.add_reference_option(parser)
    parser.add_argument("--torch-worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.torch_worker:
        return torch_worker(args.threads)
    torch_linear = None
    if args.reference_python or os.environ.get(machine.REFERENCE_ENV):
        torch_linear = TorchLinear(machine.reference_python(args.reference_python), args.threads or 2)
    machine.print_machine_header(args.threads)
    with (
        open_backend(args.backend, threads=args.threads) as backend,
        open_backend(args.backend, threads=args.threads, gemm="ggml") as ggml_only,
    ):
        print(f"{backend}; numpy {np.__version__}; numpy BLAS pools: {machine.blas_threads()}")
        if args.threads is not None:
            print(machine.check_threads("numpy", args.threads, {"pools": machine.blas_threads()}))
        print(
            f"{'storage':9} {'weight':10} {'rows':>5} {'graph GF/s':>10} {'numpy GF/s':>11} {'ratio':>6} {'overhead':>9} "
            f"{'torch f32 GF/s':>15} {'graph/torch':>11}"
        )
        for weight_shape, rows_list in (BATCHED, VECTOR):
            for label in STORAGES:
                storage, _, gemm = label.partition("@")
                chosen = ggml_only if gemm == "ggml" else backend
                for r in bench_matmul(chosen, storage, weight_shape, rows_list, args.reps, torch_linear):
                    r["storage"] = label
                    print(
                        f"{r['storage']:9} {r['weight']:10} {r['rows']:5d} {r['ggml_gflops']:10.1f} "
                        f"{r['numpy_f32_gflops']:11.1f} {r['ratio']:6.2f} {r['overhead_pct']:8.1f}% "
                        f"{r['torch_f32_gflops']:15.1f} {r['ggml_gflops'] / r['torch_f32_gflops']:9.2f}x"
                    )
        bench_call_overhead(backend, args.reps)
    if torch_linear is not None:
        torch_linear.close()


if __name__ == "__main__":
    main()
