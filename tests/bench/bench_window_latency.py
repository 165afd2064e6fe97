"""What the demo model's live text costs in latency: its speech-window stream (live text = offline text) beside
segment-by-segment captions, on the same espeak recording pushed in 320 ms pieces.

Latency is counted in audio, so it does not depend on the machine: the stream position at the end of the push
that committed a word minus that word's end (every word), and minus its segment's speech end (the time from the
end of speech to its committed text). Also: each stream's word edits against the offline transcript of the same
audio, and CPU seconds.

    .venv/bin/python tests/bench/bench_window_latency.py [--seconds 120] [--seed 21] [--threads 2]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from inference.audio.vad import SileroVad  # noqa: E402
from inference.contract import SAMPLE_RATE, Engine, SpeechEnd, Stream  # noqa: E402
from inference.engine import load_engine  # noqa: E402
from inference.streaming import SegmentedStream, open_vad_stream  # noqa: E402
from tests.bench.machine import print_machine_header  # noqa: E402
from tests.long_speech import recording  # noqa: E402
from tests.text_metrics import word_edits  # noqa: E402

STEP = 5120  # the app's 320 ms pushes


def run(stream: Stream, audio: np.ndarray) -> tuple[str, list[float], list[float], float]:
    """Final text, word and speech-end latencies (s of audio) and CPU seconds of one stream."""
    committed_at: dict[float, float] = {}
    cpu = time.process_time()
    for start in range(0, audio.size, STEP):
        for event in stream.push(audio[start : start + STEP]):
            if isinstance(event, SpeechEnd):
                committed_at[round(event.start_s, 3)] = min(start + STEP, audio.size) / SAMPLE_RATE
    for event in stream.flush():  # type: ignore[attr-defined]
        if isinstance(event, SpeechEnd):
            committed_at[round(event.start_s, 3)] = audio.size / SAMPLE_RATE
    final = stream.finish()
    cpu = time.process_time() - cpu
    latencies = [committed_at[round(s.start_s, 3)] - w.end_s for s in final.segments for w in s.words]
    ends = [committed_at[round(s.start_s, 3)] - s.end_s for s in final.segments]
    return final.text, latencies, ends, cpu


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--seconds", type=float, default=120.0)
    parser.add_argument("--seed", type=int, default=21)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    print_machine_header(args.threads)
    audio = recording(args.seconds, seed=args.seed).audio
    engine: Engine = load_engine(REPO / "resources" / "demo_model", threads=args.threads)
    cpu = time.process_time()
    offline = engine.transcribe(audio).text
    print(f"offline: {len(offline.split())} words, {time.process_time() - cpu:.1f} s CPU")
    streams = {
        "speech windows (auto)": open_vad_stream(engine, True, {}, {}),
        "VAD segments (segmented)": SegmentedStream(engine, SileroVad(), {}),
    }
    for name, stream in streams.items():
        text, latencies, ends, cpu = run(stream, audio)
        p50, p90 = np.percentile(latencies, [50, 90])
        e50, e90 = np.percentile(ends, [50, 90])
        print(
            f"{name}: word end -> commit median {p50:.2f} s, p90 {p90:.2f} s, max {max(latencies):.2f} s; "
            f"speech end -> commit median {e50:.2f} s, p90 {e90:.2f} s ({len(ends)} segments); "
            f"{word_edits(text, offline)} word edits against offline; {cpu:.1f} s CPU"
        )


if __name__ == "__main__":
    main()
