"""Where R2T2's endpointing cuts talk that runs on: segment lengths and cuts inside sentences, per split rule.

No model: the real Silero VAD and the endpointed stream (``endpointing.EndpointedStream``) over espeak-ng
sentences (``tests/long_speech.py``) whose own trailing silence is cut, so a pause is all the silence between two
sentences. A segment's cut is where its audio ends (the frame on which the end fired); a cut more than 0.1 s
inside a sentence's sound is *mid-sentence* (a word is split between two segments or lost at the cut), one
within 0.1 s of a sentence's edge is counted apart (the VAD fired on the first or last frame of a sentence).

    .venv/bin/python tests/bench/bench_segment_splits.py [--seconds 600] [--seeds 100] [--pauses 0.1,0.25 ...]
        [--split-after 0,8] [--split-silence 32,64,100]

``--split-after 0`` is the rule off (segments end at a ``vad_min_silence_ms`` pause or at ``max_segment_seconds``).

``--demo-model`` measures the same rule where a trained model can count the words: the demo model's
segment-by-segment captions (``inference.streaming.SegmentedStream``, ``SegmenterSettings.split_after_s`` 0 or 8),
word edits of the final text against the script and CPU seconds with the default snapshots, per recording:

    .venv/bin/python tests/bench/bench_segment_splits.py --demo-model --seconds 180 --seeds 21,22,23,24 \
        --pauses 0.6,1.4 0.1,0.25 0.15,0.35
(``--pauses 0.6,1.4`` keeps espeak-ng's own trailing silence, as the live benches do; the others cut it.)
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(REPO), str(REPO / "tests" / "confucius4_r2t2")]

from fake_decoder import FakeTokenizer  # noqa: E402

from inference.audio.vad import SileroVad  # noqa: E402
from inference.contract import SAMPLE_RATE, SpeechEnd  # noqa: E402
from inference.families.confucius4_r2t2.endpointing import EndpointedStream, EndpointOptions  # noqa: E402
from inference.families.confucius4_r2t2.lsp import StreamOptions  # noqa: E402
from tests.long_speech import recording  # noqa: E402

# long_speech.recording's default pauses: the live benches' script, whose sentences keep espeak-ng's own 0.35 s of
# trailing silence; recordings with any other pauses are run on (that silence cut).
SCRIPT_PAUSES = (0.6, 1.4)


class OneWordDecoder(FakeTokenizer):
    """Every decode finds one word: the stream's segmentation does not depend on the text."""

    def generate(self, audio: object, prefix: str, max_tokens: int) -> str:
        return "x"


def cuts(audio, endpoints: EndpointOptions) -> list[tuple[float, float]]:  # type: ignore[no-untyped-def]
    """(start, end) in seconds of every segment the stream makes of ``audio``, pushed a second at a time."""
    stream = EndpointedStream(
        OneWordDecoder, StreamOptions(chunk_size_ms=1000), endpoints, SileroVad(), "English"
    )
    events = []
    for start in range(0, audio.size, SAMPLE_RATE):
        events += stream.push(audio[start : start + SAMPLE_RATE])
    events += stream.flush()
    stream.finish()
    return [(e.start_s, e.end_s) for e in events if isinstance(e, SpeechEnd)]


def demo_model_words(seconds: float, seeds: list[int], pauses: list[str]) -> None:
    from inference.engine import load_engine
    from inference.streaming import SegmentedStream, SegmenterSettings
    from tests.text_metrics import word_edits

    engine = load_engine(REPO / "resources" / "demo_model", threads=1)
    for pause in pauses:
        low, _, high = pause.partition(",")
        span = (float(low), float(high))
        run_on = span != SCRIPT_PAUSES
        for seed in seeds:
            rec = recording(seconds, seed=seed, pause_s=span, trim=run_on)
            row = []
            for split_after in (0.0, 8.0):
                cpu = time.process_time()
                stream = SegmentedStream(
                    engine, SileroVad(), {}, SegmenterSettings(split_after_s=split_after)
                )
                for start in range(0, rec.audio.size, 5120):  # the app's 320 ms pushes
                    stream.push(rec.audio[start : start + 5120])
                final = stream.finish()
                cpu = time.process_time() - cpu
                longest = max(s.end_s - s.start_s for s in final.segments)
                edits = word_edits(final.text.lower(), rec.text.lower())
                row.append(
                    f"split after {split_after:g} s: {edits} word edits, {len(final.segments)} segments "
                    f"(longest {longest:.1f} s), {cpu:.1f} CPU s"
                )
            words = len(rec.text.split())
            print(
                f"pauses {pause} s{' run on' if run_on else ''}, seed {seed}, {words} words | "
                + " | ".join(row)
            )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--seconds", type=float, default=600.0)
    parser.add_argument("--seeds", default="100", help="long_speech seeds (comma-separated)")
    parser.add_argument("--pauses", nargs="+", default=["0.05,0.15", "0.1,0.25", "0.15,0.35"])
    parser.add_argument("--split-after", default="0,8", help="segment_split_seconds values")
    parser.add_argument("--split-silence", default="32,64,100", help="vad_split_silence_ms values")
    parser.add_argument("--demo-model", action="store_true", help="word edits of the demo model's live text")
    args = parser.parse_args()
    if args.demo_model:
        demo_model_words(args.seconds, [int(s) for s in args.seeds.split(",")], args.pauses)
        return
    for pauses in args.pauses:
        low, _, high = pauses.partition(",")
        for seed in (int(s) for s in args.seeds.split(",")):
            rec = recording(args.seconds, seed=seed, pause_s=(float(low), float(high)), trim=True)
            spoken = [(start, end) for _, start, end in rec.sentences]
            for split_after in (float(v) for v in args.split_after.split(",")):
                silences = [64] if split_after == 0 else [int(v) for v in args.split_silence.split(",")]
                for silence in silences:
                    options = EndpointOptions(split_after_seconds=split_after, split_silence_ms=silence)
                    segments = cuts(rec.audio, options)
                    ends = [end for _, end in segments[:-1]]  # the last one ends with the recording
                    mid = sum(any(s + 0.1 < c < e - 0.1 for s, e in spoken) for c in ends)
                    edge = sum(any(s < c < e for s, e in spoken) for c in ends) - mid
                    lengths = [end - start for start, end in segments]
                    rule = f"split after {split_after:g} s at {silence} ms" if split_after else "rule off"
                    print(
                        f"pauses {pauses} s, seed {seed}, {rule}: {len(segments)} segments, length p50 "
                        f"{statistics.median(lengths):.1f} s max {max(lengths):.1f} s; cuts {len(ends)}: "
                        f"{mid} mid-sentence, {edge} at a sentence's edge",
                        flush=True,
                    )


if __name__ == "__main__":
    main()
