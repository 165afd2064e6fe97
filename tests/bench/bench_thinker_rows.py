"""What a live R2T2 decode pays the thinker for, by batch size: a re-prefill of N rows after a kept KV prefix,
a one-row greedy step and a k-row draft verification, and which of them give a whole prefill's (or a single
step's) bits.

A live chunk re-prefills the rows after the first one that changed (the open tower window and the text after
the audio), at least ``TILED_ATTENTION_MIN_ROWS`` (64) of them with an f16 KV cache, and then decodes greedy steps
and draft batches (docs/families/confucius4_r2t2.md §7.4). This times each part on any thinker GGUF — the random
full-size ones ``bench_r2t2_live.py`` writes (``<work>/model-0.6b/.captioneer/thinker-q4_k.gguf``) — with the
thinker's live context options (f16 KV, libllama's flash-attention choice), in rounds, medians:

    .venv/bin/python tests/bench/bench_thinker_rows.py /tmp/r2t2-live/model-0.6b/.captioneer/thinker-q4_k.gguf

Exactness (2 threads, random rows): for each re-prefill size, the largest difference of the last logits from
prefilling the whole prompt at once; for each verification size, the largest difference of a batch row from the
same token decoded as a one-row step.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from inference.native.llama import ContextOptions, LlamaContext, LlamaModel, default_threads  # noqa: E402
from tests.bench import machine  # noqa: E402

PROMPT_ROWS = 160  # a live prompt: system turn, an open tower window, the text after the audio
TOKENS = [11, 22, 33, 44, 55, 66, 77, 88]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("gguf", type=Path)
    parser.add_argument("--threads", type=int, default=default_threads())
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--rows", default="8,16,24,32,40,48,56,63,64,65,80,96,128", help="re-prefill sizes")
    args = parser.parse_args()
    machine.print_machine_header(args.threads)
    sizes = [int(n) for n in args.rows.split(",")]
    model = LlamaModel(args.gguf)
    context = LlamaContext(
        model,
        ContextOptions(
            n_ctx=2048, n_batch=512, n_ubatch=512, n_threads=args.threads, kv_type="f16", flash_attn=None
        ),
    )
    rng = np.random.default_rng(0)
    prompt = rng.standard_normal((PROMPT_ROWS, model.n_embd)).astype(np.float32) * 0.02

    exact: dict[int, float] = {}
    context.clear()
    whole = context.decode_embeddings(prompt, logits="last")[0]
    for rows in sizes:
        keep = PROMPT_ROWS - rows
        context.truncate(keep)
        exact[rows] = float(np.abs(context.decode_embeddings(prompt[keep:], logits="last")[0] - whole).max())
    base = context.n_past
    steps = []
    for token in TOKENS:
        steps.append(context.decode_tokens([token], logits="last")[0])
    context.truncate(base)
    step_vs_batch: dict[int, float] = {}
    for width in (2, 7, 8):  # DRAFT_BATCH_ROWS is 7: from 8 rows on ggml takes another k-quant kernel
        batch = context.decode_tokens(TOKENS[:width], logits="all")
        context.truncate(base)
        step_vs_batch[width] = max(float(np.abs(steps[i] - batch[i]).max()) for i in range(width))

    timings: dict[str, list[float]] = {f"re-prefill {n}": [] for n in sizes}
    timings.update({"step (1 row)": []}, **{f"verify {k} rows": [] for k in (2, 4, 6, 8)})
    for _ in range(args.rounds):
        for rows in sizes:
            keep = PROMPT_ROWS - rows
            context.truncate(keep)
            started = time.perf_counter()
            context.decode_embeddings(prompt[keep:], logits="last")
            timings[f"re-prefill {rows}"].append(time.perf_counter() - started)
        for _ in range(5):
            started = time.perf_counter()
            context.decode_tokens(TOKENS[:1], logits="last")
            timings["step (1 row)"].append(time.perf_counter() - started)
            context.truncate(base)
        for k in (2, 4, 6, 8):
            started = time.perf_counter()
            context.decode_tokens(TOKENS[:k], logits="all")
            timings[f"verify {k} rows"].append(time.perf_counter() - started)
            context.truncate(base)
    print(
        f"{args.gguf.name}, prompt {PROMPT_ROWS} rows, {args.threads} threads, medians of {args.rounds} rounds"
    )
    for name, values in timings.items():
        rows = int(name.split()[1]) if name.startswith("re-prefill") else None
        note = "" if rows is None else f"   last logits vs whole prefill: {exact[rows]:.4f}"
        print(f"  {name:>16}: {statistics.median(values) * 1000:7.1f} ms{note}")
    for width, difference in step_vs_batch.items():
        print(f"  a row of a {width}-row batch vs the same token as a one-row step: {difference:.4f}")
    context.close()
    model.close()


if __name__ == "__main__":
    main()
