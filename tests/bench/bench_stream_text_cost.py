"""Benchmark: the text work of one window of a Parakeet buffered live stream as the stream grows.

Each window the stream publishes the committed text's growth (a delta) and the provisional tail (a snapshot).
It decodes the tokens since the commit point before the last; decoding every token of the stream, as it did
before, costs more the longer the stream runs. Both are timed here side by side, in one process, after N
tokens of a stream (47 000 tokens is about four hours of speech at 3.3 tokens a second), ten new tokens a
window, with a real tokenizer (the demo model's: the cost depends on token counts, not on weights):

    .venv/bin/python tests/bench/bench_stream_text_cost.py [--tokens 1000,12000,47000] [--windows 40]

Prints, per length, the median milliseconds of one window's events: the stream's, and a whole-stream decode of
the same tokens (the former method, which the stream's text must equal: the run checks it). The two run in
alternated passes of ``--windows`` windows each (timed window by window, interleaving them would let the big
decode evict the stream's few tokens from the caches).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from inference.audio.spans import LongFormWindow, Span  # noqa: E402
from inference.contract import Delta  # noqa: E402
from inference.engine import load_engine  # noqa: E402
from inference.families.parakeet_tdt.decoder import TokenStep  # noqa: E402
from inference.families.parakeet_tdt.streaming import BufferedStream, _Window  # noqa: E402
from inference.families.parakeet_tdt.text import WORD_MARK  # noqa: E402

NEW_TOKENS_PER_WINDOW = 10


def speech_like_ids(tokenizer, count: int, seed: int) -> list[int]:  # type: ignore[no-untyped-def]
    """Words of one to three pieces: a word-start piece, then up to two inner pieces."""
    text_ids = [i for i in range(tokenizer.vocab_size) if tokenizer.is_text_token(i, False)]
    starts = [i for i in text_ids if tokenizer.piece(i).startswith(WORD_MARK)]
    inner = [i for i in text_ids if not tokenizer.piece(i).startswith(WORD_MARK)]
    rng = np.random.default_rng(seed)
    ids: list[int] = []
    while len(ids) < count:
        ids.append(int(rng.choice(starts)))
        ids += [int(i) for i in rng.choice(inner, int(rng.integers(0, 3)))]
    return ids[:count]


def whole_stream_texts(tokenizer, tokens: list[TokenStep], split: int) -> tuple[str, str]:  # type: ignore[no-untyped-def]
    """(committed text, whole text) by decoding every token of the stream: the former method."""
    committed = tokenizer.decode([t.token_id for t in tokens[:split]])
    return committed, tokenizer.decode([t.token_id for t in tokens])


def stream_pass(
    engine, ids: list[int], length: int, windows: int
) -> tuple[list[float], list[str], list[str]]:  # type: ignore[no-untyped-def]
    """The stream's events for ``windows`` windows after ``length`` tokens: seconds, committed text and snapshot
    after each."""
    stream = engine.open_stream()
    assert isinstance(stream, BufferedStream)
    stream._tokens = [TokenStep(t, i, 1) for i, t in enumerate(ids[:length])]
    committed = "".join(e.text for e in stream._events(WINDOW) if isinstance(e, Delta))
    seconds, texts, tails = [], [], []
    for index in range(windows):
        at = length + NEW_TOKENS_PER_WINDOW * index
        stream._tokens += [
            TokenStep(t, at + j, 1) for j, t in enumerate(ids[at : at + NEW_TOKENS_PER_WINDOW])
        ]
        started = time.perf_counter()
        events = stream._events(WINDOW)
        seconds.append(time.perf_counter() - started)
        committed += "".join(e.text for e in events if isinstance(e, Delta))
        texts.append(committed)
        tails.append(stream._snapshot)
    return seconds, texts, tails


def whole_pass(engine, ids: list[int], length: int, windows: int) -> tuple[list[float], list[str], list[str]]:  # type: ignore[no-untyped-def]
    """The same windows by decoding every token of the stream (the former method)."""
    stream = engine.open_stream()  # only for its word-start rule
    tokens = [TokenStep(t, i, 1) for i, t in enumerate(ids[:length])]
    seconds, texts, tails = [], [], []
    for index in range(windows):
        at = length + NEW_TOKENS_PER_WINDOW * index
        tokens += [TokenStep(t, at + j, 1) for j, t in enumerate(ids[at : at + NEW_TOKENS_PER_WINDOW])]
        started = time.perf_counter()
        committed, full = whole_stream_texts(engine.tokenizer, tokens, stream._word_start(tokens))
        seconds.append(time.perf_counter() - started)
        texts.append(committed)
        tails.append(full[len(committed) :])
    return seconds, texts, tails


WINDOW = _Window(LongFormWindow(Span(0, 1), Span(0, 1), 0, 0, 0), None)  # no look-ahead frames


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--tokens", default="1000,12000,47000", help="stream lengths in tokens")
    parser.add_argument("--windows", type=int, default=40, help="windows timed per length and pass")
    parser.add_argument("--rounds", type=int, default=3, help="passes of each method, alternated")
    args = parser.parse_args()
    engine = load_engine(ROOT / "resources" / "demo_model", backend="cpu", threads=1)
    print("length (tokens) | stream's events ms (p50) | whole-stream decode ms (p50) | ratio")
    for length in (int(n) for n in args.tokens.split(",")):
        ids = speech_like_ids(engine.tokenizer, length + NEW_TOKENS_PER_WINDOW * args.windows, seed=length)
        ours: list[float] = []
        whole: list[float] = []
        for _ in range(args.rounds):  # alternated passes: neither method pollutes the other's caches
            seconds, texts, tails = stream_pass(engine, ids, length, args.windows)
            ours += seconds
            seconds, expected_texts, expected_tails = whole_pass(engine, ids, length, args.windows)
            whole += seconds
            assert (texts, tails) == (expected_texts, expected_tails), "the stream's text differs"
        a, b = statistics.median(ours) * 1000, statistics.median(whole) * 1000
        print(f"{length} | {a:.3f} | {b:.2f} | {b / a:.0f}x")
    engine.close()


if __name__ == "__main__":
    main()
