"""What a live push's tower costs right after its frontend: numpy's BLAS threads against ggml's.

The frontend's mel product runs on numpy's OpenBLAS. On more than one thread it wakes OpenBLAS's worker, which
spins for a while after the call (OpenBLAS's thread timeout) on a core that ggml's threads need for the tower
that follows, and each of ggml's per-node barriers then waits for the thread that lost its core. This times the
row-invariant tower (the stem over one chunk and the layers over a 3-chunk window: a live push's work) on a
full-size random checkpoint: with nothing before it, right after the frontend on numpy's default BLAS threads,
and right after the frontend on one BLAS thread (what ``R2T2Engine.one_blas_thread`` holds it to).

    env -u OPENBLAS_CORETYPE .venv/bin/python tests/bench/bench_tower_after_frontend.py [--size 0.6b]
        [--work /tmp/r2t2-live] [--tower-type q8_0] [--threads 2] [--rounds 15]
"""

from __future__ import annotations

import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests" / "bench"))

from machine import print_machine_header  # noqa: E402
from r2t2_tower_bench import open_random_engine, tower_bench_parser  # noqa: E402


def main() -> None:
    parser = tower_bench_parser(__doc__, "0.6b")
    parser.add_argument("--rounds", type=int, default=15)
    args = parser.parse_args()

    from threadpoolctl import ThreadpoolController

    from inference.families.confucius4_r2t2.audio_tower import attention_mask, chunked_mel, plan_clip
    from inference.families.confucius4_r2t2.stream_frontend import StreamingLogMel

    engine = open_random_engine(args)
    blas = ThreadpoolController()
    # numpy's own OpenBLAS (scipy_openblas64); Captioneer's OpenBLAS for ggml (scipy_openblas32) stays at 1.
    numpy_threads = [p["num_threads"] for p in blas.info() if "openblas64" in p["filepath"]]
    try:
        tower = engine.tower
        assert tower is not None
        config = tower.config
        rng = np.random.default_rng(0)
        audio = (0.1 * rng.standard_normal(3 * 16000)).astype(np.float32)
        frames = 3 * config.chunk_frames
        plan = plan_clip(frames, config)
        chunks = chunked_mel(rng.standard_normal((config.num_mel_bins, frames)).astype(np.float32), plan)
        rows = tower._stem_rows(chunks).reshape(-1, config.d_model)
        mask = attention_mask(plan)

        def frontend() -> None:
            StreamingLogMel(config.num_mel_bins, reuse=False)(audio)

        def frontend_on_one_thread() -> None:
            with blas.limit(limits=1, user_api="blas"):
                frontend()

        def push_tower() -> tuple[float, float]:
            wall, cpu = time.perf_counter(), time.process_time()
            tower._stem_rows(chunks[:1])
            tower.row_invariant_graphs.run(("body", *plan.key), rows=rows, mask=mask)
            return time.perf_counter() - wall, time.process_time() - cpu

        cases: list[tuple[str, Callable[[], None]]] = [
            ("nothing before it", lambda: None),
            (f"after the frontend, numpy's BLAS on {numpy_threads} threads", frontend),
            ("after the frontend on one BLAS thread", frontend_on_one_thread),
        ]
        timings: dict[str, list[tuple[float, float]]] = {name: [] for name, _ in cases}
        push_tower()  # graphs built and allocated before any round
        for _ in range(args.rounds):  # interleaved, so a drift in the machine touches every case alike
            for name, before in cases:
                time.sleep(0.3)  # every spinner from the previous case has gone to sleep
                before()
                timings[name].append(push_tower())
    finally:
        engine.close()
    print_machine_header(args.threads)
    print(
        f"{args.size} tower ({args.tower_type}): stem over 1 chunk + layers over a {plan.chunks}-chunk window, "
        f"medians of {args.rounds}"
    )
    for name, values in timings.items():
        wall = statistics.median(v[0] for v in values)
        cpu = statistics.median(v[1] for v in values)
        print(f"  {name:45s} {1000 * wall:7.1f} ms wall {1000 * cpu:7.1f} ms CPU")


if __name__ == "__main__":
    main()
