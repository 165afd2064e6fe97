"""How far each Captioneer weight type moves the Parakeet encoder output from torch's f32 output.

The reference comes from ``peers/export_onnx_asr.py --verify --save-reference REF.npz`` (random features,
torch f32 encoder of the bench's full-size random v3 checkpoint), which prints the same measures for
onnx-asr's fp32 and int8 exports on the same input; together they say which precisions are comparable.

    .venv/bin/python tests/bench/encoder_precision.py --model MODEL_DIR --reference REF.npz [--types f32,q8_0,q6_k]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))


def measure(model: Path, reference: Path, weight_type: str, threads: int) -> str:
    from inference.engine import load_engine

    ref = np.load(reference)
    features, valid, expected = ref["features"], int(ref["valid_frames"]), ref["reference"]
    options = {"weight_type": weight_type, "conv_weight_type": weight_type if weight_type != "f32" else "native"}
    with load_engine(model, "parakeet_tdt", options, backend="cpu", threads=threads) as engine:
        got = engine.encoder.encode(features, valid).hidden
    frames = min(len(got), len(expected))
    diff = np.abs(got[:frames] - expected[:frames])
    rel_rms = np.sqrt(np.mean(diff**2) / np.mean(expected[:frames] ** 2))
    return (f"captioneer {weight_type} (pointwise convs {options['conv_weight_type']}): {frames} frames, "
            f"max |captioneer - torch| {diff.max():.2e} (reference max {np.abs(expected).max():.2e}), "
            f"mean {diff.mean():.2e}, relative RMS {rel_rms:.2e}")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", type=Path, required=True, help="the bench's random v3 checkpoint folder")
    parser.add_argument("--reference", type=Path, required=True, help="npz from export_onnx_asr.py --save-reference")
    parser.add_argument("--types", default="f32,q8_0,q6_k,q4_k")
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    for weight_type in args.types.split(","):
        print(measure(args.model, args.reference, weight_type, args.threads), flush=True)


if __name__ == "__main__":
    main()
