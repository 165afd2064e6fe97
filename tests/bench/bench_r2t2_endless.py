"""Endless Confucius4-R2T2 live captions: memory and per-chunk cost over a long stream, per configuration.

Issue 15 asks that a 10-minute stream run with flat memory and flat per-chunk cost in every configuration
that can run that long: VAD endpointing (segments close with ``speech_end`` and start a fresh state), the
rolling window without VAD (``rolling_window_seconds``: at most that much audio, the oldest half dropped with
its committed text); the engine refuses both at once. Without either, an utterance ends at the tower's ~115 s
limit with a clear error.

Each configuration runs in its own child process (so one's allocations do not hide another's) on a real
engine: by default the tiny fixture checkpoint (what grows here is state, not model size), or ``--model`` for
a full-size random checkpoint such as the one ``bench_r2t2_stream.py`` builds. The audio is the fixture's
speech clips, with pauses, repeated to ``--minutes``; it is pushed chunk by chunk as fast as the engine takes
it. Printed per minute of audio: the resident set size at its end and the median chunk latency; then the
verdict (flat: the second half of the minutes within 25 % of the cost and 64 MiB of the memory of the first
half; minute 1, which warms graph caches, is left out). Run it on a quiet machine: the load average is printed.

    .venv/bin/python tests/bench/bench_r2t2_endless.py [--minutes 10] [--chunk-ms 1000] [--model DIR]
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]
FIXTURE_MODEL = REPO / "tests" / "fixtures" / "confucius4_r2t2" / "checkpoint_hf"
sys.path.insert(0, str(REPO / "tests" / "bench"))
from machine import rss_mib  # noqa: E402

CONFIGS = {
    "endpointing": ({"endpointing": True}, {}),
    "rolling 16 s": ({}, {"rolling_window_seconds": 16.0}),
}


def speech_with_pauses(seconds: float) -> np.ndarray:
    """The fixture clips, each followed by 0.6 s of silence, repeated; quieter every other round so the
    log-mel floor moves now and then as it does with a real speaker."""
    sys.path.insert(0, str(REPO / "tests" / "confucius4_r2t2"))
    from r2t2_fixtures import load_audio

    clips = load_audio()
    pieces, total, round_no = [], 0, 0
    while total < seconds * 16000:
        for name in ("clip_a", "clip_b", "clip_short"):
            gain = np.float32(0.5 if round_no % 2 else 1.0)
            pieces += [clips[name] * gain, np.zeros(9600, np.float32)]
            total += clips[name].size + 9600
        round_no += 1
    return np.concatenate(pieces)[: int(seconds * 16000)]


def child(config: str, model: Path, minutes: float, chunk_ms: float, threads: int, thinker_type: str) -> None:
    from inference.engine import EngineRequest
    from inference.families.confucius4_r2t2.engine import create_engine

    session, request = CONFIGS[config]
    audio = speech_with_pauses(minutes * 60)
    scratch = Path(tempfile.mkdtemp(prefix="r2t2-endless-"))
    if model == FIXTURE_MODEL:  # the engine caches its thinker GGUF next to the model: keep the fixture clean
        model = Path(shutil.copytree(model, scratch / model.name))
    session = {**session, "thinker_weight_type": thinker_type}
    engine = create_engine(EngineRequest(model, "confucius4_r2t2", session, "cpu", threads))
    # Forced language: the random fixture weights never emit a language tag, and automatic mode would show nothing.
    stream = engine.open_stream(chunk_size_ms=chunk_ms, language="English", **request)
    step = round(chunk_ms / 1000 * 16000)
    per_minute: list[dict[str, float]] = []
    walls: list[float] = []
    events = 0
    for start in range(0, audio.size, step):
        began = time.perf_counter()
        events += len(stream.push(audio[start : start + step]))
        walls.append(time.perf_counter() - began)
        if (start + step) % (60 * 16000) < step:  # a minute of audio has been pushed
            per_minute.append(
                {"rss_mib": rss_mib(), "p50_ms": statistics.median(walls) * 1000, "max_ms": max(walls) * 1000}
            )
            walls = []
    final = stream.finish()
    engine.close()
    shutil.rmtree(scratch, ignore_errors=True)
    print(json.dumps({"minutes": per_minute, "events": events, "final_chars": len(final.text)}))


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument("--chunk-ms", type=float, default=1000.0)
    parser.add_argument("--model", type=Path, default=FIXTURE_MODEL)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument(
        "--thinker-type", default="native", help="thinker_weight_type, e.g. q4_k for a full-size model"
    )
    parser.add_argument(
        "--configs", default=",".join(CONFIGS), help="comma-separated subset of: " + ", ".join(CONFIGS)
    )
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child, args.model, args.minutes, args.chunk_ms, args.threads, args.thinker_type)
        return

    sys.path.insert(0, str(REPO / "tests" / "bench"))
    from machine import cpu_name

    print(
        f"CPU: {cpu_name()}; load average {Path('/proc/loadavg').read_text().split()[0]}; model {args.model}; {args.minutes:g} min of audio per configuration, "
        f"{args.chunk_ms:g} ms chunks, {args.threads} threads",
        flush=True,
    )
    for config in args.configs.split(","):
        command = [
            sys.executable,
            __file__,
            "--child",
            config,
            "--model",
            str(args.model),
            "--minutes",
            str(args.minutes),
            "--chunk-ms",
            str(args.chunk_ms),
            "--threads",
            str(args.threads),
            "--thinker-type",
            args.thinker_type,
        ]
        began = time.perf_counter()
        done = subprocess.run(command, capture_output=True, text=True, cwd=REPO)
        if done.returncode:
            print(f"{config}: failed\n{done.stderr[-3000:]}")
            continue
        result = json.loads(done.stdout.strip().splitlines()[-1])
        minutes = result["minutes"]
        print(
            f"\n{config}  ({time.perf_counter() - began:.0f} s wall, {result['events']} events, "
            f"{result['final_chars']} characters of final text)"
        )
        print("minute  RSS MiB  chunk p50 ms  chunk max ms")
        for index, row in enumerate(minutes, 1):
            print(f"{index:6d} {row['rss_mib']:8.0f} {row['p50_ms']:13.1f} {row['max_ms']:13.1f}")
        if len(minutes) >= 4:
            # Minute 1 warms the graph caches; the cost of one minute depends on where segments fall in it,
            # so the trend is judged on halves: the later minutes against minutes 2 .. n/2.
            half = len(minutes) // 2
            early, late = minutes[1:half], minutes[half:]
            early_rss, late_rss = max(r["rss_mib"] for r in early), max(r["rss_mib"] for r in late)
            early_ms = statistics.median(r["p50_ms"] for r in early)
            late_ms = statistics.median(r["p50_ms"] for r in late)
            flat_rss = late_rss - early_rss <= max(64.0, 0.25 * early_rss)
            flat_cost = late_ms <= 1.25 * early_ms
            print(
                f"memory {'flat' if flat_rss else 'GROWS'} (peak {early_rss:.0f} → {late_rss:.0f} MiB), chunk cost "
                f"{'flat' if flat_cost else 'GROWS'} (median of minute medians {early_ms:.1f} → {late_ms:.1f} ms)"
            )


if __name__ == "__main__":
    main()
