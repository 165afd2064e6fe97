"""What a live stream's first minute pays for new graph shapes: the row-invariant R2T2 audio tower encoding
clips of 1..8 conv chunks (one attention window) the first time and again, on a full-size random checkpoint.

A live push re-encodes its open tower window, whose size cycles through 1..8 chunks; the layers of each size are
their own ggml graph (``AudioTower.row_invariant_graphs``), built and allocated the first time it is seen, and
the conv stem runs chunk by chunk through one 1-chunk graph. Every encode here starts a fresh stem cache, so the
stem runs over every chunk in both rounds and the rounds differ only by what the first one built.

    env -u OPENBLAS_CORETYPE .venv/bin/python tests/bench/bench_tower_first_encodes.py [--size 1.7b]
        [--work /tmp/r2t2-live] [--tower-type q8_0] [--threads 2]
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests" / "bench"))

from machine import print_machine_header  # noqa: E402
from r2t2_tower_bench import open_random_engine, tower_bench_parser  # noqa: E402


def main() -> None:
    parser = tower_bench_parser(__doc__, "1.7b")
    args = parser.parse_args()

    from inference.families.confucius4_r2t2.audio_tower import StemCache

    engine = open_random_engine(args)
    try:
        tower = engine.tower
        assert tower is not None
        rng = np.random.default_rng(0)
        clips = [
            rng.standard_normal((tower.config.num_mel_bins, chunks * tower.config.chunk_frames)).astype(
                np.float32
            )
            for chunks in range(1, 9)
        ]
        timings: list[list[tuple[float, float]]] = []
        for _ in range(2):
            timings.append([])
            for mel in clips:
                wall, cpu = time.perf_counter(), time.process_time()
                tower.encode(mel, StemCache(), row_invariant=True)
                timings[-1].append((time.perf_counter() - wall, time.process_time() - cpu))
    finally:
        engine.close()
    print_machine_header(args.threads)
    print(f"{args.size} tower ({args.tower_type}), row-invariant graphs, wall / CPU seconds per encode:")
    print("  chunks | first encode  | again         | first / again (wall)")
    for chunks, (first, again) in enumerate(zip(timings[0], timings[1], strict=True), start=1):
        print(
            f"  {chunks:6d} | {first[0]:.3f} / {first[1]:.3f} | {again[0]:.3f} / {again[1]:.3f} | "
            f"{first[0] / again[0]:.2f}x"
        )
    extra = sum(f[0] for f in timings[0]) - sum(a[0] for a in timings[1])
    print(
        f"  first encodes of all 8 sizes: {sum(f[0] for f in timings[0]):.2f} s wall, {extra:.2f} s of it extra"
    )


if __name__ == "__main__":
    main()
