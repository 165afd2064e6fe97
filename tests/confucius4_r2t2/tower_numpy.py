"""A plain numpy (float64) re-statement of the Qwen3-ASR audio tower, for test lengths the fixtures lack.

Written from docs/reference_parity.md §2.4 independently of the ggml graph (explicit compaction and per-window
attention instead of a mask); the tests first check it against the reference fixtures, then use it on edge
lengths (a 1-frame tail, window boundaries, short clips).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

_ERF = np.vectorize(math.erf, otypes=[np.float64])


def gelu(x: np.ndarray) -> np.ndarray:
    return 0.5 * x * (1.0 + _ERF(x / math.sqrt(2.0)))


def conv2d_s2p1(x: np.ndarray, weight: np.ndarray, bias: np.ndarray) -> np.ndarray:
    """x (N, C, H, W), weight (O, C, 3, 3): stride 2, padding 1."""
    n, c, h, w = x.shape
    oh, ow = (h - 1) // 2 + 1, (w - 1) // 2 + 1
    padded = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    out = np.zeros((n, weight.shape[0], oh, ow))
    for i in range(3):
        for j in range(3):
            patch = padded[:, :, i : i + 2 * oh : 2, j : j + 2 * ow : 2]  # (N, C, oh, ow)
            out += np.einsum("nchw,oc->nohw", patch, weight[:, :, i, j])
    return out + bias[None, :, None, None]


def _post_conv_length(frames: int) -> int:
    for _ in range(3):
        frames = (frames + 1) // 2  # ceil(frames / 2): kernel 3, stride 2, padding 1
    return frames


def layer_norm(x: np.ndarray, weight: np.ndarray, bias: np.ndarray, eps: float = 1e-5) -> np.ndarray:
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * weight + bias


def positions(length: int, channels: int) -> np.ndarray:
    half = channels // 2
    inv = np.exp(-np.log(10000.0) / (half - 1) * np.arange(half))
    t = np.arange(length)[:, None] * inv[None, :]
    return np.concatenate([np.sin(t), np.cos(t)], axis=1)


def tower(mel: np.ndarray, get: Callable[[str], np.ndarray], cfg) -> np.ndarray:
    """mel (mels, valid frames) -> (tokens, output_dim); ``get(name)`` returns a float weight by legacy name."""
    p = "thinker.audio_tower."
    frames = mel.shape[1]
    chunk = 2 * cfg.n_window
    if frames < chunk:
        chunks = [mel]
    else:
        count = -(-frames // chunk)
        padded = np.zeros((mel.shape[0], count * chunk))
        padded[:, :frames] = mel
        chunks = [padded[:, i * chunk : (i + 1) * chunk] for i in range(count)]
    lengths = [min(chunk, frames - i * chunk) for i in range(len(chunks))]
    x = np.stack(chunks)[:, None].astype(np.float64)
    for i in (1, 2, 3):
        x = gelu(conv2d_s2p1(x, get(f"{p}conv2d{i}.weight"), get(f"{p}conv2d{i}.bias")))
    n, c, f, t = x.shape
    x = x.transpose(0, 3, 1, 2).reshape(n, t, c * f) @ get(f"{p}conv_out.weight").T
    x = x + positions(t, x.shape[-1])[None]
    kept = [x[i, : _post_conv_length(lengths[i])] for i in range(n)]
    h = np.concatenate(kept)
    per_chunk = max(k.shape[0] for k in kept)
    window = per_chunk * (cfg.n_window_infer // chunk)
    heads = cfg.encoder_attention_heads
    hd = h.shape[1] // heads
    for layer in range(cfg.encoder_layers):
        q = f"{p}layers.{layer}."
        a = layer_norm(h, get(q + "self_attn_layer_norm.weight"), get(q + "self_attn_layer_norm.bias"))
        proj = {
            k: a @ get(q + f"self_attn.{k}_proj.weight").T + get(q + f"self_attn.{k}_proj.bias")
            for k in "qkv"
        }
        out = np.zeros_like(a)
        for start in range(0, h.shape[0], window):
            rows = slice(start, min(start + window, h.shape[0]))
            for head in range(heads):
                cols = slice(head * hd, (head + 1) * hd)
                scores = proj["q"][rows, cols] @ proj["k"][rows, cols].T * hd**-0.5
                scores = np.exp(scores - scores.max(-1, keepdims=True))
                out[rows, cols] = scores / scores.sum(-1, keepdims=True) @ proj["v"][rows, cols]
        h = h + out @ get(q + "self_attn.out_proj.weight").T + get(q + "self_attn.out_proj.bias")
        a = layer_norm(h, get(q + "final_layer_norm.weight"), get(q + "final_layer_norm.bias"))
        a = gelu(a @ get(q + "fc1.weight").T + get(q + "fc1.bias"))
        h = h + a @ get(q + "fc2.weight").T + get(q + "fc2.bias")
    h = layer_norm(h, get(f"{p}ln_post.weight"), get(f"{p}ln_post.bias"))
    h = gelu(h @ get(f"{p}proj1.weight").T + get(f"{p}proj1.bias"))
    return h @ get(f"{p}proj2.weight").T + get(f"{p}proj2.bias")
