"""K-quant and int8 weight types and quantised pointwise convs on a v3-shaped encoder.

The fixture models are too narrow for K-quants (rows must hold whole 256-value blocks), so this builds a
2-layer encoder with the v3 block shapes scaled to hidden 256 in random weights (numpy, no torch) and holds
each storage type to a stated bound on the distance of its output from the f32 encoder's. Outputs are
LayerNorm-ed (unit scale: a wrong kernel gives errors of order 1), so absolute bounds are meaningful; measured
on the dev machine (max abs / RMS): f16 0.0028 / 0.0006, q8_0 0.058 / 0.013, q6_k 0.12 / 0.033, q4_k 0.49 /
0.13, int8 0.081 / 0.018 (Gaussian random weights are the hardest case for block quantisers) — bounds are ~2x
those.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from inference.errors import UsageError
from inference.families.parakeet_tdt.config import parse_encoder_config
from inference.families.parakeet_tdt.encoder import ParakeetEncoder
from inference.native import open_backend, open_checkpoint

HIDDEN, LAYERS, HEADS, FFN, SUB = 256, 2, 4, 1024, 256
# weight type -> (max abs, RMS) bound on the distance from the f32 output
MATRICES = [
    "sub.linear.weight",
    *(
        f"L{i}.{name}.weight"
        for i in range(LAYERS)
        for name in (
            "feed_forward1.linear1",
            "feed_forward1.linear2",
            "feed_forward2.linear1",
            "feed_forward2.linear2",
            "q_proj",
            "k_proj",
            "v_proj",
            "o_proj",
            "relative_k_proj",
            "conv.pointwise_conv1",
            "conv.pointwise_conv2",
        )
    ),
]
# max |diff| measured: f16 0.0028, bf16 0.019 (RMS 0.0042), q8_0 0.058, q6_k 0.12, q4_k 0.49, int8 0.081 (RMS 0.018,
# 2 threads: activations take one u8 scale per thread's rows); bounds about 2x
BOUNDS = {
    "f16": (0.006, 0.0013),
    "bf16": (0.04, 0.009),
    "q8_0": (0.12, 0.025),
    "q6_k": (0.24, 0.066),
    "q4_k": (0.9, 0.26),
    "int8": (0.16, 0.036),
}
# The ggml type each weight type stores matrices in (int8: I8 with row scales, computed by ONNX Runtime).
GGML_NAME = {"int8": "i8"}


def _tensors(rng: np.random.Generator) -> dict[str, np.ndarray]:
    def normal(*shape: int, scale: float = 0.05) -> np.ndarray:
        return (rng.standard_normal(shape) * scale).astype(np.float32)

    def zeros(n: int) -> np.ndarray:
        return np.zeros(n, np.float32)

    t: dict[str, np.ndarray] = {}
    sub = "encoder.subsampling."
    t[sub + "layers.0.weight"], t[sub + "layers.0.bias"] = normal(SUB, 1, 3, 3, scale=0.3), zeros(SUB)
    for dw, pw in ((2, 3), (5, 6)):
        t[f"{sub}layers.{dw}.weight"], t[f"{sub}layers.{dw}.bias"] = (
            normal(SUB, 1, 3, 3, scale=0.3),
            zeros(SUB),
        )
        t[f"{sub}layers.{pw}.weight"], t[f"{sub}layers.{pw}.bias"] = normal(SUB, SUB, 1, 1), zeros(SUB)
    t[sub + "linear.weight"], t[sub + "linear.bias"] = normal(HIDDEN, SUB * 16), zeros(HIDDEN)
    for i in range(LAYERS):
        p = f"encoder.layers.{i}."
        for norm in ("norm_feed_forward1", "norm_self_att", "norm_conv", "norm_feed_forward2", "norm_out"):
            t[p + norm + ".weight"], t[p + norm + ".bias"] = 1.0 + normal(HIDDEN, scale=0.1), normal(HIDDEN)
        for ff in ("feed_forward1", "feed_forward2"):
            t[p + ff + ".linear1.weight"], t[p + ff + ".linear2.weight"] = (
                normal(FFN, HIDDEN),
                normal(HIDDEN, FFN),
            )
        for proj in ("q_proj", "k_proj", "v_proj", "o_proj", "relative_k_proj"):
            t[p + "self_attn." + proj + ".weight"] = normal(HIDDEN, HIDDEN)
        t[p + "self_attn.bias_u"], t[p + "self_attn.bias_v"] = (
            normal(HEADS, HIDDEN // HEADS),
            normal(HEADS, HIDDEN // HEADS),
        )
        t[p + "conv.pointwise_conv1.weight"] = normal(2 * HIDDEN, HIDDEN, 1)
        t[p + "conv.depthwise_conv.weight"] = normal(HIDDEN, 1, 9, scale=0.2)
        t[p + "conv.norm.weight"], t[p + "conv.norm.bias"] = 1.0 + normal(HIDDEN, scale=0.1), normal(HIDDEN)
        t[p + "conv.norm.running_mean"] = normal(HIDDEN)
        t[p + "conv.norm.running_var"] = 1.0 + np.abs(normal(HIDDEN, scale=0.2))
        t[p + "conv.pointwise_conv2.weight"] = normal(HIDDEN, HIDDEN, 1)
    return t


@pytest.fixture(scope="module")
def encoder_parts(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    from safetensors.numpy import save_file

    path = Path(tmp_path_factory.mktemp("v3_narrow")) / "model.safetensors"
    save_file(_tensors(np.random.default_rng(7)), str(path))
    hp = parse_encoder_config(
        {
            "hidden_size": HIDDEN,
            "num_hidden_layers": LAYERS,
            "num_attention_heads": HEADS,
            "intermediate_size": FFN,
            "hidden_act": "silu",
            "attention_bias": False,
            "convolution_bias": False,
            "conv_kernel_size": 9,
            "subsampling_factor": 8,
            "subsampling_conv_channels": SUB,
            "subsampling_conv_kernel_size": 3,
            "subsampling_conv_stride": 2,
            "num_mel_bins": 128,
            "max_position_embeddings": 5000,
            "scale_input": False,
        },
        "config.json",
    )
    features = np.random.default_rng(8).standard_normal((400, 128)).astype(np.float32)
    with open_backend("cpu", threads=2) as backend, open_checkpoint(path) as checkpoint:
        with ParakeetEncoder(backend, checkpoint, checkpoint, hp) as reference:
            exact = reference.encode(features, 400).hidden
        yield backend, checkpoint, hp, features, exact


@pytest.mark.parametrize("weight_type", sorted(BOUNDS))
def test_quantised_weights_and_pointwise_convs_stay_close_to_f32(encoder_parts, weight_type: str) -> None:  # type: ignore[no-untyped-def]
    backend, checkpoint, hp, features, exact = encoder_parts
    with ParakeetEncoder(
        backend, checkpoint, checkpoint, hp, weight_type=weight_type, conv_weight_type=weight_type
    ) as encoder:
        types = {name: encoder.weights[name].type.name.lower() for name in MATRICES}
        approx = encoder.encode(features, 400).hidden
    # Every matrix is quantised (linears and pointwise kernels); vectors, depthwise taps and the im2col
    # subsampling kernels stay f32.
    assert set(types.values()) == {GGML_NAME.get(weight_type, weight_type)}, types
    diff = np.abs(approx - exact)
    max_bound, rms_bound = BOUNDS[weight_type]
    assert diff.max() < max_bound and np.sqrt(np.mean(diff**2)) < rms_bound, (
        diff.max(),
        np.sqrt(np.mean(diff**2)),
    )
    assert diff.max() > 0  # the quantised weights were used


def test_unknown_weight_type_is_refused(encoder_parts) -> None:  # type: ignore[no-untyped-def]
    backend, checkpoint, hp, _, _ = encoder_parts
    with pytest.raises(UsageError, match="q5_1"):
        ParakeetEncoder(backend, checkpoint, checkpoint, hp, weight_type="q5_1")


def test_k_quants_on_a_model_too_narrow_for_their_blocks_take_q8_0_like_weight_type() -> None:
    """The fixture model's layer rows (64, 128 values) do not fill 256-value blocks: with weight_type and
    conv_weight_type q6_k those matrices, pointwise kernels included, take q8_0 (32-value blocks; the loader's
    rule, also the R2T2 tower's), the subsampling linear, with 256-value rows, takes q6_k, and the encoder runs."""
    import json

    from inference.audio.io import load_audio_file
    from inference.families.parakeet_tdt.config import FeatureConfig
    from inference.families.parakeet_tdt.frontend import compute_features

    root = Path(__file__).resolve().parents[1] / "fixtures" / "parakeet_tdt"
    cfg = json.loads((root / "models" / "tiny_a" / "config.json").read_text())
    hp = parse_encoder_config(cfg["encoder_config"], "config.json")
    features = compute_features(load_audio_file(root / "audio" / "short.wav"), FeatureConfig())
    with (
        open_backend("cpu", threads=2) as backend,
        open_checkpoint(root / "models" / "tiny_a" / "model.safetensors") as ck,
    ):
        with ParakeetEncoder(backend, ck, ck, hp) as reference:
            exact = reference.encode(features.values, features.valid_frames).hidden
        with ParakeetEncoder(backend, ck, ck, hp, weight_type="q6_k", conv_weight_type="q6_k") as narrow:
            layer_types = {
                name: narrow.weights[f"L{i}.{name}.weight"].type.name.lower()
                for i in range(hp.num_hidden_layers)
                for name in (
                    "conv.pointwise_conv1",
                    "conv.pointwise_conv2",
                    "q_proj",
                    "feed_forward1.linear1",
                )
            }
            assert set(layer_types.values()) == {"q8_0"}, layer_types
            assert narrow.weights["sub.linear.weight"].type.name.lower() == "q6_k"
            approx = narrow.encode(features.values, features.valid_frames).hidden
    max_bound, _ = BOUNDS["q6_k"]
    assert 0 < np.abs(approx - exact).max() < max_bound
