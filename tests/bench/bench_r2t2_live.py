"""Realistic Confucius4-R2T2 live captions: per-chunk cost per minute, arrival-to-commit time and memory.

Full-size 0.6B and 1.7B shapes with random weights (``r2t2_random_checkpoint.py``, numpy only). Random weights
would never stop (every chunk would decode the whole ``max_tokens``) nor repeat themselves (a live stream's
previous answer would never be a draft of the next), so the thinker is *steered*: a bias on the logits, by
position in the answer, makes greedy decoding emit a script of words growing at 3.3 tokens per second of audio
(speech at ~150 words/min in Qwen's tokenizer), then end-of-text. Each new token costs a decoding step, so the
script's words are as long in the bench's tiny tokenizer as speech's words are in Qwen's BPE (mostly one token;
``QWEN_WORDS_BY_TOKENS``) and come at the rate that gives that token count. The
decoder itself is untouched: every chunk runs the frontend, the tower, the prefill of the prompt with the text
prefix the LSP state machine built from the previous answer, and greedy decoding of the re-decoded unfixed tail
plus the new words, token by token (or verified in one batch when the previous answer drafts it).

Speech is espeak-ng sentences with pauses (``tests/long_speech.py``), pushed one chunk at a time. Real time is
simulated from the measured costs: chunk i arrives at (i+1) x chunk; it starts when it has arrived and the
previous one is done. ``--arrival realtime`` pushes as the client does when the worker falls behind (the
``coalesce`` backlog policy, one push in flight): each push carries ALL the chunks that arrived while the previous
one ran (at least one), so a stream that cannot keep up decodes a backlog at once (catch-up) instead of falling
further behind; it adds the lag per minute (push done minus arrival of its last chunk), decodes per minute and
total CPU seconds. In that mode the cost figures are per push (one decode, or one per flush inside it). Printed per configuration and minute: chunk cost p50/p95 and RSS; then overall p50/p95, the
time from the arrival of the chunk that brought a committed word to the moment its delta was out (p50/p95), where
a chunk's time goes (tower, prefill, decoding), the draft acceptance rate, and whether it keeps up (p95 < chunk).

Configurations (the defaults each front end opens a stream with): ``app`` (the caption window, which names
``endpointing`` in its session options), ``cli`` (``captioneer live`` / ``transcribe --mode streaming``) and
``live`` (the server's ``/live``) -- the CLI and ``/live`` open the engine's defaults, so they are one run,
``cli-live``. The family's live default is VAD endpointing for all three, so ``app`` and ``cli-live`` decode the
same; ``unbounded`` (``endpointing`` off: one window that rolls only when full) is what the CLI and ``/live``
opened before that default.

    nice .venv/bin/python tests/bench/bench_r2t2_live.py [--minutes 10] [--sizes 0.6b,1.7b] [--types q8_0,q4_k]
        [--chunks 320,640,1000] [--configs app,cli-live] [--threads 2] [--tower-type default] [--no-draft]
        [--arrival chunk|realtime] [--json out.json]

Run the full figures (10 minutes, every combination: hours) on a quiet machine; ``--minutes 1`` tries it.
"""

from __future__ import annotations

import argparse
import bisect
import json
import math
import random
import resource
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests" / "bench"))

from bench_r2t2_stream import SHAPES, TOKENS_PER_SECOND  # noqa: E402
from machine import print_machine_header, rss_mib  # noqa: E402
from r2t2_random_checkpoint import build  # noqa: E402

from inference.contract import SAMPLE_RATE, Delta  # noqa: E402
from inference.families.confucius4_r2t2.frontend import CHUNK_FRAMES  # noqa: E402

# The app and the CLI/``/live`` open the family's live default (endpointing) the same way, the app naming it;
# ``unbounded`` is the CLI's and ``/live``'s default before it (one growing window that rolls when full).
CONFIGS: dict[str, dict[str, Any]] = {
    "app": {"endpointing": True},
    "cli-live": {},
    "unbounded": {"endpointing": False},
}
HEADER = "language English<asr_text>"  # what the model answers first in automatic language mode
BIAS = 1000.0  # far above any logit of the random weights (|logit| ~ 1)
# A word costs one decoding step per token, so the script's words must be as long as a real model's. Qwen's BPE
# (qwen.tiktoken, the 151,643-token vocabulary of Qwen2/3) makes the bench's own speech (tests/long_speech.py,
# seed 100: 1229 words, capitalised and ending in punctuation as the model writes them) 1455 tokens: this many
# words of 1, 2, 3 and 4 tokens. The bench checkpoints' tiny tokenizer spends 1-6 tokens on an English word (2.8
# on average), so the script is made of its words whose token counts follow Qwen's.
QWEN_WORDS_BY_TOKENS = {1: 1017, 2: 200, 3: 10, 4: 2}
WORDS_BY_TOKENS = {  # in the bench tokenizer, with the leading space
    1: ("the", "and", "over", "before", "call", "nature", "to"),
    2: ("fox", "his", "near", "nets", "old"),
    3: ("bank", "river", "walks"),
    4: ("checks", "morning", "harbour"),
}
SCRIPT_WORDS = frozenset(word for words in WORDS_BY_TOKENS.values() for word in words)


def script_cycle(seed: int = 0) -> list[str]:
    """The script's repeating words: as many words of each token count as ``QWEN_WORDS_BY_TOKENS``, shuffled."""
    counts = [tokens for tokens, n in QWEN_WORDS_BY_TOKENS.items() for _ in range(n)]
    random.Random(seed).shuffle(counts)
    used = dict.fromkeys(WORDS_BY_TOKENS, 0)
    words = []
    for tokens in counts:
        pool = WORDS_BY_TOKENS[tokens]
        words.append(pool[used[tokens] % len(pool)])
        used[tokens] += 1
    return words


SCRIPT_CYCLE = tuple(script_cycle())


class Script:
    """Endless text with each word's time: word k is spoken by the end of second (k + 1) / words_per_second."""

    def __init__(self, words_per_second: float, seconds: float) -> None:
        self.words_per_second = words_per_second
        count = int(seconds * words_per_second) + 2
        words = [SCRIPT_CYCLE[i % len(SCRIPT_CYCLE)] for i in range(count)]
        self.text = " ".join(words)
        self.word_ends: list[int] = []  # char index just past each word
        end = -1
        for word in words:
            end += 1 + len(word)
            self.word_ends.append(end)

    def words_by(self, seconds: float) -> int:
        return int(seconds * self.words_per_second + 1e-9)

    def end_char(self, words: int) -> int:
        return self.word_ends[words - 1] if words else 0

    def start_char(self, words: int) -> int:
        return self.word_ends[words - 1] + 1 if words else 0

    def spoken_at(self, char: int) -> float:
        """Stream second by which the word holding ``char`` was spoken."""
        word = bisect.bisect_left(self.word_ends, char)
        return (word + 1) / self.words_per_second


class Steering:
    """Bias the thinker's logits, by position in the answer, toward ``target`` and then end-of-text.

    Wraps the llama context's decode calls (the thinker's own code runs unchanged): the prefill's last row
    predicts answer token 0; a token batch's rows predict the tokens after their positions.
    """

    def __init__(self, context: Any, eos: int) -> None:
        self.context, self.eos = context, eos
        self.target: list[int] = []
        self.answer_start = 0
        self.forwards = 0  # token batches decoded (greedy steps and draft verifications)
        self._tokens, self._embeddings = context.decode_tokens, context.decode_embeddings
        context.decode_tokens, context.decode_embeddings = self.decode_tokens, self.decode_embeddings

    def _bias(self, row: np.ndarray, index: int) -> None:
        row[self.target[index] if 0 <= index < len(self.target) else self.eos] += BIAS

    def decode_embeddings(self, rows: np.ndarray, logits: Any = "last") -> np.ndarray:
        out = self._embeddings(rows, logits)
        self.answer_start = self.context.n_past
        self._bias(out[-1], 0)
        return out

    def decode_tokens(self, ids: Any, logits: Any = "last") -> np.ndarray:
        start = self.context.n_past
        out = self._tokens(ids, logits)
        self.forwards += 1
        count = len(ids)
        positions = range(start, start + count) if logits == "all" else [start + count - 1]
        for row, position in zip(out, positions, strict=True):
            self._bias(row, position + 1 - self.answer_start)
        return out


class DecoderTally:
    """Rows prefilled and draft tokens over all of a stream's decoders, counted as each decode ends, so the bench
    does not keep every segment's decoder (and its caches) alive: memory figures must be the stream's own."""

    def __init__(self) -> None:
        self.prefilled_rows = self.drafted = self.accepted = 0

    def add(self, real: Any, before: tuple[int, int, int]) -> None:
        self.prefilled_rows += real.prefilled_rows - before[0]
        self.drafted += real.drafted - before[1]
        self.accepted += real.accepted - before[2]


def scripted_answer(script: Script, prefix: str, start_s: float, end_s: float, auto: bool) -> str:
    """What the steered model answers after ``prefix`` for the audio from ``start_s`` to ``end_s``: the script's
    words spoken by ``end_s`` past those the prefix holds, led by the language header in automatic mode."""
    end = script.end_char(script.words_by(end_s))
    begin = script.start_char(script.words_by(start_s))
    # The answer continues the prefix, which the rollback may have cut inside the language header
    # ("language"): then the model's next tokens are the rest of the header, not the header again.
    if prefix.startswith(HEADER):
        lead, body = "", prefix[len(HEADER) :]
    elif auto and HEADER.startswith(prefix):
        lead, body = HEADER[len(prefix) :], ""
    else:
        lead, body = "", prefix
    if script.text.startswith(body, begin):  # the segment's words so far, maybe cut inside a word
        begin += len(body)
    else:  # after a roll the prefix holds text of earlier audio: find where it ends
        tail = body[-48:]
        found = script.text.rfind(tail, 0, end)
        begin = found + len(tail) if found >= 0 else begin
    return lead + script.text[begin:end] if begin < end else lead


class ScriptedDecoder:
    """A chunk decoder that sets the steering target to the script past the prompt's text prefix, then runs
    the real decoder: its answer *is* the model's greedy output, steered."""

    def __init__(
        self,
        real: Any,
        steering: Steering,
        script: Script,
        window_start_s: Callable[[], float],
        auto: bool,
        tally: DecoderTally,
    ) -> None:
        self.real, self.steering, self.script = real, steering, script
        self.window_start_s, self.auto, self.tally = window_start_s, auto, tally

    def encode(self, text: str) -> list[int]:
        return self.real.encode(text)

    def decode(self, ids: Any) -> str:
        return self.real.decode(ids)

    def generate(self, audio: np.ndarray, prefix: str, max_tokens: int) -> str:
        start_s = self.window_start_s()
        answer = scripted_answer(self.script, prefix, start_s, start_s + audio.size / SAMPLE_RATE, self.auto)
        self.steering.target = self.real.encode(answer) if answer else []
        real = self.real
        before = (real.prefilled_rows, real.drafted, real.accepted)
        try:
            return real.generate(audio, prefix, max_tokens)
        finally:
            self.tally.add(real, before)


class StageClock:
    """Wall and process CPU seconds in the tower, the thinker prefill and greedy decoding (wrapped methods), and
    the audio rows the tower encoded (``tower rows``: the layers run over every row of each window encoded) and
    the chunks its conv stem ran over (``stem chunks``: new ones, and those whose log-mel a moved floor changed)."""

    def __init__(self, engine: Any) -> None:
        self.totals: dict[str, float] = {"tower rows": 0.0, "stem chunks": 0.0}
        for name, owner, method in (
            ("tower", engine.tower, "encode"),
            ("prefill", engine.thinker, "prefill_rows"),
            ("decode", engine.thinker, "decode_greedy"),
        ):
            self.totals[name] = self.totals[f"{name} cpu"] = 0.0
            setattr(owner, method, self._timed(name, getattr(owner, method)))

    def _timed(self, name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            stem_cache = (args[1] if len(args) > 1 else kwargs.get("stem_cache")) if name == "tower" else None
            stemmed = stem_cache.computed_chunks if stem_cache is not None else 0
            wall, cpu = time.perf_counter(), time.process_time()
            try:
                out = fn(*args, **kwargs)
            finally:
                self.totals[name] += time.perf_counter() - wall
                self.totals[f"{name} cpu"] += time.process_time() - cpu
            if name == "tower":
                self.totals["tower rows"] += out.shape[0]
                # without a stem cache every chunk of the mel goes through the stem
                self.totals["stem chunks"] += (
                    stem_cache.computed_chunks - stemmed
                    if stem_cache is not None
                    else -(-args[0].shape[1] // CHUNK_FRAMES)
                )
            return out

        return wrapper

    def snapshot(self) -> dict[str, float]:
        return dict(self.totals)


class DecodeKinds:
    """Records the kind of every decode (``LspRecognizer.decode_chunk``) while it is in use: ``flush`` (a
    segment's final decode, or the stream's), ``seed`` (a recognizer's first decode: an endpointed segment's
    lead-in and first chunks) or ``chunk``."""

    def __init__(self) -> None:
        from inference.families.confucius4_r2t2.lsp import LspRecognizer

        self.kinds: list[str] = []
        self._owner, self._decode = LspRecognizer, LspRecognizer.decode_chunk
        kinds = self.kinds
        real = self._decode

        def decode_chunk(
            recognizer: Any, audio: np.ndarray, final: bool = False, *args: Any, **kw: Any
        ) -> Any:
            kinds.append("flush" if final else "seed" if recognizer.decode_calls == 0 else "chunk")
            return real(recognizer, audio, final, *args, **kw)

        LspRecognizer.decode_chunk = decode_chunk  # type: ignore[method-assign]

    def close(self) -> None:
        self._owner.decode_chunk = self._decode  # type: ignore[method-assign]


def push_breakdown(pushes: list[dict[str, Any]]) -> list[str]:
    """Lines comparing the pushes above the 90th CPU percentile with the median ones (40th-60th)."""
    cpu = [p["cpu_s"] for p in pushes]
    p40, p60, p90 = (percentile(cpu, q) for q in (40, 60, 90))
    groups = (
        ("median (p40-p60)", [p for p in pushes if p40 <= p["cpu_s"] <= p60]),
        ("slow (> p90)", [p for p in pushes if p["cpu_s"] > p90]),
    )
    lines = []
    for label, group in groups:
        if not group:
            continue
        n = len(group)
        kinds: dict[str, int] = {}
        for p in group:
            key = "+".join(p["decodes"]) or "none"
            kinds[key] = kinds.get(key, 0) + 1
        mix = ", ".join(f"{k} {v}" for k, v in sorted(kinds.items(), key=lambda kv: -kv[1]))
        stage = {
            s: 1000 * sum(p["stage_cpu_s"].get(s, 0.0) for p in group) / n
            for s in ("tower", "prefill", "decode")
        }
        lines.append(
            f"    {label}: {n} pushes, CPU {1000 * sum(p['cpu_s'] for p in group) / n:.0f} ms "
            f"(tower {stage['tower']:.0f} / prefill {stage['prefill']:.0f} / decode {stage['decode']:.0f}), "
            f"decodes {sum(len(p['decodes']) for p in group) / n:.2f}, tower rows "
            f"{sum(p['tower_rows'] for p in group) / n:.0f} (stem chunks "
            f"{sum(p['stem_chunks'] for p in group) / n:.1f}), prefilled rows "
            f"{sum(p['prefilled_rows'] for p in group) / n:.0f}, forwards {sum(p['forwards'] for p in group) / n:.1f} "
            f"| decodes per push: {mix}"
        )
    return lines


def speech(minutes: float, pauses: tuple[float, float] = (0.6, 1.4), trim: bool = False) -> np.ndarray:
    from tests.long_speech import recording

    parts, total, seed = [], 0, 100
    while total < minutes * 60 * SAMPLE_RATE:
        parts.append(recording(600.0, seed=seed, pause_s=pauses, trim=trim).audio)
        total += parts[-1].size
        seed += 1
    return np.concatenate(parts)[: int(minutes * 60 * SAMPLE_RATE)]


def percentile(values: list[float], q: float) -> float:
    return float(np.percentile(values, q)) if values else float("nan")


def lag_is_bounded(lags: list[float], chunk_s: float) -> bool:
    """Whether catch-up held the lag over a run: the last third's 90th-percentile lag is at most a chunk above the
    first third's. A backlog that builds up raises the whole last third; one slow push does not tip the verdict
    (comparing the halves' maxima called a 2-minute run growing for a single late spike that 10 minutes showed
    to be noise)."""
    third = len(lags) // 3
    if third == 0:
        return True
    return percentile(lags[-third:], 90) <= percentile(lags[:third], 90) + chunk_s


def run(
    engine: Any,
    steering: Steering,
    clock: StageClock,
    audio: np.ndarray,
    chunk_ms: float,
    draft: bool,
    stream_options: dict,
    arrival_mode: str = "chunk",
) -> dict[str, Any]:
    """One stream; ``steering`` and ``clock`` wrap the engine once (wrapping twice would bias and count twice)."""
    cycle_tokens = len(engine.checkpoint.tokenizer.encode(" " + " ".join(SCRIPT_CYCLE)))
    tokens_per_word = cycle_tokens / len(SCRIPT_CYCLE)
    script = Script(TOKENS_PER_SECOND / tokens_per_word, audio.size / SAMPLE_RATE + 60)
    forwards_before = steering.forwards
    auto = "language" not in stream_options
    stream = engine.open_stream(chunk_size_ms=chunk_ms, **stream_options)
    plain = hasattr(stream, "_dropped_samples")

    def window_start_s() -> float:
        if plain:
            return stream._dropped_samples / SAMPLE_RATE
        ended = getattr(stream, "_ended", None)  # a segment being flushed after the next one opened
        return (ended.start if ended is not None else stream._segment_start) / SAMPLE_RATE

    tally = DecoderTally()

    def scripted(real: Any) -> ScriptedDecoder:
        if not draft:
            real._draft = lambda after_audio, prefix: []
        return ScriptedDecoder(real, steering, script, window_start_s, auto, tally)

    factory = stream._decoder_factory
    stream._decoder_factory = lambda: scripted(factory())
    stream.recognizer.decoder = scripted(stream.recognizer.decoder)
    kinds = DecodeKinds()

    step = round(chunk_ms * SAMPLE_RATE / 1000)
    chunk_s = step / SAMPLE_RATE
    finish_s, cursor = 0.0, 0
    costs: list[float] = []
    cpu: list[float] = []  # process CPU seconds per chunk: the work, whatever else the machine runs
    latencies: list[float] = []
    minutes: list[dict[str, float]] = []
    stages: dict[str, float] = {}
    minute_costs: list[float] = []
    lags: list[float] = []  # per push: done minus the arrival of its last chunk
    minute_lags: list[float] = []
    pushed_chunks: list[int] = []
    decodes_before = stream.decode_calls
    total_chunks = audio.size // step
    began = time.monotonic()
    all_events: list[Any] = []
    pushes: list[dict[str, Any]] = []  # what each push ran (attributing the slow ones)
    index = 0  # the next chunk to push
    while index < total_chunks:
        # chunk j arrives at (j + 1) x chunk: a realtime push takes every chunk there by the time the last is done
        arrived = min(total_chunks, int(finish_s / chunk_s + 1e-9)) if arrival_mode == "realtime" else 0
        upto = max(index + 1, arrived)
        before = clock.snapshot()
        rows_before, forwards_at = tally.prefilled_rows, steering.forwards
        kinds.kinds.clear()
        t0, c0 = time.perf_counter(), time.process_time()
        events = stream.push(audio[index * step : upto * step])
        all_events += events
        cost = time.perf_counter() - t0
        cpu.append(time.process_time() - c0)
        spent = {name: value - before[name] for name, value in clock.snapshot().items()}
        for name, value in spent.items():
            if name not in ("tower rows", "stem chunks"):
                stages[name] = stages.get(name, 0.0) + value
        pushes.append(
            {
                "cpu_s": cpu[-1],
                "wall_s": cost,
                "decodes": list(kinds.kinds),
                "tower_rows": int(spent["tower rows"]),
                "stem_chunks": int(spent["stem chunks"]),
                "prefilled_rows": tally.prefilled_rows - rows_before,
                "forwards": steering.forwards - forwards_at,
                "stage_cpu_s": {name[:-4]: spent[name] for name in spent if name.endswith(" cpu")},
            }
        )
        pushed_chunks.append(upto - index)
        previous_arrival = index * chunk_s
        index = upto
        arrival = index * chunk_s
        finish_s = max(arrival, finish_s) + cost
        lags.append(finish_s - arrival)
        minute_lags.append(lags[-1])
        costs.append(cost)
        minute_costs.append(cost)
        for event in events:
            text = event.text.strip() if isinstance(event, Delta) else ""
            found = script.text.find(text, cursor) if text else -1  # deltas only move forward
            if found >= 0:
                cursor = found + len(text)
                spoken = script.spoken_at(cursor - 1)
                latencies.append(finish_s - math.ceil(spoken / chunk_s - 1e-9) * chunk_s)
        if int(arrival // 60) > int(previous_arrival // 60):
            minutes.append(
                {
                    "minute": int(arrival // 60),
                    "p50_ms": 1000 * statistics.median(minute_costs),
                    "p95_ms": 1000 * percentile(minute_costs, 95),
                    "rss_mib": rss_mib(),
                    "lag_max_s": max(minute_lags),
                    "lag_end_s": minute_lags[-1],
                }
            )
            minute_costs, minute_lags = [], []
            row = minutes[-1]
            print(
                f"    minute {row['minute']:3d}: {'push' if arrival_mode == 'realtime' else 'chunk'} "
                f"p50 {row['p50_ms']:7.1f} ms p95 {row['p95_ms']:7.1f} ms, lag max {row['lag_max_s']:.2f} s end "
                f"{row['lag_end_s']:.2f} s, RSS {row['rss_mib']:7.1f} MiB",
                flush=True,
            )
    kinds.close()
    committed = "".join(e.text for e in all_events if isinstance(e, Delta))
    stream.cancel()
    drafted, accepted = tally.drafted, tally.accepted
    seconds = sum(pushed_chunks) * chunk_s
    decodes = stream.decode_calls - decodes_before
    return {
        "chunks": sum(pushed_chunks),
        "wall_s": time.monotonic() - began,
        "p50_ms": 1000 * statistics.median(costs),
        "p95_ms": 1000 * percentile(costs, 95),
        "worst_minute_p95_ms": max((m["p95_ms"] for m in minutes), default=float("nan")),
        "rtf": sum(costs) / seconds,
        "cpu_p50_ms": 1000 * statistics.median(cpu),
        "cpu_p95_ms": 1000 * percentile(cpu, 95),
        "forwards_per_chunk": (steering.forwards - forwards_before) / len(costs),
        "lag_at_end_s": finish_s - seconds,
        "commit_p50_s": percentile(latencies, 50),
        "commit_p95_s": percentile(latencies, 95),
        "deltas_matched": len(latencies),
        "stage_ms_per_chunk": {name: 1000 * value / len(costs) for name, value in stages.items()},
        "prefilled_rows_per_chunk": tally.prefilled_rows / len(costs),
        "drafted": drafted,
        "accepted": accepted,
        "rss_end_mib": rss_mib(),
        "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,  # conversion included
        "chunk_costs_s": costs,
        "pushes": pushes,
        "committed_text": committed,  # the deltas joined: equal across runs that must decode the same
        # Committed words that are not whole words of the script: a few are words cut at a segment's edge; a
        # steered model that wanders (as the steering once did after a rollback into the language header)
        # decodes more than speech would.
        "stray_words": sum(1 for word in committed.split() if word not in SCRIPT_WORDS),
        "minutes": minutes,
        "keeps_up": percentile(costs, 95) < chunk_s,
        # --arrival (realtime: each push carries every chunk that arrived while the previous one ran)
        "arrival": arrival_mode,
        "push_count": len(costs),
        "push_chunks": pushed_chunks,
        "chunks_per_push_mean": sum(pushed_chunks) / len(pushed_chunks),
        "chunks_per_push_max": max(pushed_chunks),
        "decodes": decodes,
        "decodes_per_min": decodes / (seconds / 60),
        "cpu_s": sum(cpu),
        "lag_p50_s": percentile(lags, 50),
        "lag_p95_s": percentile(lags, 95),
        "lag_max_s": max(lags),
        "lag_bounded": lag_is_bounded(lags, chunk_s),
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--work", type=Path, default=Path("/tmp/r2t2-live"))
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument("--sizes", default="0.6b,1.7b")
    parser.add_argument("--types", default="q8_0,q4_k")
    parser.add_argument("--chunks", default="320,640,1000", help="chunk sizes in ms")
    parser.add_argument("--configs", default="app,cli-live")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument(
        "--tower-type",
        default="default",
        help="tower_weight_type; default: not named, so the engine's CPU default (bf16 on a CPU with AVX512-BF16, "
        "else native); q8_0 as the default GGUF package stores it; native runs the random bf16 as f32",
    )
    parser.add_argument("--no-draft", action="store_true", help="greedy decoding without the previous answer")
    parser.add_argument(
        "--arrival",
        choices=("chunk", "realtime"),
        default="chunk",
        help="chunk: one chunk per push; realtime: each push carries all audio that arrived while the last ran",
    )
    parser.add_argument(
        "--pauses",
        default="0.6,1.4",
        metavar="LO,HI",
        help="seconds of pause after each sentence (uniform), on top of the 0.35 s of silence espeak-ng ends it "
        "with unless --run-on",
    )
    parser.add_argument(
        "--run-on",
        action="store_true",
        help="cut espeak-ng's own trailing silence: a pause is then all the silence between sentences (with "
        "--pauses 0.05,0.15 the talk rarely pauses long enough for vad_min_silence_ms to end speech)",
    )
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument(
        "--stream-option",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="extra request option for every stream, e.g. rolling_window_seconds=16 (JSON value)",
    )
    parser.add_argument(
        "--session-option",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="extra session option over the config's, e.g. vad_min_silence_ms=2000 (JSON value)",
    )
    args = parser.parse_args()
    stream_options = {k: json.loads(v) for k, _, v in (o.partition("=") for o in args.stream_option)}
    session_options = {k: json.loads(v) for k, _, v in (o.partition("=") for o in args.session_option)}
    print_machine_header(args.threads)
    from inference.engine import EngineRequest
    from inference.families.confucius4_r2t2.engine import create_engine

    low, _, high = args.pauses.partition(",")
    audio = speech(args.minutes, (float(low), float(high)), args.run_on)
    print(
        f"speech: {audio.size / SAMPLE_RATE / 60:.1f} min of espeak-ng sentences with pauses of {args.pauses} s"
        + (" (run on: espeak-ng's trailing silence cut)" if args.run_on else ""),
        flush=True,
    )
    results = []
    for size in args.sizes.split(","):
        model = build(args.work / f"model-{size}", SHAPES[size])
        for storage in args.types.split(","):
            for config in args.configs.split(","):
                named_tower = {} if args.tower_type == "default" else {"tower_weight_type": args.tower_type}
                session = {
                    "thinker_weight_type": storage,
                    **named_tower,
                    **CONFIGS[config],
                    **session_options,
                }
                engine = create_engine(EngineRequest(model, "confucius4_r2t2", session, "cpu", args.threads))
                steering = Steering(engine.thinker.context, engine.checkpoint.special.eos[0])
                clock = StageClock(engine)
                try:
                    for chunk_ms in (float(c) for c in args.chunks.split(",")):
                        name = f"{size} {storage} (tower {engine.session.tower_weight_type}) {config} chunk {chunk_ms:.0f} ms"
                        print(f"  {name}{' (no draft)' if args.no_draft else ''}:", flush=True)
                        result = run(
                            engine,
                            steering,
                            clock,
                            audio,
                            chunk_ms,
                            not args.no_draft,
                            stream_options,
                            args.arrival,
                        )
                        result.update(
                            size=size,
                            type=storage,
                            tower=engine.session.tower_weight_type,
                            config=config,
                            chunk_ms=chunk_ms,
                        )
                        results.append(result)
                        stages = " ".join(f"{k} {v:.0f}" for k, v in result["stage_ms_per_chunk"].items())
                        rate = result["accepted"] / result["drafted"] if result["drafted"] else float("nan")
                        print(
                            f"  {name}: p50 {result['p50_ms']:.0f} ms p95 {result['p95_ms']:.0f} ms (worst "
                            f"minute p95 {result['worst_minute_p95_ms']:.0f}) | RTF {result['rtf']:.2f}, lag at "
                            f"end {result['lag_at_end_s']:.1f} s | commit p50 {result['commit_p50_s']:.2f} s "
                            f"p95 {result['commit_p95_s']:.2f} s ({result['deltas_matched']} deltas) | per "
                            f"chunk ms: {stages}, {result['prefilled_rows_per_chunk']:.0f} rows prefilled, "
                            f"{result['forwards_per_chunk']:.1f} decode forwards | CPU s per chunk p50 "
                            f"{result['cpu_p50_ms'] / 1000:.2f} p95 {result['cpu_p95_ms'] / 1000:.2f} | draft {result['accepted']}/{result['drafted']} accepted "
                            f"({rate:.0%}) | RSS {result['rss_end_mib']:.0f} MiB (peak {result['peak_rss_mib']:.0f}) | "
                            f"{'keeps up' if result['keeps_up'] else 'falls behind'}",
                            flush=True,
                        )
                        print("\n".join(push_breakdown(result["pushes"])), flush=True)
                        words = len(result["committed_text"].split())
                        # A word cut at a segment's edge is what a real model does too; more is a wandering answer.
                        if result["stray_words"] > max(2, words // 100):
                            print(
                                f"  WARNING {name}: {result['stray_words']} of {words} committed words are not "
                                "the script's: the steered answer wandered, so its costs are not speech's",
                                flush=True,
                            )
                        if args.arrival == "realtime":
                            print(
                                f"  {name} realtime: lag p50 {result['lag_p50_s']:.2f} s p95 "
                                f"{result['lag_p95_s']:.2f} s max {result['lag_max_s']:.2f} s "
                                f"({'bounded' if result['lag_bounded'] else 'GROWING'}) | "
                                f"{result['chunks_per_push_mean']:.2f} chunks per push (max "
                                f"{result['chunks_per_push_max']}) | {result['decodes_per_min']:.1f} decodes/min | "
                                f"CPU {result['cpu_s']:.1f} s",
                                flush=True,
                            )
                finally:
                    engine.close()
    if args.json is not None:
        args.json.write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
