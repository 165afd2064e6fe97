"""Through a real sound server: caption latency in the window, dictation release → text, and the CPU that capture
alone costs.

A private PulseAudio is started (tests/sound_server.py) and espeak-ng sentences are played with paplay.

* Capture alone: ``SoundServerCapture("system")`` in a child, CPU per wall second over ``--capture-seconds``.
* Caption latency in the window, per model (``--models``; default: the demo model and the tiny Parakeet-TDT
  fixture ``tests/fixtures/parakeet_tdt/models/tiny_a``): the caption window (offscreen, the real worker,
  tests/bench/sound_window_latency_child.py) captions "What this computer plays" while sentences are played into
  the speakers. Latency per sentence = the moment the session model last committed text for it − (paplay's
  start + the speech's length, espeak-ng's trailing silence cut off): the last word played → committed in the
  window. It includes paplay's connection set-up (a few ms), so it errs long. Also printed: the controller's own per-delta figure, each delta's audio
  captured (arrived from the sound server) → committed. The tiny fixture has random weights: its text is not
  English and it keeps committing after a sentence, so its "last word played" figure measures that, not the
  pipeline; a sentence it commits nothing for is counted apart ("no text"). Its per-delta figure is the
  meaningful one.
* Dictation (``--dictations``, needs Xvfb and xdotool): push-to-talk through the real device and X server
  (tests/app/xvfb_sound_dictation_child.py, the demo model): Ctrl+Alt+Space held with XTest while a sentence is
  played into the virtual microphone, released when paplay returns. Release → text ready (the service's own
  clock) and release → text in the Qt field (this process's clock, as the child reports it).

    .venv/bin/python tests/bench/bench_sound_server.py [--models DIR ...] [--sentences 8] [--dictations 6]
        [--capture-seconds 20]

Quote the CPU and the load averages (printed) with the figures.
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
from tests.live_cli import JsonLinesChild  # noqa: E402
from tests.sound_server import (  # noqa: E402
    MIC_FEED,
    SPEAKERS,
    SoundServer,
    start_sound_server,
    without_trailing_silence,
)

SENTENCES = [
    "The quick brown fox jumps over the lazy dog.",
    "There are twenty hearts in the garden.",
    "Please call Stella and ask her to bring these things.",
    "Emma quickly closed the early bottle and sang.",
]
QUIET_S = 3.0  # no new commit for this long: the sentence is done
NOTHING_S = 15.0  # no commit at all this long after a sentence: the model made no text of it
DEFAULT_MODELS = [
    REPO / "resources" / "demo_model",
    REPO / "tests" / "fixtures" / "parakeet_tdt" / "models" / "tiny_a",
]
CAPTURE_CHILD = """
import resource, sys, time
from inference.audio.devices import SoundServerCapture
seconds = float(sys.argv[1])
capture = SoundServerCapture("system")
blocks = []
opened = time.monotonic()
capture.start(lambda b: blocks.append(b.size), lambda reason: None)
capture.wait_until_delivering()  # a new stream's first audio comes late: count from when it flows
before, began = resource.getrusage(resource.RUSAGE_SELF), time.monotonic()
at_start = sum(blocks)
time.sleep(seconds)
after, wall = resource.getrusage(resource.RUSAGE_SELF), time.monotonic() - began
capture.stop()
cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
print(f"{cpu / wall * 100:.2f} {(sum(blocks) - at_start) / 16000 / wall:.3f} {began - opened:.2f}")
"""


def load() -> str:
    return "load average " + " ".join(f"{value:.1f}" for value in os.getloadavg())


def percentiles(values: list[float]) -> str:
    if not values:
        return "no values"
    ordered = sorted(values)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    return f"p50 {statistics.median(ordered) * 1000:.0f} ms, p95 {p95 * 1000:.0f} ms over {len(ordered)}"


def wait_quietly(child: JsonLinesChild, seen: int, kind: str) -> float | None:
    """When the child last reported ``kind`` after event ``seen``, once it went quiet; None if it never did."""

    def reported() -> bool:
        return any(e.get("event") == kind for e in child.events[seen:])

    try:
        child.wait_for(f"a {kind} report", reported, NOTHING_S)
    except AssertionError:
        return None
    while True:
        last = max(float(str(e["_at"])) for e in child.events[seen:] if e.get("event") == kind)
        if time.monotonic() - last > QUIET_S:
            return last
        time.sleep(0.2)  # polling the child's reports; the figure is the report's own arrival time


def caption_latency(server: SoundServer, env: dict[str, str], model: Path, wavs: list, count: int) -> None:
    child = JsonLinesChild(
        [sys.executable, str(REPO / "tests" / "bench" / "sound_window_latency_child.py"), str(model)], env
    )
    try:
        child.wait_for("the session running", lambda: any(e.get("state") == "running" for e in child.events))
        print(f"window, {model.name}: running ({load()})", flush=True)
        latencies: list[float] = []
        nothing = 0
        for index in range(count):
            wav, duration = wavs[index % len(wavs)]
            seen = len(child.events)
            started = time.monotonic()
            server.play(wav, SPEAKERS)
            last = wait_quietly(child, seen, "committed")
            if last is None:
                nothing += 1
                print(f"  sentence {index}: no text", flush=True)
                continue
            latencies.append(last - (started + duration))
            print(f"  sentence {index}: {latencies[-1] * 1000:.0f} ms", flush=True)
        texts = [str(e["text"]) for e in child.events if e.get("event") == "committed"]
        print(f"window, {model.name}: last word played -> committed {percentiles(latencies)} sentences"
              f"{f', {nothing} with no text' if nothing else ''} ({load()})")  # fmt: skip
        print(f"  committed: {texts[-1][:300] if texts else ''}")
        child.process.stdin.close()  # type: ignore[union-attr]
        child.wait_for("the latencies", lambda: any(e.get("event") == "latencies" for e in child.events))
        values = next(e for e in child.events if e.get("event") == "latencies")["values"]
        print(f"window, {model.name}: each delta's audio captured -> committed (the controller's own figure) "
              f"{percentiles([float(v) for v in values])} deltas")  # type: ignore[union-attr]  # fmt: skip
    finally:
        if child.process.stdin is not None and not child.process.stdin.closed:
            child.process.stdin.close()
        try:
            child.process.wait(120)
        except subprocess.TimeoutExpired:
            child.kill()


def dictation_latency(server: SoundServer, env: dict[str, str], wavs: list, count: int) -> None:
    from tests.xvfb import start_xvfb

    xvfb, display = start_xvfb()
    denv = {**env, "DISPLAY": display, "QT_QPA_PLATFORM": "xcb", "PYTHONPATH": str(REPO)}
    denv.pop("PYNPUT_BACKEND", None)
    child = JsonLinesChild([sys.executable, "-m", "tests.app.xvfb_sound_dictation_child"], denv)
    try:
        child.wait_for("dictation ready", lambda: any(e.get("ready") for e in child.events))
        found = subprocess.run(
            ["xdotool", "search", "--name", "dictation field"], env=denv, capture_output=True, text=True
        )
        field = found.stdout.split()[0]
        ready_s: list[float] = []
        in_field_s: list[float] = []
        for index in range(count):
            wav, _duration = wavs[index % len(wavs)]
            subprocess.run(["xdotool", "windowfocus", "--sync", field], env=denv, check=True)
            seen = len(child.events)
            subprocess.run(["xdotool", "keydown", "ctrl+alt+space"], env=denv, check=True)
            server.play(wav, MIC_FEED)
            released = time.monotonic()
            subprocess.run(["xdotool", "keyup", "ctrl+alt+space"], env=denv, check=True)
            child.wait_for(
                "a dictation result", lambda seen=seen: any("result" in e for e in child.events[seen:])
            )
            result = next(e for e in child.events[seen:] if "result" in e)
            ready_s.append(float(str(result["latency_s"])))
            child.wait_for(
                "the field's text", lambda seen=seen: any("field" in e for e in child.events[seen:])
            )
            typed = next(e for e in child.events[seen:] if "field" in e)
            in_field_s.append(float(str(typed["_at"])) - released)
            print(f"  dictation {index}: ready {ready_s[-1] * 1000:.0f} ms, in the field {in_field_s[-1] * 1000:.0f} ms:"
                  f" {result['result']!r}", flush=True)  # fmt: skip
            subprocess.run(
                ["xdotool", "key", "ctrl+a", "BackSpace"], env=denv, check=True
            )  # an empty field again
        print(f"dictation (demo model): release -> text ready {percentiles(ready_s)}; "
              f"release -> in the field {percentiles(in_field_s)} ({load()})")  # fmt: skip
    finally:
        if child.process.stdin is not None:
            child.process.stdin.close()
        try:
            child.process.wait(120)
        except subprocess.TimeoutExpired:
            child.kill()
        xvfb.terminate()
        xvfb.wait(10)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--models", nargs="*", type=Path, default=DEFAULT_MODELS)
    parser.add_argument("--sentences", type=int, default=8)
    parser.add_argument("--dictations", type=int, default=6)
    parser.add_argument("--capture-seconds", type=float, default=20.0)
    args = parser.parse_args()
    print_machine_header()
    print(f"start: {load()}")
    folder = Path(tempfile.mkdtemp(prefix="captioneer-sound-bench-"))
    servers = start_sound_server(folder / "sound")
    server = next(servers)
    env = dict(server.env, CAPTIONEER_HOME=str(folder / "home"), PYTHONPATH=str(REPO))
    try:
        wavs = []
        for index, sentence in enumerate(SENTENCES):
            wav = folder / f"s{index}.wav"
            subprocess.run(["espeak-ng", "-s", "150", "-w", str(wav), sentence], check=True)
            cut = without_trailing_silence(wav, folder / f"s{index}-cut.wav")  # paplay returns as it ends
            wavs.append((cut, soundfile.info(str(cut)).duration))

        if args.capture_seconds > 0:
            cpu = subprocess.run(
                [sys.executable, "-c", CAPTURE_CHILD, str(args.capture_seconds)],
                cwd=REPO, env=env, capture_output=True, text=True, check=True,
            ).stdout.split()  # fmt: skip
            print(f"capture alone (system audio, 16 kHz mono, 30 ms blocks): {cpu[0]}% of one core, "
                  f"{cpu[1]} s of audio per second once flowing, first audio {cpu[2]} s after opening "
                  f"({load()})")  # fmt: skip
        for model in args.models:
            caption_latency(server, env, model, wavs, args.sentences)
        if args.dictations > 0:
            dictation_latency(server, env, wavs, args.dictations)
    finally:
        servers.close()


if __name__ == "__main__":
    main()
