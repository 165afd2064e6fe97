"""End-to-end caption latency: speech end → committed text in the session model the window draws from.

A recording is played through the app's live pipeline in real time (the same path as a microphone:
source → 320 ms pushes → worker → events → session model on the Qt thread). For every delta, latency is
the time from when the audio at the delta's end was captured to when the text reached the model.

    .venv/bin/python tests/bench/bench_caption_latency.py [--model resources/demo_model] [--modes auto,segmented]
        [--seconds 60] [--threads 2]

Quote the CPU (printed) with the figures.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from tests.bench.clips import speech_clip  # noqa: E402
from tests.bench.machine import print_machine_header  # noqa: E402

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
os.environ.setdefault("CAPTIONEER_HOME", tempfile.mkdtemp(prefix="captioneer-bench-"))


def start_dictation(controller, choice, audio, dictated: list[float], finished: list[bool]) -> None:  # type: ignore[no-untyped-def]
    """Push-to-talk on the same model in the same worker, one 4 s utterance after another, in real time."""
    import threading

    from app.dictation.capture import CaptureSettings
    from app.dictation.hotkey import HotkeyStateMachine
    from app.dictation.service import DictationService

    service = DictationService(
        lambda: controller.engine_for(choice),
        HotkeyStateMachine("hold"),
        CaptureSettings(),
        lambda *_: None,
        lambda result: dictated.append(result.latency_s),
    )

    def run() -> None:
        block, position = 480, 0
        began = time.monotonic()
        while not finished:
            t = (position // block) * block / 16000
            if t % 5.0 < 0.03:
                service.key_pressed()
            if 4.0 <= t % 5.0 < 4.03:
                service.key_released()
            delay = began + t - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            service.feed(audio[position % (audio.size - block) :][:block])
            position += block
        service.close()

    threading.Thread(target=run, daemon=True).start()


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--model", type=Path, default=REPO / "resources" / "demo_model")
    parser.add_argument("--modes", default="auto,segmented")
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--session-option", action="append", default=[], metavar="K=V")
    parser.add_argument(
        "--with-dictation",
        action="store_true",
        help="dictate 4 s utterances back to back through the same worker and model meanwhile",
    )
    args = parser.parse_args()

    from PySide6.QtCore import QCoreApplication

    from app.live.controller import LiveController
    from app.live.sources import ArraySource
    from app.model_choices import ModelChoice
    from inference.client import WorkerClient
    from inference.paths import AppPaths
    from inference.registry import FamilyRegistry

    app = QCoreApplication([sys.argv[0]])
    audio = speech_clip(args.seconds, gap_s=0.8)
    family = FamilyRegistry.from_environment().detect_family(args.model)
    options = tuple(tuple(item.split("=", 1)) for item in args.session_option)
    print_machine_header(args.threads)
    print(
        f"{args.threads} threads; model {args.model.name} ({family}); "
        f"{args.seconds:.0f} s played in real time"
    )
    for mode in args.modes.split(","):
        controller = LiveController(WorkerClient, AppPaths.from_environment().ensure().data)
        finished: list[bool] = []
        controller.session_finished.connect(lambda f=finished: f.append(True))
        choice = ModelChoice(
            args.model.name, args.model, family, options, threads=args.threads, stream_mode=mode
        )  # type: ignore[arg-type]
        started = time.monotonic()
        controller.start(choice, ArraySource(audio, "benchmark recording", speed=1.0))
        dictated: list[float] = []
        if args.with_dictation:
            start_dictation(controller, choice, audio, dictated, finished)
        while not finished and time.monotonic() - started < args.seconds * 3 + 120:
            app.processEvents()
            time.sleep(0.002)
        summary = controller.latency_summary()
        text = controller.session.committed_text.strip()
        controller.shutdown()
        if summary is None:
            print(f"  {mode:9s} no text committed")
            continue
        values = np.array(controller.latencies)
        print(
            f"  {mode:9s} latency p50 {summary[0]:.3f} s  p95 {summary[1]:.3f} s  max {values.max():.3f} s  "
            f"({values.size} deltas, {len(text.split())} words)"
            + (
                f"; {len(dictated)} dictations meanwhile, release→text p50 {np.median(dictated) * 1000:.0f} ms"
                if dictated
                else ""
            )
        )


if __name__ == "__main__":
    main()
