"""The usage example of inference/native/__init__.py, run end to end against numpy."""

from __future__ import annotations

import numpy as np
import pytest
from safetensors.numpy import save_file

from inference.native import GraphCache, load_weights, open_checkpoint


@pytest.mark.parametrize(("storage", "tol"), [("f32", 1e-4), ("f16", 3e-3)])
def test_linear_layernorm_attention_block(cpu_backend, tmp_path, storage, tol):
    rng = np.random.default_rng(0)
    dim, heads = 64, 4
    weights_np = {
        "proj.weight": rng.standard_normal((dim, dim)).astype(np.float32) * 0.1,
        "proj.bias": rng.standard_normal(dim).astype(np.float32),
        "ln.weight": rng.standard_normal(dim).astype(np.float32),
        "ln.bias": rng.standard_normal(dim).astype(np.float32),
        "qkv.weight": rng.standard_normal((3 * dim, dim)).astype(np.float32) * 0.1,
    }
    save_file(weights_np, str(tmp_path / "model.safetensors"))

    with (
        open_checkpoint(tmp_path / "model.safetensors") as ckpt,
        load_weights(cpu_backend, ckpt, storage=storage) as weights,
    ):

        def build(g, frames):
            x = g.input("x", (frames, dim))
            mask = g.input("mask", (frames, frames))
            h = g.linear(x, weights["proj.weight"], weights["proj.bias"])
            h = g.layer_norm(h, weights["ln.weight"], weights["ln.bias"], eps=1e-5)
            qkv = g.linear(h, weights["qkv.weight"])
            q, k, v = (
                g.permute(g.reshape(t, (frames, heads, dim // heads)), (1, 0, 2))
                for t in g.split(qkv, -1, (dim, dim, dim))
            )
            a = g.attention(q, k, v, mask)
            g.output("y", g.reshape(g.permute(a, (1, 0, 2)), (frames, dim)))

        with GraphCache(cpu_backend, build) as graphs:
            frames = 24
            x = rng.standard_normal((frames, dim)).astype(np.float32)
            mask = np.triu(np.full((frames, frames), -np.inf, np.float32), 1)
            y = graphs.run(frames, x=x, mask=mask)["y"]

    w = weights_np
    h = x @ w["proj.weight"].T + w["proj.bias"]
    h = (h - h.mean(-1, keepdims=True)) / np.sqrt(h.var(-1, keepdims=True) + 1e-5) * w["ln.weight"] + w[
        "ln.bias"
    ]
    q, k, v = (
        t.reshape(frames, heads, dim // heads).transpose(1, 0, 2)
        for t in np.split(h @ w["qkv.weight"].T, 3, -1)
    )
    s = q @ k.transpose(0, 2, 1) / np.sqrt(dim // heads) + mask
    p = np.exp(s - s.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    expected = (p @ v).transpose(1, 0, 2).reshape(frames, dim)
    np.testing.assert_allclose(y, expected, atol=tol * np.abs(expected).max(), rtol=0)
