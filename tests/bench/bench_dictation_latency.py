"""Push-to-talk latency: key release → text, for 2–5 s utterances, through the worker.

Each utterance plays in real time as the microphone; the key goes down 0.2 s before the speech and comes
up right after it. The figure includes the trailing capture (default 300 ms of real audio after release),
the zero padding and the transcription, exactly as a user waits for it.

    .venv/bin/python tests/bench/bench_dictation_latency.py [--model resources/demo_model] [--utterances 12]
        [--threads 2] [--session-option weight_type=q8_0] [--seconds 5]

Quote the CPU (printed) with the figures.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import threading
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from app.dictation.capture import CaptureSettings  # noqa: E402
from app.dictation.hotkey import HotkeyStateMachine  # noqa: E402
from app.dictation.service import DictationResult, DictationService  # noqa: E402
from inference.audio.io import load_audio_file  # noqa: E402
from inference.client import WorkerClient  # noqa: E402
from inference.contract import SAMPLE_RATE  # noqa: E402
from tests.bench.machine import print_machine_header  # noqa: E402

BLOCK = 480  # 30 ms, as a sound card delivers


def play(service: DictationService, audio: np.ndarray) -> None:
    """Feed ``audio`` in real time."""
    started = time.monotonic()
    for index, start in enumerate(range(0, audio.size, BLOCK)):
        delay = started + index * BLOCK / SAMPLE_RATE - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        service.feed(audio[start : start + BLOCK])


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--model", type=Path, default=REPO / "resources" / "demo_model")
    parser.add_argument("--utterances", type=int, default=12)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--session-option", action="append", default=[], metavar="K=V")
    parser.add_argument(
        "--seconds", type=float, help="every utterance this long (the samples looped with 0.3 s gaps)"
    )
    args = parser.parse_args()
    clips = [load_audio_file(REPO / "resources" / "samples" / f"demo_sample_{i}.wav") for i in (1, 2)]
    gap = np.zeros(int(0.3 * SAMPLE_RATE), np.float32)
    if args.seconds:
        looped = np.tile(np.concatenate([clips[0], gap, clips[1], gap]), 1 + int(args.seconds) // 2)
        utterances = [looped[: int(args.seconds * SAMPLE_RATE)]] * args.utterances
    else:
        utterances = [
            clips[i % 2] if i % 3 else np.concatenate([clips[0], gap, clips[1]][: 1 + i % 2])
            for i in range(args.utterances)
        ]
    options = dict(item.split("=", 1) for item in args.session_option)
    print_machine_header(args.threads)
    print(
        f"{args.threads} threads; model {args.model.name}; "
        f"utterances {min(u.size for u in utterances) / SAMPLE_RATE:.1f}–{max(u.size for u in utterances) / SAMPLE_RATE:.1f} s"
    )
    with WorkerClient() as client:
        engine = client.load(args.model, session_options=options, threads=args.threads)
        results: list[DictationResult] = []
        ready = threading.Event()

        def on_result(result: DictationResult) -> None:
            results.append(result)
            ready.set()

        service = DictationService(
            lambda: engine, HotkeyStateMachine("hold"), CaptureSettings(), lambda *_: None, on_result
        )
        engine.transcribe(clips[0])  # warm-up: first-call graph allocation is not what users wait for
        silence = np.zeros(int(0.6 * SAMPLE_RATE), np.float32)
        for utterance in utterances:
            ready.clear()
            play(service, silence[: int(0.4 * SAMPLE_RATE)])
            service.key_pressed()
            play(service, np.concatenate([silence[: int(0.2 * SAMPLE_RATE)], utterance]))
            service.key_released()
            play(service, silence)  # the trailing capture takes what it needs from this
            if not ready.wait(60):
                raise SystemExit("no result within 60 s")
        service.close()
    latencies = sorted(r.latency_s for r in results)
    p95 = latencies[min(len(latencies) - 1, round(0.95 * (len(latencies) - 1)))]
    print(
        f"release → text: p50 {statistics.median(latencies) * 1000:.0f} ms, p95 {p95 * 1000:.0f} ms, "
        f"max {latencies[-1] * 1000:.0f} ms over {len(latencies)} utterances (300 ms trailing capture included)"
    )
    print("texts:", " | ".join(r.text for r in results[:4]), "…")


if __name__ == "__main__":
    main()
