"""Captions through a real sound server: latency from a sentence's last word played into PulseAudio to its
committed text, and the CPU that capture alone costs.

A private PulseAudio is started (tests/sound_server.py); `captioneer transcribe --input system --mode streaming
--format jsonl` captions its speakers' monitor while espeak-ng sentences are played with paplay. Latency per
sentence = arrival of the sentence's last delta − (paplay's start + the speech's duration): it includes paplay's
connection set-up (a few ms), so it errs long.

    .venv/bin/python tests/bench/bench_sound_server.py [--model resources/demo_model] [--sentences 8]
        [--capture-seconds 20]

Quote the CPU (printed) with the figures.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import soundfile

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from tests.bench.machine import print_machine_header  # noqa: E402
from tests.live_cli import LiveCli  # noqa: E402
from tests.sound_server import SPEAKERS, start_sound_server  # noqa: E402

SENTENCES = [
    "The quick brown fox jumps over the lazy dog.",
    "There are twenty hearts in the garden.",
    "Please call Stella and ask her to bring these things.",
    "Emma quickly closed the early bottle and sang.",
]
QUIET_S = 3.0  # no new delta for this long: the sentence is done
CAPTURE_CHILD = """
import resource, sys, time
from inference.audio.devices import SoundServerCapture
seconds = float(sys.argv[1])
capture = SoundServerCapture("system")
blocks = []
capture.start(lambda b: blocks.append(b.size), lambda reason: None)
before, began = resource.getrusage(resource.RUSAGE_SELF), time.monotonic()
time.sleep(seconds)
after, wall = resource.getrusage(resource.RUSAGE_SELF), time.monotonic() - began
capture.stop()
cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
print(f"{cpu / wall * 100:.2f} {sum(blocks) / 16000 / wall:.3f}")
"""


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", default=None)
    parser.add_argument("--sentences", type=int, default=8)
    parser.add_argument("--capture-seconds", type=float, default=20.0)
    args = parser.parse_args()
    print_machine_header()
    folder = Path(tempfile.mkdtemp(prefix="captioneer-sound-bench-"))
    servers = start_sound_server(folder / "sound")
    server = next(servers)
    env = dict(server.env, CAPTIONEER_HOME=str(folder / "home"))
    try:
        wavs = []
        for index, sentence in enumerate(SENTENCES):
            wav = folder / f"s{index}.wav"
            subprocess.run(["espeak-ng", "-s", "150", "-w", str(wav), sentence], check=True)
            wavs.append((wav, soundfile.info(str(wav)).duration))

        cpu = subprocess.run(
            [sys.executable, "-c", CAPTURE_CHILD, str(args.capture_seconds)],
            cwd=REPO, env=env, capture_output=True, text=True, check=True,
        ).stdout.split()  # fmt: skip
        print(f"capture alone (system audio, 16 kHz mono, 30 ms blocks): {cpu[0]}% of one core, "
              f"{cpu[1]} s of audio per second")  # fmt: skip

        model = ["--model", args.model] if args.model else []
        cli = LiveCli(
            ["transcribe", "--input", "system", "--mode", "streaming", "--format", "jsonl", *model], env
        )
        cli.wait_note("listening on")
        latencies = []
        for index in range(args.sentences):
            wav, duration = wavs[index % len(wavs)]
            seen = len(cli.events)
            started = time.monotonic()
            server.play(wav, SPEAKERS)
            spoken_end = started + duration
            cli.wait_for(
                "a delta", lambda seen=seen: any(e.get("type") == "delta" for e in cli.events[seen:])
            )
            while True:  # until the sentence's text stops growing
                last = max(float(str(e["_at"])) for e in cli.events[seen:] if e.get("type") == "delta")
                if time.monotonic() - last > QUIET_S:
                    break
                time.sleep(0.2)
            latencies.append(last - spoken_end)
            print(f"  sentence {index}: {latencies[-1] * 1000:.0f} ms", flush=True)
        final = cli.interrupt()
        values = sorted(latencies)
        p95 = values[min(len(values) - 1, round(0.95 * (len(values) - 1)))]
        print(f"last word played -> committed: p50 {statistics.median(values) * 1000:.0f} ms, "
              f"p95 {p95 * 1000:.0f} ms over {len(values)} sentences ({args.model or 'default model'})")  # fmt: skip
        print(f"final text: {final['text']}")
    finally:
        servers.close()
        os.environ.pop("CAPTIONEER_HOME", None)


if __name__ == "__main__":
    main()
