"""What the decoder's step costs in words: the demo model's held-out WER with the TDT predictor and joint in numpy
f32 against the same step on ggml with its matrices in the session's storage (``parakeet_tdt/decoder_ggml.py``:
f32 for f32, q8_0 for q8_0 and int8, ...).

The demo model (``resources/demo_model``) is the only trained Parakeet-TDT this repository has, so its margins are
a trained model's, not the random fixtures' (whose greedy steps turn on logit gaps of 0.001). For each weight type
the encoder is the same on both sides; only the decoder's step differs. Clips are every held-out split
(``heldout_speech.py``: espeak-ng and sox on PATH), clean and with 20 dB noise; ``same text`` counts transcripts
equal to the numpy step's with the same encoder.

    .venv/bin/python tests/bench/decoder_precision.py [--types f32,f16,bf16,q8_0,int8] [--clips-per-split 100]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests" / "bench"))

from heldout_speech import SPLITS, held_out_plans, render  # noqa: E402
from machine import print_machine_header  # noqa: E402

from inference.engine import load_engine  # noqa: E402
from inference.families.parakeet_tdt.checkpoint import open_parakeet_checkpoint  # noqa: E402
from inference.families.parakeet_tdt.decoder import DecoderWeights, TdtDecoder  # noqa: E402
from tests.text_metrics import word_edits  # noqa: E402

MODEL = ROOT / "resources" / "demo_model"
CONDITIONS = ("clean", "noise20")


def engines(weight_type: str, threads: int) -> tuple[Any, Any]:
    """(numpy-f32 decoder, the session's own decoder) engines over the same ``weight_type`` encoder."""
    options = {
        "weight_type": weight_type,
        "conv_weight_type": weight_type if weight_type == "int8" else "native",
    }
    own = load_engine(MODEL, "parakeet_tdt", options, backend="cpu", threads=threads)
    reference = load_engine(MODEL, "parakeet_tdt", options, backend="cpu", threads=threads)
    with open_parakeet_checkpoint(MODEL) as checkpoint:
        weights = DecoderWeights.from_checkpoint(checkpoint.tensors, checkpoint.config)
        reference.decoder.close()
        reference.decoder = TdtDecoder(weights, checkpoint.config)
    return reference, own


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--types", default="f32,f16,bf16,q8_0,int8")
    parser.add_argument(
        "--clips-per-split", type=int, default=100, help="first N clips of each split; 0 = all"
    )
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    print_machine_header(threads=args.threads)
    types = args.types.split(",")
    pairs = {t: engines(t, args.threads) for t in types}
    for t, (_reference, own) in pairs.items():
        print(f"{t}: {type(own.decoder.step).__name__} {own.decoder.step.storage_types()}", flush=True)
    plans = held_out_plans()
    words = 0
    edits = {(t, side): 0 for t in types for side in ("numpy", "own")}
    same = dict.fromkeys(types, 0)
    seconds = {(t, side): 0.0 for t in types for side in ("numpy", "own")}
    clips = 0
    for split in SPLITS:
        for clip in plans[split][: args.clips_per_split or None]:
            for condition in CONDITIONS:
                audio = render(clip, condition)
                reference_words = clip.text.lower()
                words += len(reference_words.split())
                clips += 1
                for t, (numpy_side, own_side) in pairs.items():
                    texts = {}
                    for side, engine in (("numpy", numpy_side), ("own", own_side)):
                        start = time.perf_counter()
                        texts[side] = engine.transcribe(audio).text
                        seconds[t, side] += time.perf_counter() - start
                        edits[t, side] += word_edits(reference_words, texts[side].lower())
                    same[t] += texts["numpy"] == texts["own"]
        print(f"after {split}: {clips} clips", flush=True)
    print(f"\ndemo model, {clips} held-out clips ({words} words), {args.threads} threads")
    print(
        "| weight type | WER, numpy f32 decoder | WER, decoder in the type (ggml) | same text | seconds numpy / ggml |"
    )
    print("|---|---|---|---|---|")
    for t in types:
        print(
            f"| {t} | {100 * edits[t, 'numpy'] / words:.2f} % | {100 * edits[t, 'own'] / words:.2f} % | "
            f"{same[t]} / {clips} | {seconds[t, 'numpy']:.1f} / {seconds[t, 'own']:.1f} |"
        )
    for reference, own in pairs.values():
        reference.close()
        own.close()


if __name__ == "__main__":
    main()
