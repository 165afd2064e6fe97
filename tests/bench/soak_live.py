"""Soak: an hour of speech through each live mode, on the real live path (client, worker process, stream).

Issue 28 asks that a live session never stops and never grows: the speech is espeak-ng sentences in the
demo model's vocabulary with pauses (six 10-minute recordings of different sentences), pushed in chunks as
fast as the worker answers (faster than real time where the model allows), through ``WorkerClient`` and a
``RemoteStream`` exactly as the app, the CLI and ``/live`` use them. Modes:

* ``demo-segmented``: the bundled demo model, Silero VAD segments (the app's mode for it), 320 ms pushes;
* ``parakeet-buffered``: the demo model's buffered windows (Parakeet's own live path), 320 ms pushes;
* ``r2t2-tiny``: Confucius4-R2T2 without endpointing (no window either: one segment that rolls when full) on
  the tiny fixture checkpoint, 1000 ms chunks;
* ``r2t2-full``: the same on a full-size checkpoint with random weights (``--r2t2-model DIR``, built by
  ``bench_r2t2_stream.py``), 1000 ms chunks.

Printed per minute of audio: the worker's and the client's resident memory, the per-chunk worker cost p50 and
p95; per 10-minute window the chunk cost; then the events (deltas, snapshots, speech ends, errors) and the
verdict against the targets: no error, RSS growth at most 50 MB after the first 5 minutes, mean chunk cost in
the last window within 1.2x of the second window's.

    .venv/bin/python tests/bench/soak_live.py [--minutes 60] [--modes demo-segmented,parakeet-buffered,r2t2-tiny]
        [--r2t2-model DIR] [--threads 2] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from inference.client import BacklogPolicy, WorkerClient  # noqa: E402
from inference.contract import SAMPLE_RATE, Delta, ErrorEvent, Snapshot, SpeechEnd, StreamEvent  # noqa: E402
from tests.bench.machine import machine_header, rss_mib  # noqa: E402
from tests.long_speech import recording  # noqa: E402

DEMO = REPO / "resources" / "demo_model"
R2T2_TINY = REPO / "tests" / "fixtures" / "confucius4_r2t2" / "checkpoint_hf"
RSS_GROWTH_LIMIT_MB = 50.0
COST_RATIO_LIMIT = 1.2


def speech(minutes: float) -> np.ndarray:
    parts, total, seed = [], 0, 100
    while total < minutes * 60 * SAMPLE_RATE:
        audio = recording(600.0, seed=seed).audio
        parts.append(audio)
        total += audio.size
        seed += 1
    return np.concatenate(parts)[: int(minutes * 60 * SAMPLE_RATE)]


def mode_setup(
    mode: str, r2t2_model: Path | None, scratch: Path
) -> tuple[Path, dict[str, Any], dict[str, Any], int]:
    """(model, session options, stream options, push samples) of a mode."""
    if mode == "demo-segmented":
        return DEMO, {}, {"mode": "segmented"}, 5120
    if mode == "parakeet-buffered":
        return DEMO, {}, {"mode": "native"}, 5120
    if mode in ("r2t2-tiny", "r2t2-full"):
        model = R2T2_TINY if mode == "r2t2-tiny" else r2t2_model
        if model is None:
            raise SystemExit(
                "r2t2-full needs --r2t2-model DIR (a full-size checkpoint; see bench_r2t2_stream.py)"
            )
        if model == R2T2_TINY:  # a copy whose random weights emit text after the language tag (the fixture's
            from tests.confucius4_r2t2.r2t2_fixtures import stream_variant  # streaming variant)

            model = stream_variant(R2T2_TINY, scratch / "r2t2", 800)
        # Forced language: random weights never emit a language tag (automatic mode would show nothing).
        # Endpointing off (the family's live default is on): this soaks one segment that rolls when full.
        session = {"endpointing": False}
        return model, session, {"mode": "native", "language": "English", "chunk_size_ms": 1000}, 16000
    raise SystemExit(f"unknown mode {mode!r}")


def soak(mode: str, audio: np.ndarray, threads: int, r2t2_model: Path | None) -> dict[str, Any]:
    events: list[StreamEvent] = []
    scratch = Path(tempfile.mkdtemp(prefix="captioneer-soak-"))
    model, session, stream_options, step = mode_setup(mode, r2t2_model, scratch)
    minute = 60 * SAMPLE_RATE
    rows: list[dict[str, float]] = []
    costs: list[float] = []  # worker seconds per push, in order
    started = time.monotonic()
    with WorkerClient() as client:
        engine = client.load(model, session_options=session, threads=threads)
        stream = engine.open_stream(
            on_events=events.extend, backlog=BacklogPolicy("block", max_in_flight=1), **stream_options
        )
        minute_costs: list[float] = []
        for start in range(0, audio.size, step):
            stream.push(audio[start : start + step])
            while stream.stats().backlog_s > 0:  # lockstep: each push's cost is its own
                time.sleep(0.001)
            cost = stream.push_timings()[-1][1]
            costs.append(cost)
            minute_costs.append(cost)
            if (start + step) // minute > start // minute:
                time.sleep(1.2)  # a pong carries the worker's RSS
                rows.append(
                    {
                        "minute": (start + step) // minute,
                        "worker_rss_mb": client.worker_rss / 2**20,
                        "client_rss_mb": rss_mib(),
                        "p50_ms": 1000 * statistics.median(minute_costs),
                        "p95_ms": 1000 * float(np.percentile(minute_costs, 95)),
                        "wall_s": time.monotonic() - started,
                    }
                )
                print(
                    f"  {mode} minute {rows[-1]['minute']:3d}: worker {rows[-1]['worker_rss_mb']:7.1f} MB, "
                    f"client {rows[-1]['client_rss_mb']:6.1f} MB, chunk p50 {rows[-1]['p50_ms']:7.1f} ms "
                    f"p95 {rows[-1]['p95_ms']:7.1f} ms, {rows[-1]['wall_s']:6.0f} s",
                    flush=True,
                )
                minute_costs = []
        final = stream.finish(timeout=600)
    shutil.rmtree(scratch, ignore_errors=True)
    per_push = step / SAMPLE_RATE
    window = int(600 / per_push)  # pushes per 10 minutes
    windows = [costs[i : i + window] for i in range(0, len(costs), window) if len(costs[i : i + window]) > 10]
    errors = [e for e in events if isinstance(e, ErrorEvent)]
    after_5 = [r["worker_rss_mb"] + r["client_rss_mb"] for r in rows if r["minute"] >= 5]
    growth = (max(after_5) - after_5[0]) if after_5 else 0.0
    # Mean cost per push (worker seconds per audio second, times the push length): windowed engines run the model
    # every few pushes only, so a median would compare bookkeeping, not the model's cost.
    ratio = (
        statistics.fmean(windows[-1]) / statistics.fmean(windows[1]) if len(windows) >= 3 else float("nan")
    )
    return {
        "mode": mode,
        "audio_s": audio.size / SAMPLE_RATE,
        "wall_s": time.monotonic() - started,
        "minutes": rows,
        "windows": [
            {
                "mean_ms": 1000 * statistics.fmean(w),
                "p50_ms": 1000 * statistics.median(w),
                "p95_ms": 1000 * float(np.percentile(w, 95)),
            }
            for w in windows
        ],
        "events": {
            "delta": sum(isinstance(e, Delta) for e in events),
            "snapshot": sum(isinstance(e, Snapshot) for e in events),
            "speech_end": sum(isinstance(e, SpeechEnd) for e in events),
            "error": len(errors),
        },
        "errors": [f"{e.kind}: {e.message}" for e in errors[:5]],
        "final_words": len(final.text.split()),
        "rss_growth_after_5_min_mb": growth,
        "cost_ratio_last_to_second": ratio,
        "verdict": {
            "no_error": not errors,
            "rss": growth <= RSS_GROWTH_LIMIT_MB,
            "cost": bool(ratio <= COST_RATIO_LIMIT) if ratio == ratio else None,
        },
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=60.0)
    parser.add_argument("--modes", default="demo-segmented,parakeet-buffered,r2t2-tiny")
    parser.add_argument("--r2t2-model", type=Path, default=None)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--json", type=Path, default=None, help="also write the results here")
    args = parser.parse_args()
    print(machine_header(args.threads))
    audio = speech(args.minutes)
    print(f"speech: {audio.size / SAMPLE_RATE / 60:.1f} min of espeak-ng sentences with pauses", flush=True)
    results = []
    for mode in args.modes.split(","):
        result = soak(mode, audio, args.threads, args.r2t2_model)
        results.append(result)
        print(
            f"{mode}: {result['audio_s'] / 60:.0f} min of audio in {result['wall_s']:.0f} s "
            f"(x{result['audio_s'] / result['wall_s']:.1f} real time); events {result['events']}; "
            f"RSS growth after minute 5: {result['rss_growth_after_5_min_mb']:.1f} MB; chunk cost mean per "
            f"10 min: {[round(w['mean_ms'], 1) for w in result['windows']]} ms (last/second "
            f"{result['cost_ratio_last_to_second']:.2f}); verdict {result['verdict']}",
            flush=True,
        )
        for error in result["errors"]:
            print(f"  error: {error}")
    if args.json is not None:
        args.json.write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
