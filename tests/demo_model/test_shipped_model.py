"""The shipped demo model (resources/demo_model) is complete, small, and in the layout the engine loads."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from safetensors.numpy import load_file
from tokenizers import Tokenizer

REPO = Path(__file__).resolve().parents[2]
MODEL = REPO / "resources" / "demo_model"
SHIPPED = ["config.json", "model.safetensors", "processor_config.json", "tokenizer.json", "PROVENANCE.md"]


@pytest.fixture(scope="module")
def config() -> dict:
    return json.loads((MODEL / "config.json").read_text())


@pytest.fixture(scope="module")
def weights() -> dict[str, np.ndarray]:
    return load_file(MODEL / "model.safetensors")


def test_all_files_shipped_and_under_25_mb() -> None:
    missing = [name for name in SHIPPED if not (MODEL / name).is_file()]
    assert not missing, f"missing from resources/demo_model: {missing}"
    total = sum(p.stat().st_size for p in MODEL.iterdir() if p.is_file())
    assert total < 25 * 1024 * 1024


def test_config_meets_the_loader_contract(config: dict) -> None:
    # docs/families/parakeet_tdt.md §1: what Captioneer's parakeet_tdt loader requires
    assert config["model_type"] == "parakeet_tdt"
    assert config["num_decoder_layers"] == 2
    assert config["durations"] == [0, 1, 2, 3, 4]
    assert config["blank_token_id"] == config["vocab_size"] - 1
    enc = config["encoder_config"]
    assert (
        enc["subsampling_factor"],
        enc["subsampling_conv_kernel_size"],
        enc["subsampling_conv_stride"],
    ) == (8, 3, 2)
    assert enc["num_mel_bins"] == 128
    assert enc["hidden_size"] % enc["num_attention_heads"] == 0


def test_processor_config_holds_the_128_mel_frontend() -> None:
    processor = json.loads((MODEL / "processor_config.json").read_text())
    fe = processor["feature_extractor"]
    assert (fe["feature_size"], fe["sampling_rate"], fe["n_fft"], fe["win_length"], fe["hop_length"]) == (
        128,
        16000,
        512,
        400,
        160,
    )
    assert fe["preemphasis"] == pytest.approx(0.97)
    assert processor["blank_token"] == "<blank>"
    assert processor["decoder_type"] == "tdt"


def test_tokenizer_is_sentencepiece_style_with_blank_last(config: dict) -> None:
    raw = json.loads((MODEL / "tokenizer.json").read_text())
    assert raw["pre_tokenizer"]["type"] == "Metaspace"
    assert raw["pre_tokenizer"]["prepend_scheme"] == "always"
    assert raw["decoder"]["type"] == "Metaspace"
    tokenizer = Tokenizer.from_file(str(MODEL / "tokenizer.json"))
    assert tokenizer.get_vocab_size() == config["vocab_size"]
    assert tokenizer.token_to_id("<blank>") == config["blank_token_id"]
    assert tokenizer.token_to_id("<pad>") == config["pad_token_id"]
    blank = [t for t in raw["added_tokens"] if t["content"] == "<blank>"]
    assert blank and blank[0]["special"] is True
    encoding = tokenizer.encode("please open the window in the kitchen")
    assert encoding.tokens[0].startswith("\u2581")
    assert tokenizer.decode(encoding.ids) == "please open the window in the kitchen"


def test_weights_are_f32_finite_with_a_zero_blank_embedding(config: dict, weights: dict) -> None:
    floats = {name: w for name, w in weights.items() if not name.endswith("num_batches_tracked")}
    assert all(w.dtype == np.float32 and np.isfinite(w).all() for w in floats.values())
    embedding = weights["decoder.embedding.weight"]
    assert embedding.shape == (config["vocab_size"], config["decoder_hidden_size"])
    assert not embedding[config["blank_token_id"]].any()  # docs/reference_parity.md §1.5
    assert weights["joint.head.weight"].shape == (config["vocab_size"] + 5, config["decoder_hidden_size"])
    layers = {int(name.split(".")[2]) for name in weights if name.startswith("encoder.layers.")}
    assert layers == set(range(config["encoder_config"]["num_hidden_layers"]))
    assert "decoder.lstm.weight_hh_l1" in weights
