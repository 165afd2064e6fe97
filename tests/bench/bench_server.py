"""What ``captioneer serve`` delivers: file requests per second and latency, and the live route's delay.

* **files**: a 5 s speech clip (the bundled samples) posted by 1, 2 and 4 concurrent clients (httpx, one
  connection each) to a real uvicorn server on 127.0.0.1 with the bundled demo model in one worker;
  requests per second over the level, p50 and p95 latency per request (upload to answer).
* **live**: the same kind of speech fed to ``/v1/audio/transcriptions/live`` in real time (s16le,
  0.1 s chunks); for each ``transcript.text.delta`` and ``partial``, its arrival time minus the time the
  audio up to the end of its text (``end``) had been sent: how long committed (delta) and provisional
  (partial) text lag behind the speaker. The model's commit policy (its right context) dominates deltas.

    .venv/bin/python tests/bench/bench_server.py [--requests 24] [--threads 2] [--live-seconds 20]

Quote the CPU (printed) with the figures. The server listens on loopback only.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from inference.contract import SAMPLE_RATE  # noqa: E402
from tests.bench.clips import speech_clip  # noqa: E402
from tests.bench.machine import print_machine_header  # noqa: E402

DEMO = REPO / "resources" / "demo_model"
LIVE_CHUNK_S = 0.1


def percentile(values: list[float], q: float) -> float:
    return float(np.percentile(np.asarray(values), q))


def bench_files(url: str, wav: bytes, clients: int, requests: int) -> tuple[float, list[float]]:
    """``requests`` posts shared among ``clients`` threads; returns (requests per second, latencies)."""
    import httpx

    latencies: list[float] = []
    lock = threading.Lock()
    remaining = [requests]
    failures: list[str] = []

    def client() -> None:
        with httpx.Client(base_url=url, timeout=120) as http:
            while True:
                with lock:
                    if remaining[0] == 0:
                        return
                    remaining[0] -= 1
                started = time.perf_counter()
                response = http.post(
                    "/v1/audio/transcriptions",
                    data={"model": "demo"},
                    files={"file": ("clip.wav", wav, "audio/wav")},
                )
                elapsed = time.perf_counter() - started
                with lock:
                    if response.status_code != 200:
                        failures.append(f"{response.status_code} {response.text}")
                    latencies.append(elapsed)

    threads = [threading.Thread(target=client) for _ in range(clients)]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    wall = time.perf_counter() - started
    if failures:
        raise SystemExit(f"{len(failures)} requests failed, e.g. {failures[0]}")
    return requests / wall, latencies


def bench_live(url: str, audio: np.ndarray) -> tuple[dict[str, list[float]], str]:
    from tests.server.harness import s16le
    from tests.server.live_client import post_live, split

    pieces = split(s16le(audio), int(LIVE_CHUNK_S * SAMPLE_RATE) * 2)
    handed_at: list[float] = []  # time.monotonic() when piece i was handed to the socket

    def paced() -> Iterator[bytes]:
        for piece in pieces:
            handed_at.append(time.monotonic())
            yield piece

    result = post_live(url, {"model": "demo"}, paced(), pace_s=LIVE_CHUNK_S, timeout_s=300)
    if result.status != 200 or not result.done_marker:
        raise SystemExit(f"the live request failed: {result.status} {result.raw_body[:300]!r}")
    lags: dict[str, list[float]] = {"delta": [], "partial": []}
    for kind, values in lags.items():
        for event in result.of_type(f"transcript.text.{kind}"):
            if "end" not in event:
                continue
            last_piece = min(max(int(np.ceil(event["end"] / LIVE_CHUNK_S)) - 1, 0), len(handed_at) - 1)
            values.append(result.started_at + event["_at"] - handed_at[last_piece])
    return lags, result.events[-1].get("text", "")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--requests", type=int, default=24, help="file requests per concurrency level")
    parser.add_argument("--threads", type=int, default=2, help="CPU threads of the worker")
    parser.add_argument("--live-seconds", type=float, default=20.0)
    args = parser.parse_args()

    from inference.models.spec import load_family_spec
    from inference.server.config import ServerConfig
    from inference.server.registry import ModelRegistry, ServedModel
    from tests.server.harness import running_server, wav_bytes

    print_machine_header(args.threads)
    print(f"worker threads: {args.threads}; model: bundled demo (Parakeet-TDT family)")
    registry = ModelRegistry(
        [ServedModel("demo", DEMO, "parakeet_tdt", load_family_spec("parakeet_tdt"), ("en",), 8)]
    )
    registry.start(threads=args.threads)
    try:
        with running_server(ServerConfig(max_concurrent=8), registry) as url:
            wav = wav_bytes(speech_clip(5.0))
            bench_files(url, wav, 1, 3)  # warm-up
            print(f"files: 5 s clip, {args.requests} requests per level")
            print(f"{'clients':>8} {'req/s':>8} {'p50 ms':>8} {'p95 ms':>8}")
            for clients in (1, 2, 4):
                rate, latencies = bench_files(url, wav, clients, args.requests)
                print(
                    f"{clients:>8} {rate:>8.2f} {percentile(latencies, 50) * 1000:>8.0f} "
                    f"{percentile(latencies, 95) * 1000:>8.0f}"
                )
            lags, text = bench_live(url, speech_clip(args.live_seconds))
            print(
                f"live: {args.live_seconds:g} s fed in real time in {LIVE_CHUNK_S * 1000:.0f} ms chunks; "
                "lag of each event behind the audio it covers (arrival - when that audio was sent):"
            )
            for kind, values in lags.items():
                if values:
                    print(
                        f"  {kind:>8}: {len(values)} events, p50 {statistics.median(values) * 1000:.0f} ms, "
                        f"p95 {percentile(values, 95) * 1000:.0f} ms, max {max(values) * 1000:.0f} ms"
                    )
                else:
                    print(f"  {kind:>8}: none carried audio times")
            print(f"live final text: {text[:80]}...")
    finally:
        registry.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
