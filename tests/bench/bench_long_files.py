"""Peak memory and wall time of ``captioneer transcribe FILE`` on long recordings (issue 43 item 5): the client's
and the worker's VmHWM, per length, with the bundled demo model (any ``--model``).

    .venv/bin/python tests/bench/bench_long_files.py --minutes 10,60,240 [--silence-minutes 120] [--model PATH]

The speech is made at run time with espeak-ng (``tests/long_speech.py``: a few hundred held-out sentences of the
demo's vocabulary with pauses, ``--base-minutes`` long), repeated into 16-bit 16 kHz WAVs of each length under a
temporary folder (removed afterwards). A 20 s file gives the baseline: the model's own footprint, so "extra" is
what the file's length adds. Each run is a fresh ``captioneer transcribe`` process; VmHWM of it and of its
children (the worker) is read from /proc every 50 ms until it exits.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import subprocess
import sys
import tempfile
import time
import wave
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from tests.bench.machine import machine_header  # noqa: E402


def write_wav(path: Path, base: np.ndarray, seconds: float) -> None:
    """``base`` (float32, 16 kHz) repeated to ``seconds``, written a repetition at a time."""
    pcm = (np.clip(base, -1.0, 1.0) * 32767).astype("<i2")
    remaining = int(seconds * 16000)
    with wave.open(str(path), "wb") as handle:
        handle.setnchannels(1)
        handle.setsampwidth(2)
        handle.setframerate(16000)
        while remaining > 0:
            piece = pcm[:remaining]
            handle.writeframes(piece.tobytes())
            remaining -= piece.size


def vm_hwm_kib(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return 0


def children(pid: int) -> list[int]:
    found: list[int] = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        with contextlib.suppress(OSError, ValueError):
            found += [int(c) for c in (task / "children").read_text().split()]
    return found


def transcribe(wav: Path, model: str | None, threads: int) -> dict[str, float]:
    """One ``captioneer transcribe`` run: wall time, client and worker peaks (MB), words."""
    out = wav.with_suffix(".json")
    command = [
        sys.executable,
        "-m",
        "inference.cli",
        "transcribe",
        str(wav),
        "--format",
        "json",
        "-o",
        str(out),
    ]
    command += ["--threads", str(threads), "--max-audio-s", "90000"] + (["--model", model] if model else [])
    started = time.perf_counter()
    process = subprocess.Popen(command, cwd=REPO, stderr=subprocess.PIPE, text=True)
    client = worker = 0
    while process.poll() is None:
        client = max(client, vm_hwm_kib(process.pid))
        for child in children(process.pid):
            worker = max(worker, vm_hwm_kib(child))
        time.sleep(0.05)
    wall = time.perf_counter() - started
    if process.returncode != 0:
        raise SystemExit(f"captioneer transcribe failed ({process.returncode}): {process.stderr.read()}")
    words = len(json.loads(out.read_text())["text"].split())
    return {"wall_s": wall, "client_mb": client / 1024, "worker_mb": worker / 1024, "words": words}


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--minutes", default="10,60,240", help="lengths of speech, comma-separated")
    parser.add_argument(
        "--silence-minutes", type=float, default=0, help="also a digitally silent WAV this long"
    )
    parser.add_argument("--base-minutes", type=float, default=10, help="distinct speech before it repeats")
    parser.add_argument("--model", default=None, help="a model folder (default: the bundled demo)")
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    from tests.long_speech import recording

    print(machine_header())
    base = recording(args.base_minutes * 60, seed=43).audio
    runs: list[tuple[str, float]] = [("speech", 20 / 60)]
    runs += [("speech", float(m)) for m in args.minutes.split(",") if m]
    if args.silence_minutes:
        runs.append(("silence", args.silence_minutes))
    print("| file | audio | wall | x real time | client VmHWM | worker VmHWM | worker extra | words |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    baseline = None
    with tempfile.TemporaryDirectory(prefix="bench-long-") as folder:
        for kind, minutes in runs:
            wav = Path(folder) / f"{kind}_{minutes:g}.wav"
            source = base if kind == "speech" else np.zeros(16000 * 60, np.float32)
            write_wav(wav, source, minutes * 60)
            got = transcribe(wav, args.model, args.threads)
            wav.unlink()
            if baseline is None:
                baseline = got["worker_mb"]
            print(
                f"| {kind} | {minutes * 60:.0f} s | {got['wall_s']:.1f} s | {minutes * 60 / got['wall_s']:.0f}x "
                f"| {got['client_mb']:.0f} MB | {got['worker_mb']:.0f} MB | {got['worker_mb'] - baseline:+.0f} MB "
                f"| {got['words']:.0f} |",
                flush=True,
            )


if __name__ == "__main__":
    main()
