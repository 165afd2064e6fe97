"""Live-stream speed of Confucius4-R2T2 / Qwen3-ASR: per-chunk latency and streaming RTF, caches on vs off.

Random weights of the full Qwen3-ASR-1.7B shape and of the 0.6B shape (audio tower d_model 896, 18 layers;
Qwen3-0.6B thinker), made once by the torch worker of ``tests/bench/bench_r2t2.py`` in the reference venv. The
thinker runs as q8_0 and q4_k. A 30 s speech clip (the fixture's long clip) is pushed chunk by chunk; each
push of one chunk returns after that chunk's decode, so its wall time is the chunk's latency. Configurations
take turns (cache on and off, the order alternating per repetition, after one untimed warm-up stream that
builds the tower graphs) and figures are medians over ``--reps``; the 25-30 s stage split (tower, thinker
prefill, greedy decoding) shows where a late chunk's time goes.

    nice -n 10 .venv/bin/python tests/bench/bench_r2t2_stream.py --reference-python REFVENV/bin/python \\
        --work /tmp/r2t2-stream-bench [--sizes 1.7b,0.6b] [--types q8_0,q4_k] [--chunks 320,1000] [--reps 1]
    (--tiny: a small model, to check the script itself)

Random weights never emit EOS, so every decode generates ``--max-tokens`` tokens (default 32, the session
default); a real model stops after the few new words of a chunk, so decode time here is an upper bound. Their
text would also grow by ~27 tokens per chunk and overflow the context within a minute, so the text the state
machine sees is replaced by a script growing at 3.3 tokens per second of audio (English at 150 words/min in
Qwen's tokenizer; the bench checkpoints' tiny tokenizer needs fewer words for that) (every model call still runs in
full: frontend, tower, prefill of the prompt with that text prefix, greedy decoding).
Printed per configuration: p50/p95 chunk latency, p50 over chunks ending 2-5 s and 25-30 s into the clip, the
streaming RTF (sum of chunk latencies / audio seconds), and whether it keeps up with real time.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]
FIXTURE = REPO / "tests" / "fixtures" / "confucius4_r2t2" / "checkpoint_hf"
TORCH_BENCH = REPO / "tests" / "bench" / "bench_r2t2.py"
SIDECARS = ("tokenizer.json", "tokenizer_config.json", "processor_config.json", "chat_template.jinja")
EOS = [332, 330]
SHAPES = {
    "1.7b": {
        "audio": dict(
            encoder_layers=24,
            encoder_attention_heads=16,
            encoder_ffn_dim=4096,
            d_model=1024,
            downsample_hidden_size=480,
            output_dim=2048,
            n_window_infer=800,
        ),
        "text": dict(
            hidden_size=2048,
            intermediate_size=6144,
            num_hidden_layers=28,
            num_attention_heads=16,
            num_key_value_heads=8,
            head_dim=128,
            vocab_size=151936,
        ),
    },
    "0.6b": {
        "audio": dict(
            encoder_layers=18,
            encoder_attention_heads=14,
            encoder_ffn_dim=3584,
            d_model=896,
            downsample_hidden_size=480,
            output_dim=1024,
            n_window_infer=800,
        ),
        "text": dict(
            hidden_size=1024,
            intermediate_size=3072,
            num_hidden_layers=28,
            num_attention_heads=16,
            num_key_value_heads=8,
            head_dim=128,
            vocab_size=151936,
        ),
    },
    "tiny": {
        "audio": dict(
            encoder_layers=2,
            encoder_attention_heads=4,
            encoder_ffn_dim=256,
            d_model=128,
            downsample_hidden_size=32,
            output_dim=256,
            n_window_infer=800,
        ),
        "text": dict(
            hidden_size=256,
            intermediate_size=512,
            num_hidden_layers=2,
            num_attention_heads=4,
            num_key_value_heads=2,
            head_dim=64,
            vocab_size=4096,
        ),
    },
}


def build_model(model_dir: Path, size: str, ref_option: str | None) -> Path:
    if (model_dir / "config.json").is_file():
        return model_dir
    from tests.bench.machine import reference_python

    ref_python = reference_python(ref_option)
    model_dir.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        [
            ref_python,
            str(TORCH_BENCH),
            "--torch-worker",
            "create",
            "--work",
            str(model_dir),
            "--shape",
            json.dumps(SHAPES[size]),
        ],
        check=True,
    )
    for name in SIDECARS:
        shutil.copy(FIXTURE / name, model_dir / name)
    (model_dir / "generation_config.json").write_text(
        json.dumps({"eos_token_id": EOS, "pad_token_id": 330, "max_new_tokens": 512}), encoding="utf-8"
    )
    return model_dir


WORDS = (
    "the quick brown fox jumps over the lazy dog near the river bank every morning the old fisherman walks "
    "to the harbour and checks his nets before the sun rises"
).split()


TOKENS_PER_SECOND = 3.3  # English speech at ~150 words/min (2.5 words/s) in Qwen's BPE (~1.3 tokens/word)


class ScriptedText:
    """Runs the real decoder for its cost, answers with a transcript growing by ``tokens_per_second`` tokens of
    the checkpoint's tokenizer per audio second. The bench checkpoints carry the fixture's tiny tokenizer (2.8
    tokens per word of the script, against ~1.3 for Qwen's), so the script's words come at the rate that gives
    a real transcript's token count: the prompt the thinker prefills then has a real prompt's length."""

    def __init__(self, real, tokens_per_second: float = TOKENS_PER_SECOND) -> None:
        self.real = real
        sample = " ".join(WORDS * 4)
        tokens_per_word = len(real.encode(sample)) / (4 * len(WORDS))
        self.words_per_second = tokens_per_second / tokens_per_word

    def encode(self, text: str) -> list[int]:
        return self.real.encode(text)

    def decode(self, ids) -> str:
        return self.real.decode(ids)

    def generate(self, audio: np.ndarray, prefix: str, max_tokens: int) -> str:
        self.real.generate(audio, prefix, max_tokens)
        count = int(audio.size / 16000 * self.words_per_second)
        full = " ".join(WORDS[i % len(WORDS)] for i in range(count))
        return full[len(prefix) :] if full.startswith(prefix) else full


class StageClock:
    """Wall seconds spent in the tower, the thinker prefill and greedy decoding (wrapped engine methods)."""

    def __init__(self, engine) -> None:
        self.totals = {"tower": 0.0, "prefill": 0.0, "decode": 0.0}
        for name, owner, method in (
            ("tower", engine.tower, "encode"),
            ("prefill", engine.thinker, "prefill_rows"),
            ("decode", engine.thinker, "decode_greedy"),
        ):
            setattr(owner, method, self._timed(name, getattr(owner, method)))

    def _timed(self, name: str, fn):
        def wrapper(*args, **kwargs):
            began = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                self.totals[name] += time.perf_counter() - began

        return wrapper

    def snapshot(self) -> dict[str, float]:
        return dict(self.totals)


def run_stream(
    engine,
    audio: np.ndarray,
    chunk_ms: float,
    cache: bool,
    max_tokens: int,
    clock: StageClock | None = None,
    options: dict | None = None,
) -> list[tuple[float, float, dict[str, float]]]:
    """(audio seconds at the end of the chunk, wall seconds of its decode, seconds per stage) for every chunk."""
    stream = engine.open_stream(
        language="English",
        chunk_size_ms=chunk_ms,
        max_tokens=max_tokens,
        stream_cache=cache,
        **(options or {}),
    )
    stream.recognizer.decoder = ScriptedText(stream.recognizer.decoder)
    step = stream.options.chunk_samples
    out = []
    for start in range(0, audio.size - step + 1, step):
        before = clock.snapshot() if clock else {}
        began = time.perf_counter()
        stream.push(audio[start : start + step])
        wall = time.perf_counter() - began
        stages = {k: v - before[k] for k, v in clock.snapshot().items()} if clock else {}
        out.append(((start + step) / 16000, wall, stages))
    stream.cancel()
    return out


def summarise(runs: list[list[tuple[float, float, dict[str, float]]]], seconds: float) -> dict[str, float]:
    def median_of(select, value=lambda row: row[1]) -> float:
        return statistics.median(
            statistics.median([value(row) for row in run if select(row[0])] or [float("nan")]) for run in runs
        )

    def p95(run):
        walls = sorted(row[1] for row in run)
        return walls[min(len(walls) - 1, int(round(0.95 * (len(walls) - 1))))]

    late = lambda t: 25.0 <= t <= 30.0  # noqa: E731
    return {
        "p50": median_of(lambda t: True),
        "p95": statistics.median(p95(run) for run in runs),
        "p50_2_5s": median_of(lambda t: 2.0 <= t <= 5.0),
        "p50_25_30s": median_of(late),
        "rtf": statistics.median(sum(row[1] for row in run) / seconds for run in runs),
        **{
            f"late_{stage}": median_of(late, lambda row, s=stage: row[2].get(s, float("nan")))
            for stage in ("tower", "prefill", "decode")
        },
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--work", type=Path, default=Path("/tmp/r2t2-stream-bench"))
    sys.path.insert(0, str(REPO))
    from tests.bench.machine import add_reference_option

    add_reference_option(parser)  # only used to build a missing random checkpoint
    parser.add_argument("--sizes", default="1.7b,0.6b")
    parser.add_argument("--types", default="q8_0,q4_k")
    parser.add_argument("--chunks", default="320,1000", help="chunk sizes in ms")
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--max-tokens", type=int, default=32)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--reps", type=int, default=1)
    parser.add_argument("--tiny", action="store_true")
    parser.add_argument(
        "--stream-option",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="extra stream option, e.g. rolling_window_seconds=16 (value parsed as JSON)",
    )
    args = parser.parse_args()
    options = {key: json.loads(value) for key, _, value in (o.partition("=") for o in args.stream_option)}
    from tests.bench.machine import print_machine_header  # CPU, flags, load; warns on a busy machine

    print_machine_header(args.threads)

    sys.path.insert(0, str(REPO / "tests" / "confucius4_r2t2"))
    from r2t2_fixtures import load_audio

    from inference.engine import EngineRequest
    from inference.families.confucius4_r2t2.engine import create_engine

    audio = load_audio()["clip_long"][: int(args.seconds * 16000)]
    sizes = ["tiny"] if args.tiny else args.sizes.split(",")
    for size in sizes:
        model_dir = build_model(args.work / f"model-{size}", size, args.reference_python)
        for storage in args.types.split(","):
            engine = create_engine(
                EngineRequest(
                    model_dir,
                    "confucius4_r2t2",
                    {"thinker_weight_type": storage, "endpointing": False},  # the LSP on one segment
                    "cpu",
                    args.threads,
                )
            )
            try:
                clock = StageClock(engine)
                for chunk_ms in (float(c) for c in args.chunks.split(",")):
                    # Warm-up: builds the tower graphs of every tail shape this chunk size meets (untimed).
                    run_stream(engine, audio, chunk_ms, False, args.max_tokens, options=options)
                    runs: dict[bool, list] = {True: [], False: []}
                    for rep in range(args.reps):
                        for cache in (True, False) if rep % 2 == 0 else (False, True):
                            runs[cache].append(
                                run_stream(engine, audio, chunk_ms, cache, args.max_tokens, clock, options)
                            )
                    for cache in (True, False):
                        s = summarise(runs[cache], audio.size / 16000)
                        keeps_up = s["rtf"] < 1.0 and s["p95"] < chunk_ms / 1000
                        print(
                            f"{size} {storage} chunk {chunk_ms:.0f} ms cache {'on ' if cache else 'off'}: "
                            f"p50 {s['p50']:.3f} s p95 {s['p95']:.3f} s | p50 2-5 s {s['p50_2_5s']:.3f} "
                            f"25-30 s {s['p50_25_30s']:.3f} | RTF {s['rtf']:.2f} | "
                            f"{'keeps up' if keeps_up else 'falls behind'} | 25-30 s stages: tower "
                            f"{s['late_tower']:.3f} prefill {s['late_prefill']:.3f} decode {s['late_decode']:.3f}",
                            flush=True,
                        )
            finally:
                engine.close()


if __name__ == "__main__":
    main()
