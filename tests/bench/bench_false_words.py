"""False words per minute of the bundled demo model on non-speech (silence, noise, tones, hum, chords, clicks),
through its speech gate (the default) and without it (``audio_chunk_mode=none``), offline and live.

    .venv/bin/python tests/bench/bench_false_words.py [--seconds-per-kind 60]

Ten kinds x 60 s = 10 minutes per path. Not a speed benchmark: the figure is a count, so load does not matter.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from inference.client import BacklogPolicy, RemoteEngine, WorkerClient  # noqa: E402
from inference.contract import SAMPLE_RATE  # noqa: E402
from inference.engine import load_engine  # noqa: E402
from tests.bench.machine import print_machine_header  # noqa: E402
from tests.nonspeech import KINDS, nonspeech  # noqa: E402

MODEL = Path(__file__).resolve().parents[2] / "resources" / "demo_model"


def live_text(remote: RemoteEngine, audio: np.ndarray) -> str:
    stream = remote.open_stream(backlog=BacklogPolicy("block", max_in_flight=4, max_backlog_s=10.0))
    step = int(0.32 * SAMPLE_RATE)
    for start in range(0, audio.size, step):
        stream.push(audio[start : start + step])
    return stream.finish(timeout=600).text


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds-per-kind", type=float, default=60.0)
    args = parser.parse_args()
    print_machine_header(threads=2)
    totals = {"gated": 0, "ungated": 0, "live": 0}
    print(f"{'kind':12s} {'gated':>6s} {'ungated':>8s} {'live':>5s}  ungated text (start)")
    with load_engine(MODEL, threads=2) as engine, WorkerClient() as client:  # type: ignore[attr-defined]
        remote = client.load(str(MODEL))
        for kind in KINDS:
            audio = nonspeech(kind, args.seconds_per_kind)
            gated = engine.transcribe(audio).text.split()
            ungated = engine.transcribe(audio, audio_chunk_mode="none").text
            live = live_text(remote, audio).split()
            counts = {"gated": len(gated), "ungated": len(ungated.split()), "live": len(live)}
            for key, value in counts.items():
                totals[key] += value
            print(
                f"{kind:12s} {counts['gated']:6d} {counts['ungated']:8d} {counts['live']:5d}  {ungated[:50]!r}"
            )
    minutes = len(KINDS) * args.seconds_per_kind / 60
    print(
        f"false words per minute over {minutes:g} min: "
        + ", ".join(f"{k} {v / minutes:.2f}" for k, v in totals.items())
    )


if __name__ == "__main__":
    main()
