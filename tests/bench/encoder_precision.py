"""How far each Captioneer weight type moves the Parakeet encoder output from torch's f32 output.

The reference comes from ``peers/export_onnx_asr.py --verify --save-reference REF.npz`` (random features,
torch f32 encoder of the bench's full-size random v3 checkpoint), which prints the same measures for
onnx-asr's fp32 and int8 exports on the same input; together they say which precisions are comparable.
Types as in the other benches: ``q6_k/q6_k`` also puts the pointwise conv kernels in q6_k.

    .venv/bin/python tests/bench/encoder_precision.py --model MODEL_DIR --reference REF.npz [--types f32,q6_k/q6_k]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests.bench import machine  # noqa: E402


def measure(
    model: Path, features: np.ndarray, valid: int, expected: np.ndarray, spec: str, threads: int
) -> str:
    from inference.engine import load_engine

    options = machine.parakeet_weight_options(spec)
    with machine.gemm_of(spec):  # f32@ggml: ggml's own f32 products for this type only
        engine = load_engine(model, "parakeet_tdt", options, backend="cpu", threads=threads)
    with engine:
        got = engine.encoder.encode(features, valid).hidden
        gemm = engine.backend.f32_gemm
    frames = min(len(got), len(expected))
    diff = np.abs(got[:frames] - expected[:frames])
    rel_rms = np.sqrt(np.mean(diff**2) / np.mean(expected[:frames] ** 2))
    return (
        f"captioneer {options['weight_type']} (pointwise convs {options['conv_weight_type']}; f32 products on "
        f"{gemm}): {frames} frames, "
        f"max |captioneer - torch| {diff.max():.2e} (reference max {np.abs(expected).max():.2e}), "
        f"mean {diff.mean():.2e}, relative RMS {rel_rms:.2e}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--model", type=Path, required=True, help="the bench's random v3 checkpoint folder")
    parser.add_argument(
        "--reference", type=Path, required=True, help="npz from export_onnx_asr.py --save-reference"
    )
    parser.add_argument("--types", default="f32,q8_0/q8_0,q6_k/q6_k,q4_k/q4_k")
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    ref = np.load(args.reference)
    features, valid, expected = ref["features"], int(ref["valid_frames"]), ref["reference"]
    for spec in args.types.split(","):
        print(measure(args.model, features, valid, expected, spec, args.threads), flush=True)


if __name__ == "__main__":
    main()
