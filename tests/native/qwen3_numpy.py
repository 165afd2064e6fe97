"""Test support: a float64 numpy Qwen3 decoder and a hand-written tiny Qwen3 GGUF.

The numpy model follows the transformers Qwen3 code (docs/reference_parity.md §2.6): RMSNorm, per-head
q_norm/k_norm before RoPE, GQA, NeoX rotate-half RoPE, SwiGLU MLP, tied or separate LM head.
Weights use the HF names below the text-model prefix (``embed_tokens.weight``, ``layers.0.…``).
The GGUF writer here is deliberately independent of the production converter.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import gguf
import numpy as np


@dataclass(frozen=True)
class TinyQwen3:
    vocab_size: int = 264
    hidden_size: int = 64
    intermediate_size: int = 96
    num_hidden_layers: int = 2
    num_attention_heads: int = 4
    num_key_value_heads: int = 2
    head_dim: int = 32  # deliberately != hidden / heads
    rope_theta: float = 10000.0
    rms_norm_eps: float = 1e-6
    max_position_embeddings: int = 512
    tie_word_embeddings: bool = True


def random_weights(
    cfg: TinyQwen3, seed: int = 0, embed_std: float = 1.0, residual_gain: float = 1.0
) -> dict[str, np.ndarray]:
    """Random weights; a small ``embed_std`` with a large ``residual_gain`` keeps greedy decoding
    from locking onto one repeated token (tied head + residual stream favour the input token)."""
    rng = np.random.default_rng(seed)
    h, hd = cfg.hidden_size, cfg.head_dim

    def linear(out_dim: int, in_dim: int) -> np.ndarray:
        return (rng.standard_normal((out_dim, in_dim)) / np.sqrt(in_dim)).astype(np.float32)

    def norm(dim: int) -> np.ndarray:
        return (1.0 + 0.2 * rng.standard_normal(dim)).astype(np.float32)

    w = {"embed_tokens.weight": (embed_std * rng.standard_normal((cfg.vocab_size, h))).astype(np.float32)}
    for i in range(cfg.num_hidden_layers):
        p = f"layers.{i}."
        w[p + "input_layernorm.weight"] = norm(h)
        w[p + "self_attn.q_proj.weight"] = linear(cfg.num_attention_heads * hd, h)
        w[p + "self_attn.k_proj.weight"] = linear(cfg.num_key_value_heads * hd, h)
        w[p + "self_attn.v_proj.weight"] = linear(cfg.num_key_value_heads * hd, h)
        w[p + "self_attn.o_proj.weight"] = residual_gain * linear(h, cfg.num_attention_heads * hd)
        w[p + "self_attn.q_norm.weight"] = norm(hd)
        w[p + "self_attn.k_norm.weight"] = norm(hd)
        w[p + "post_attention_layernorm.weight"] = norm(h)
        w[p + "mlp.gate_proj.weight"] = linear(cfg.intermediate_size, h)
        w[p + "mlp.up_proj.weight"] = linear(cfg.intermediate_size, h)
        w[p + "mlp.down_proj.weight"] = residual_gain * linear(h, cfg.intermediate_size)
    w["norm.weight"] = norm(h)
    if not cfg.tie_word_embeddings:
        w["lm_head.weight"] = linear(cfg.vocab_size, h) * 4.0
    return w


def _rms_norm(x: np.ndarray, weight: np.ndarray, eps: float) -> np.ndarray:
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * weight


def _rope(x: np.ndarray, positions: np.ndarray, theta: float) -> np.ndarray:
    """NeoX / rotate-half RoPE over the last axis; x is (L, heads, head_dim)."""
    half = x.shape[-1] // 2
    inv_freq = theta ** (-np.arange(0, half, dtype=np.float64) * 2.0 / x.shape[-1])
    angles = positions[:, None].astype(np.float64) * inv_freq[None, :]
    cos = np.concatenate([np.cos(angles)] * 2, axis=-1)[:, None, :]
    sin = np.concatenate([np.sin(angles)] * 2, axis=-1)[:, None, :]
    rotated = np.concatenate([-x[..., half:], x[..., :half]], axis=-1)
    return x * cos + rotated * sin


def qwen3_logits(weights: dict[str, np.ndarray], cfg: TinyQwen3, embeddings: np.ndarray) -> np.ndarray:
    """Logits (L, vocab) for input embedding rows (L, hidden) at positions 0..L-1 (float64)."""
    w = {k: v.astype(np.float64) for k, v in weights.items()}
    x = np.asarray(embeddings, dtype=np.float64)
    length = x.shape[0]
    positions = np.arange(length)
    nh, nkv, hd = cfg.num_attention_heads, cfg.num_key_value_heads, cfg.head_dim
    causal = np.triu(np.full((length, length), -np.inf), k=1)
    for i in range(cfg.num_hidden_layers):
        p = f"layers.{i}."
        h = _rms_norm(x, w[p + "input_layernorm.weight"], cfg.rms_norm_eps)
        q = (h @ w[p + "self_attn.q_proj.weight"].T).reshape(length, nh, hd)
        k = (h @ w[p + "self_attn.k_proj.weight"].T).reshape(length, nkv, hd)
        v = (h @ w[p + "self_attn.v_proj.weight"].T).reshape(length, nkv, hd)
        q = _rope(_rms_norm(q, w[p + "self_attn.q_norm.weight"], cfg.rms_norm_eps), positions, cfg.rope_theta)
        k = _rope(_rms_norm(k, w[p + "self_attn.k_norm.weight"], cfg.rms_norm_eps), positions, cfg.rope_theta)
        k = np.repeat(k, nh // nkv, axis=1)
        v = np.repeat(v, nh // nkv, axis=1)
        scores = np.einsum("qhd,khd->hqk", q, k) / np.sqrt(hd) + causal
        scores = np.exp(scores - scores.max(axis=-1, keepdims=True))
        scores /= scores.sum(axis=-1, keepdims=True)
        attn = np.einsum("hqk,khd->qhd", scores, v).reshape(length, nh * hd)
        x = x + attn @ w[p + "self_attn.o_proj.weight"].T
        h = _rms_norm(x, w[p + "post_attention_layernorm.weight"], cfg.rms_norm_eps)
        gate = h @ w[p + "mlp.gate_proj.weight"].T
        up = h @ w[p + "mlp.up_proj.weight"].T
        x = x + (gate / (1.0 + np.exp(-gate)) * up) @ w[p + "mlp.down_proj.weight"].T
    x = _rms_norm(x, w["norm.weight"], cfg.rms_norm_eps)
    head = w.get("lm_head.weight", w["embed_tokens.weight"])
    return x @ head.T


def greedy_ids(weights: dict[str, np.ndarray], cfg: TinyQwen3, prompt: np.ndarray, steps: int) -> list[int]:
    """Greedy continuation by re-running the full prefix (no cache); ties go to the lowest id."""
    rows = np.asarray(prompt, dtype=np.float64)
    out: list[int] = []
    for _ in range(steps):
        token = int(np.argmax(qwen3_logits(weights, cfg, rows)[-1]))
        out.append(token)
        rows = np.vstack([rows, weights["embed_tokens.weight"][token][None, :]])
    return out


def byte_level_tokens(vocab_size: int) -> tuple[list[str], list[int], list[str]]:
    """A GPT-2 byte-level vocabulary: 256 byte symbols, two merges, Qwen specials, [PAD] filler."""
    byte_symbols = list(_bytes_to_unicode().values())
    merges = ["Ġ t", "h e"]
    tokens = byte_symbols + ["Ġt", "he", "<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    types = [gguf.TokenType.NORMAL] * 258 + [gguf.TokenType.CONTROL] * 3
    assert len(tokens) <= vocab_size
    for i in range(len(tokens), vocab_size):
        tokens.append(f"[PAD{i}]")
        types.append(gguf.TokenType.UNUSED)
    return tokens, [int(t) for t in types], merges


def _bytes_to_unicode() -> dict[int, str]:
    printable = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1))
    printable += list(range(ord("®"), ord("ÿ") + 1))
    mapping, extra = {}, 0
    for b in range(256):
        if b in printable:
            mapping[b] = chr(b)
        else:
            mapping[b] = chr(256 + extra)
            extra += 1
    return dict(sorted(mapping.items()))


_GGUF_NAMES = {
    "input_layernorm.weight": "attn_norm.weight",
    "self_attn.q_proj.weight": "attn_q.weight",
    "self_attn.k_proj.weight": "attn_k.weight",
    "self_attn.v_proj.weight": "attn_v.weight",
    "self_attn.o_proj.weight": "attn_output.weight",
    "self_attn.q_norm.weight": "attn_q_norm.weight",
    "self_attn.k_norm.weight": "attn_k_norm.weight",
    "post_attention_layernorm.weight": "ffn_norm.weight",
    "mlp.gate_proj.weight": "ffn_gate.weight",
    "mlp.up_proj.weight": "ffn_up.weight",
    "mlp.down_proj.weight": "ffn_down.weight",
}


def write_qwen3_gguf(path: Path, weights: dict[str, np.ndarray], cfg: TinyQwen3) -> Path:
    """An f32 llama.cpp GGUF (architecture qwen3) holding ``weights``."""
    writer = gguf.GGUFWriter(str(path), "qwen3")
    writer.add_context_length(cfg.max_position_embeddings)
    writer.add_embedding_length(cfg.hidden_size)
    writer.add_block_count(cfg.num_hidden_layers)
    writer.add_feed_forward_length(cfg.intermediate_size)
    writer.add_head_count(cfg.num_attention_heads)
    writer.add_head_count_kv(cfg.num_key_value_heads)
    writer.add_key_length(cfg.head_dim)
    writer.add_value_length(cfg.head_dim)
    writer.add_rope_freq_base(cfg.rope_theta)
    writer.add_layer_norm_rms_eps(cfg.rms_norm_eps)
    writer.add_file_type(gguf.LlamaFileType.ALL_F32)
    tokens, types, merges = byte_level_tokens(cfg.vocab_size)
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre("qwen2")
    writer.add_token_list(tokens)
    writer.add_token_types(types)
    writer.add_token_merges(merges)
    writer.add_eos_token_id(tokens.index("<|im_end|>"))
    writer.add_add_bos_token(False)
    writer.add_tensor("token_embd.weight", weights["embed_tokens.weight"])
    for i in range(cfg.num_hidden_layers):
        for hf_name, gguf_name in _GGUF_NAMES.items():
            writer.add_tensor(f"blk.{i}.{gguf_name}", weights[f"layers.{i}.{hf_name}"])
    writer.add_tensor("output_norm.weight", weights["norm.weight"])
    if "lm_head.weight" in weights:
        writer.add_tensor("output.weight", weights["lm_head.weight"])
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def relative_error(actual: np.ndarray, expected: np.ndarray) -> float:
    return float(np.max(np.abs(actual - expected)) / np.max(np.abs(expected)))
