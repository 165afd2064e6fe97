"""Where R2T2's endpointing cuts talk that runs on: segment lengths and cuts inside sentences, per split rule.

No model: the real Silero VAD and the endpointed stream (``endpointing.EndpointedStream``) over espeak-ng
sentences (``tests/long_speech.py``) whose own trailing silence is cut, so a pause is all the silence between two
sentences. A segment's cut is where its audio ends (the frame on which the end fired); a cut more than 0.1 s
inside a sentence's sound is *mid-sentence* (a word is split between two segments or lost at the cut), one
within 0.1 s of a sentence's edge is counted apart (the VAD fired on the first or last frame of a sentence).

    .venv/bin/python tests/bench/bench_segment_splits.py [--seconds 600] [--seeds 100] [--pauses 0.1,0.25 ...]
        [--split-after 0,8] [--split-silence 32,64,100]

``--split-after 0`` is the rule off (segments end at a ``vad_min_silence_ms`` pause or at ``max_segment_seconds``).
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(REPO), str(REPO / "tests" / "confucius4_r2t2")]

from fake_decoder import FakeTokenizer  # noqa: E402

from inference.audio.vad import SileroVad  # noqa: E402
from inference.contract import SAMPLE_RATE, SpeechEnd  # noqa: E402
from inference.families.confucius4_r2t2.endpointing import EndpointedStream, EndpointOptions  # noqa: E402
from inference.families.confucius4_r2t2.lsp import StreamOptions  # noqa: E402
from tests.long_speech import recording  # noqa: E402


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


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--seconds", type=float, default=600.0)
    parser.add_argument("--seeds", default="100", help="long_speech seeds (comma-separated)")
    parser.add_argument("--pauses", nargs="+", default=["0.05,0.15", "0.1,0.25", "0.15,0.35"])
    parser.add_argument("--split-after", default="0,8", help="segment_split_seconds values")
    parser.add_argument("--split-silence", default="32,64,100", help="vad_split_silence_ms values")
    args = parser.parse_args()
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
