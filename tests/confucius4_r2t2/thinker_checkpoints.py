"""Test support: tiny Qwen3-ASR checkpoints (thinker part) in the legacy and HF layouts.

Random Qwen3 text weights from ``tests/native/qwen3_numpy.py`` saved as safetensors (f32 or bf16),
a hand-written ``config.json`` following docs/reference_parity.md §2.1/§2.2, a byte-level BPE tokenizer with
the Qwen special tokens, and a few audio-tower tensors the thinker converter must ignore.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers

from tests.native import qwen3_numpy as ref  # noqa: E402

SPECIAL_TOKENS = [
    "<|endoftext|>",
    "<|im_start|>",
    "<|im_end|>",
    "<|audio_start|>",
    "<|audio_end|>",
    "<|audio_pad|>",
]
ASR_TEXT = "<asr_text>"  # added but not special
BASE_VOCAB = 256 + 2  # byte symbols + two merges
TOKEN_IDS = {token: BASE_VOCAB + i for i, token in enumerate([*SPECIAL_TOKENS, ASR_TEXT])}
AUDIO_PAD = TOKEN_IDS["<|audio_pad|>"]
EOS_IDS = [TOKEN_IDS["<|im_end|>"], TOKEN_IDS["<|endoftext|>"]]


def write_safetensors(path: Path, tensors: dict[str, np.ndarray], bf16: bool = False) -> None:
    """A safetensors file; float arrays become F32, or BF16 (rounded to nearest even) when asked."""
    header, blobs, offset = {}, [], 0
    for name, array in tensors.items():
        array = np.ascontiguousarray(array, dtype=np.float32)
        if bf16:
            bits = array.view(np.uint32)
            rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16
            blob, dtype = rounded.astype("<u2").tobytes(), "BF16"
        else:
            blob, dtype = array.astype("<f4").tobytes(), "F32"
        header[name] = {
            "dtype": dtype,
            "shape": list(array.shape),
            "data_offsets": [offset, offset + len(blob)],
        }
        blobs.append(blob)
        offset += len(blob)
    encoded = json.dumps(header).encode()
    encoded += b" " * (-len(encoded) % 8)
    with path.open("wb") as handle:
        handle.write(len(encoded).to_bytes(8, "little"))
        handle.write(encoded)
        for blob in blobs:
            handle.write(blob)


def bf16_round(weights: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """What a bf16 checkpoint holds, back in float32 (for the numpy reference)."""
    out = {}
    for name, array in weights.items():
        bits = np.ascontiguousarray(array, dtype=np.float32).view(np.uint32)
        rounded = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16) << 16
        out[name] = rounded.astype(np.uint32).view(np.float32)
    return out


def build_tokenizer() -> Tokenizer:
    byte_symbols = list(ref._bytes_to_unicode().values())
    vocab = {symbol: i for i, symbol in enumerate(byte_symbols)}
    vocab["Ġt"], vocab["he"] = 256, 257
    tokenizer = Tokenizer(models.BPE(vocab=vocab, merges=[("Ġ", "t"), ("h", "e")]))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tokenizer.decoder = decoders.ByteLevel()
    tokenizer.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in SPECIAL_TOKENS])
    tokenizer.add_tokens([AddedToken(ASR_TEXT, special=False, normalized=False)])
    return tokenizer


def text_config(cfg, hf_layout: bool) -> dict:
    text = {
        "vocab_size": cfg.vocab_size,
        "hidden_size": cfg.hidden_size,
        "intermediate_size": cfg.intermediate_size,
        "num_hidden_layers": cfg.num_hidden_layers,
        "num_attention_heads": cfg.num_attention_heads,
        "num_key_value_heads": cfg.num_key_value_heads,
        "head_dim": cfg.head_dim,
        "hidden_act": "silu",
        "max_position_embeddings": cfg.max_position_embeddings,
        "rms_norm_eps": cfg.rms_norm_eps,
        "attention_bias": False,
        "tie_word_embeddings": cfg.tie_word_embeddings,
    }
    if hf_layout:
        text |= {
            "model_type": "qwen3",
            "rope_parameters": {"rope_type": "default", "rope_theta": cfg.rope_theta},
        }
    else:
        text |= {
            "model_type": "qwen3_asr_text",
            "rope_theta": cfg.rope_theta,
            "rope_scaling": {
                "interleaved": True,
                "mrope_interleaved": True,
                "mrope_section": [8, 4, 4],
                "rope_type": "default",
                "type": "default",
            },
        }
    return text


AUDIO_CONFIG = {
    "num_mel_bins": 128,
    "encoder_layers": 1,
    "encoder_attention_heads": 2,
    "encoder_ffn_dim": 16,
    "d_model": 8,
    "n_window": 50,
    "n_window_infer": 400,
    "conv_chunksize": 500,
    "downsample_hidden_size": 4,
    "activation_function": "gelu",
}


def write_checkpoint(
    directory: Path,
    cfg,
    weights: dict[str, np.ndarray],
    layout: str,
    bf16: bool = False,
    tokenizer_files: str = "tokenizer.json",
) -> Path:
    """Write a tiny checkpoint (``layout`` legacy or hf) holding ``weights`` (HF names below the text prefix)."""
    directory.mkdir(parents=True, exist_ok=True)
    hf = layout == "hf"
    prefix = "model.language_model." if hf else "thinker.model."
    tensors = {prefix + name: array for name, array in weights.items() if name != "lm_head.weight"}
    if "lm_head.weight" in weights:
        tensors["lm_head.weight" if hf else "thinker.lm_head.weight"] = weights["lm_head.weight"]
    tower = "model.audio_tower." if hf else "thinker.audio_tower."
    rng = np.random.default_rng(7)
    tensors[tower + "conv_out.weight"] = rng.standard_normal((8, 64)).astype(np.float32)
    tensors[tower + "ln_post.weight"] = np.ones(8, dtype=np.float32)
    write_safetensors(directory / "model.safetensors", tensors, bf16=bf16)

    ids = {
        "audio_token_id": AUDIO_PAD,
        "audio_start_token_id": TOKEN_IDS["<|audio_start|>"],
        "audio_end_token_id": TOKEN_IDS["<|audio_end|>"],
    }
    audio = dict(AUDIO_CONFIG, output_dim=cfg.hidden_size)
    if hf:
        config = {
            "model_type": "qwen3_asr",
            "audio_config": audio | {"model_type": "qwen3_asr_encoder"},
            "text_config": text_config(cfg, True),
            "audio_token_id": AUDIO_PAD,
            "eos_token_id": EOS_IDS,
            "pad_token_id": TOKEN_IDS["<|endoftext|>"],
            "tie_word_embeddings": cfg.tie_word_embeddings,
        }
    else:
        config = {
            "model_type": "qwen3_asr",
            "support_languages": ["English"],
            "thinker_config": {
                "audio_config": audio | {"model_type": "qwen3_asr_audio_encoder"},
                "text_config": text_config(cfg, False),
                **ids,
            },
        }
    (directory / "config.json").write_text(json.dumps(config, indent=1), encoding="utf-8")
    generation = {"eos_token_id": EOS_IDS, "pad_token_id": TOKEN_IDS["<|endoftext|>"], "max_new_tokens": 32}
    (directory / "generation_config.json").write_text(json.dumps(generation), encoding="utf-8")

    tokenizer = build_tokenizer()
    if tokenizer_files == "tokenizer.json":
        tokenizer.save(str(directory / "tokenizer.json"))
    else:  # the legacy release's vocab.json + merges.txt + tokenizer_config.json
        data = json.loads(tokenizer.to_str())
        (directory / "vocab.json").write_text(json.dumps(data["model"]["vocab"]), encoding="utf-8")
        merges = [m if isinstance(m, str) else " ".join(m) for m in data["model"]["merges"]]
        (directory / "merges.txt").write_text("#version: 0.2\n" + "\n".join(merges) + "\n", encoding="utf-8")
        decoder = {
            str(t["id"]): {"content": t["content"], "special": t["special"]} for t in data["added_tokens"]
        }
        (directory / "tokenizer_config.json").write_text(
            json.dumps({"added_tokens_decoder": decoder}), encoding="utf-8"
        )
    return directory
