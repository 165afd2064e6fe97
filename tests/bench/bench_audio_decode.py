"""Peak memory of reading a long recording: ``load_audio_file`` (the bounded decoder every caller uses) and, with
``--transcribe``, the ``captioneer transcribe`` process around it (its worker not counted).

    .venv/bin/python tests/bench/bench_audio_decode.py --minutes 120 [--rate 16000 --channels 1] [--transcribe]

Each measurement runs in a fresh child process and reports its own peak RSS (``ru_maxrss``), so runs do not see
each other's allocations. The silent WAV is written once under a temporary folder and removed afterwards.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import wave
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from tests.bench.machine import machine_header  # noqa: E402

_DECODE = """
import resource, sys, time
from pathlib import Path
from inference.audio.io import load_audio_file
started = time.perf_counter()
audio = load_audio_file(Path(sys.argv[1]))
wall = time.perf_counter() - started
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(f"decode: {audio.size / 16000:.0f} s in {wall:.1f} s, peak RSS {peak:.0f} MB (output {audio.nbytes / 2**20:.0f} MB)")
"""

_TRANSCRIBE = """
import io, resource, sys, time
from inference.cli import main
if __name__ == "__main__":
    started = time.perf_counter()
    code = main(["transcribe", sys.argv[1], "--threads", "1", "--format", "json"], out=io.StringIO())
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"transcribe: exit {code} in {time.perf_counter() - started:.0f} s, CLI process peak RSS {peak:.0f} MB")
"""


def write_silence(path: Path, minutes: float, rate: int, channels: int) -> None:
    block = np.zeros(rate * 60 * channels, "<i2").tobytes()
    with wave.open(str(path), "wb") as handle:
        handle.setnchannels(channels)
        handle.setsampwidth(2)
        handle.setframerate(rate)
        for _ in range(int(minutes)):
            handle.writeframes(block)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--minutes", type=float, default=120)
    parser.add_argument("--rate", type=int, default=16000)
    parser.add_argument("--channels", type=int, default=1)
    parser.add_argument("--transcribe", action="store_true", help="also run captioneer transcribe on it")
    args = parser.parse_args()
    print(machine_header())
    with tempfile.TemporaryDirectory(prefix="bench-audio-") as folder:
        wav = Path(folder) / "silence.wav"
        write_silence(wav, args.minutes, args.rate, args.channels)
        print(
            f"{wav.stat().st_size / 2**20:.0f} MB WAV: {args.minutes:g} min, {args.rate} Hz, {args.channels} ch"
        )
        scripts = [_DECODE] + ([_TRANSCRIBE] if args.transcribe else [])
        for script in scripts:
            with tempfile.NamedTemporaryFile("w", suffix=".py", dir=folder, delete=False) as handle:
                handle.write(script)
            subprocess.run([sys.executable, handle.name, str(wav)], cwd=REPO, check=True)


if __name__ == "__main__":
    main()
