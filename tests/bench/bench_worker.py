"""What the process boundary costs: the inference worker against calling the engine in-process.

Two measurements, interleaved round by round so a slow spell of the machine hits both sides:

* **per chunk**: 320 ms pushes to a live stream, one at a time (each waits for its answer). The
  worker reports its own compute per push, so the boundary's cost is the round trip minus that compute
  (serialising, the pipe, waking threads). Engines: the faulty test engine (no compute: the pure
  boundary) and the bundled demo model (VAD + Parakeet per closed segment). Targets: p50 <= 2 ms.
* **offline**: one 60 s file transcribed by the demo model in the worker vs in-process. Target: <= 2 %.

    .venv/bin/python tests/bench/bench_worker.py [--rounds 5] [--chunks 200] [--threads 2]

Quote the CPU (printed) with the figures.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from inference.client import BacklogPolicy, RemoteStream, WorkerClient  # noqa: E402
from inference.contract import SAMPLE_RATE  # noqa: E402
from inference.engine import EngineRequest, load_engine  # noqa: E402
from tests.bench.clips import speech_clip  # noqa: E402
from tests.bench.machine import print_machine_header  # noqa: E402

DEMO = REPO / "resources" / "demo_model"
FAULTY = "tests.worker.faulty_engine:create_engine"
CHUNK_S = 0.32


def remote_chunks(stream: RemoteStream, audio: np.ndarray, chunks: int) -> tuple[list[float], list[float]]:
    """Round trip and boundary overhead (round trip - worker compute) per push, one push at a time."""
    step = int(CHUNK_S * SAMPLE_RATE)
    for i in range(chunks):
        start = (i * step) % (audio.size - step)
        stream.push(audio[start : start + step])
        while stream.stats().backlog_s > 0:
            time.sleep(0)
    timings = stream.push_timings()[-chunks:]
    return [t[0] for t in timings], [t[0] - t[1] for t in timings]


def local_chunks(stream: object, audio: np.ndarray, chunks: int) -> list[float]:
    step = int(CHUNK_S * SAMPLE_RATE)
    out = []
    for i in range(chunks):
        start = (i * step) % (audio.size - step)
        began = time.perf_counter()
        stream.push(audio[start : start + step])  # type: ignore[attr-defined]
        out.append(time.perf_counter() - began)
    return out


def pct(values: list[float], q: float) -> float:
    return float(np.percentile(values, q)) * 1000.0


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--chunks", type=int, default=200)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--offline-seconds", type=float, default=60.0)
    args = parser.parse_args()
    audio = speech_clip(args.offline_seconds)
    print_machine_header(args.threads)
    print(f"{args.threads} threads; {args.rounds} interleaved rounds; 320 ms chunks")

    from inference.audio.vad import SileroVad
    from inference.streaming import SegmentedStream
    from tests.worker.faulty_engine import FaultyEngine

    local_demo = load_engine(DEMO, threads=args.threads)
    local_faulty = FaultyEngine(EngineRequest(Path("unused"), "faulty"))
    results: dict[str, list[float]] = {
        k: []
        for k in (
            "faulty rt p50",
            "faulty rt p95",
            "faulty overhead p50",
            "faulty local p50",
            "demo rt p50",
            "demo rt p95",
            "demo overhead p50",
            "demo local p50",
            "offline worker s",
            "offline local s",
        )
    }
    with WorkerClient() as client:
        remote_faulty = client.load("unused", factory=FAULTY)
        remote_demo = client.load(DEMO, threads=args.threads)
        one_at_a_time = BacklogPolicy(max_in_flight=1)
        for _ in range(args.rounds):
            stream = remote_faulty.open_stream(backlog=one_at_a_time)
            rt, overhead = remote_chunks(stream, audio, args.chunks)
            stream.cancel()
            local = local_chunks(local_faulty.open_stream(), audio, args.chunks)
            results["faulty rt p50"].append(pct(rt, 50))
            results["faulty rt p95"].append(pct(rt, 95))
            results["faulty overhead p50"].append(pct(overhead, 50))
            results["faulty local p50"].append(pct(local, 50))

            stream = remote_demo.open_stream(backlog=one_at_a_time)
            rt, overhead = remote_chunks(stream, audio, args.chunks)
            stream.cancel()
            local = local_chunks(SegmentedStream(local_demo, SileroVad()), audio, args.chunks)
            results["demo rt p50"].append(pct(rt, 50))
            results["demo rt p95"].append(pct(rt, 95))
            results["demo overhead p50"].append(pct(overhead, 50))
            results["demo local p50"].append(pct(local, 50))

            began = time.perf_counter()
            remote_text = remote_demo.transcribe(audio).text
            results["offline worker s"].append(time.perf_counter() - began)
            began = time.perf_counter()
            local_text = local_demo.transcribe(audio).text
            results["offline local s"].append(time.perf_counter() - began)
            assert remote_text == local_text, "the worker and in-process results differ"
    local_demo.close()

    def med(key: str) -> float:
        return statistics.median(results[key])

    print("per 320 ms chunk (ms, medians over rounds):")
    for engine in ("faulty", "demo"):
        print(
            f"  {engine:6s} round trip p50 {med(engine + ' rt p50'):7.3f}  p95 {med(engine + ' rt p95'):7.3f}  "
            f"boundary overhead p50 {med(engine + ' overhead p50'):6.3f}  in-process push p50 "
            f"{med(engine + ' local p50'):7.3f}"
        )
    worker_s, local_s = med("offline worker s"), med("offline local s")
    pairs = zip(results["offline worker s"], results["offline local s"], strict=True)
    rounds = ", ".join(f"{remote:.3f}/{local:.3f}" for remote, local in pairs)
    print(
        f"offline {args.offline_seconds:.0f} s clip: worker {worker_s:.3f} s, in-process {local_s:.3f} s, "
        f"overhead {100 * (worker_s / local_s - 1):+.2f} %  (rounds, worker/in-process: {rounds})"
    )


if __name__ == "__main__":
    main()
