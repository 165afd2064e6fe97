"""Every graph op against a numpy reference, with odd sizes and non-contiguous (transposed) inputs."""

from __future__ import annotations

import math

import numpy as np
import pytest

from inference.errors import UsageError


def randn(*shape: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


ERF = np.vectorize(math.erf, otypes=[np.float32])


def close(actual: np.ndarray, expected: np.ndarray, tol: float = 1e-5) -> None:
    assert actual.shape == expected.shape, (actual.shape, expected.shape)
    np.testing.assert_allclose(actual, expected, rtol=tol, atol=tol)


def softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


UNARY = {
    "gelu": (lambda g, x: g.gelu(x), lambda x: 0.5 * x * (1 + ERF(x / np.sqrt(2)))),
    "gelu_tanh": (
        lambda g, x: g.gelu(x, approximate=True),
        lambda x: 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x**3))),
    ),
    "silu": (lambda g, x: g.silu(x), lambda x: x / (1 + np.exp(-x))),
    "relu": (lambda g, x: g.relu(x), lambda x: np.maximum(x, 0)),
    "sigmoid": (lambda g, x: g.sigmoid(x), lambda x: 1 / (1 + np.exp(-x))),
    "tanh": (lambda g, x: g.tanh(x), np.tanh),
    "exp": (lambda g, x: g.exp(x), np.exp),
    "scale": (lambda g, x: g.scale(x, 0.37), lambda x: x * np.float32(0.37)),
    "scale_bias": (lambda g, x: g.scale(x, 0.37, 1.5), lambda x: x * np.float32(0.37) + np.float32(1.5)),
    "mul_scalar": (lambda g, x: x * 2.5, lambda x: x * 2.5),
}


# ggml's tanh-GELU reads an f16 lookup table on the CPU; the erf GELU is computed in f32.
TOLERANCE = {"gelu": 2e-4, "gelu_tanh": 2e-3}


@pytest.mark.parametrize("name", sorted(UNARY))
@pytest.mark.parametrize("transposed", [False, True])
def test_unary_ops(run_op, name, transposed):
    op, ref = UNARY[name]
    x = randn(3, 7, 13)
    if transposed:
        got = run_op(lambda g, t: op(g, g.transpose(t)), x)
        close(got, ref(x.transpose(0, 2, 1)), TOLERANCE.get(name, 1e-5))
    else:
        close(run_op(op, x), ref(x), TOLERANCE.get(name, 1e-5))


def test_sqrt_and_log(run_op):
    x = np.abs(randn(5, 11)) + 0.1
    close(run_op(lambda g, t: g.sqrt(t), x), np.sqrt(x))
    close(run_op(lambda g, t: g.log(t), x), np.log(x))


BINARY = {
    "add": (lambda g, a, b: g.add(a, b), np.add),
    "sub": (lambda g, a, b: g.sub(a, b), np.subtract),
    "mul": (lambda g, a, b: g.mul(a, b), np.multiply),
    "operators": (lambda g, a, b: a * b + a - b, lambda a, b: a * b + a - b),
}
SHAPES = [
    ((3, 7, 13), (3, 7, 13)),
    ((3, 7, 13), (13,)),
    ((3, 7, 13), (7, 1)),
    ((3, 7, 13), (3, 1, 13)),
    ((13,), (3, 7, 13)),
    ((5, 1), (1, 9)),
]


@pytest.mark.parametrize("name", sorted(BINARY))
@pytest.mark.parametrize(("shape_a", "shape_b"), SHAPES)
def test_binary_ops_broadcast(run_op, name, shape_a, shape_b):
    op, ref = BINARY[name]
    a, b = randn(*shape_a, seed=1), randn(*shape_b, seed=2) + (3.0 if name in ("operators",) else 0.0)
    close(run_op(op, a, b), ref(a, b))


@pytest.mark.parametrize("name", ["add", "sub", "mul"])
def test_binary_ops_on_transposed_views(run_op, name):
    op, ref = BINARY[name]
    a, b = randn(2, 9, 5, seed=3), randn(2, 5, 9, seed=4) + 3.0
    got = run_op(lambda g, x, y: op(g, g.transpose(x), y), a, b)
    close(got, ref(a.transpose(0, 2, 1), b))
    got = run_op(lambda g, x, y: op(g, y, g.transpose(x)), a, b)
    close(got, ref(b, a.transpose(0, 2, 1)))


def test_broadcast_mismatch_is_a_usage_error(run_op):
    with pytest.raises(UsageError, match="broadcast"):
        run_op(lambda g, a, b: g.add(a, b), randn(4, 6), randn(4, 3))


def test_mul_mat_linear_and_matmul(run_op):
    w, x, bias = randn(5, 37, seed=5), randn(3, 37, seed=6), randn(5, seed=7)
    close(run_op(lambda g, a, b: g.mul_mat(a, b), w, x), x @ w.T, 1e-4)
    close(run_op(lambda g, xx, ww, bb: g.linear(xx, ww, bb), x, w, bias), x @ w.T + bias, 1e-4)
    x1 = randn(37, seed=8)
    close(run_op(lambda g, xx, ww: g.linear(xx, ww), x1, w), w @ x1, 1e-4)
    a, b = randn(2, 3, 4, 11, seed=9), randn(2, 3, 11, 6, seed=10)
    close(run_op(lambda g, p, q: g.matmul(p, q), a, b), a @ b, 1e-4)


def test_mul_mat_batched_broadcast_and_grouped_heads(run_op):
    w, x = randn(1, 5, 16, seed=11), randn(4, 3, 16, seed=12)
    close(run_op(lambda g, a, b: g.mul_mat(a, b), w, x), x @ w.transpose(0, 2, 1), 1e-4)
    # ggml broadcasts a's leading axis by repetition: b batch i uses a batch i // (4 // 2)
    k, q = randn(2, 7, 16, seed=13), randn(4, 3, 16, seed=14)
    expected = q @ np.repeat(k, 2, axis=0).transpose(0, 2, 1)
    close(run_op(lambda g, a, b: g.mul_mat(a, b), k, q), expected, 1e-4)


def test_mul_mat_on_permuted_operands(run_op):
    a, b = randn(7, 2, 16, seed=15), randn(3, 2, 16, seed=16)  # (time, heads, dim) as stored
    got = run_op(lambda g, p, q: g.mul_mat(g.permute(p, (1, 0, 2)), g.permute(q, (1, 0, 2))), a, b)
    close(got, b.transpose(1, 0, 2) @ a.transpose(1, 2, 0), 1e-4)


def test_mul_mat_inner_mismatch(run_op):
    with pytest.raises(UsageError, match="inner sizes"):
        run_op(lambda g, a, b: g.mul_mat(a, b), randn(4, 8), randn(3, 9))


def ref_layer_norm(x, w, b, eps):
    return (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True) + eps) * w + b


@pytest.mark.parametrize("permuted", [False, True])
def test_norms(run_op, permuted):
    x, w, b = randn(3, 5, 37, seed=17), randn(37, seed=18), randn(37, seed=19)
    src = x.transpose(1, 0, 2).copy() if permuted else x

    def maybe_permute(g, t):
        return g.permute(t, (1, 0, 2)) if permuted else t

    got = run_op(lambda g, t, ww, bb: g.layer_norm(maybe_permute(g, t), ww, bb, 1e-5), src, w, b)
    close(got, ref_layer_norm(x, w, b, 1e-5), 1e-4)
    got = run_op(lambda g, t: g.norm(maybe_permute(g, t), 1e-6), src)
    close(got, ref_layer_norm(x, 1.0, 0.0, 1e-6), 1e-4)


def test_softmax_plain_masked_and_broadcast(run_op):
    x = randn(4, 6, 9, seed=20)
    close(run_op(lambda g, t: g.softmax(t), x), softmax(x))
    mask = np.where(np.random.default_rng(1).random((6, 9)) < 0.3, -np.inf, 0).astype(np.float32)
    mask[:, 0] = 0.0
    got = run_op(lambda g, t, m: g.softmax(t, m, 0.125), x, mask)
    close(got, softmax(x * 0.125 + mask))
    got = run_op(lambda g, t, m: g.softmax(t, m, 0.125), x, mask.astype(np.float16))
    close(got, softmax(x * 0.125 + mask))
    got = run_op(lambda g, t: g.softmax(g.transpose(t), None, 2.0), x)
    close(got, softmax(2.0 * x.transpose(0, 2, 1)))


def test_softmax_mask_shape_checked(run_op):
    with pytest.raises(UsageError, match="mask"):
        run_op(lambda g, t, m: g.softmax(t, m), randn(2, 6, 9), randn(5, 9))


def ref_conv2d(x, w, stride, pad, dil=(1, 1)):
    n, c, h, wd = x.shape
    oc, _, kh, kw = w.shape
    xp = np.pad(x, ((0, 0), (0, 0), (pad[0], pad[0]), (pad[1], pad[1])))
    oh = (h + 2 * pad[0] - dil[0] * (kh - 1) - 1) // stride[0] + 1
    ow = (wd + 2 * pad[1] - dil[1] * (kw - 1) - 1) // stride[1] + 1
    out = np.zeros((n, oc, oh, ow), np.float64)
    for i in range(kh):
        for j in range(kw):
            patch = xp[
                :,
                :,
                i * dil[0] : i * dil[0] + stride[0] * oh : stride[0],
                j * dil[1] : j * dil[1] + stride[1] * ow : stride[1],
            ]
            out += np.einsum("nchw,oc->nohw", patch, w[:, :, i, j])
    return out.astype(np.float32)


def test_conv2d(run_op):
    x, w, b = randn(2, 3, 9, 11, seed=23), randn(5, 3, 3, 3, seed=24), randn(5, seed=25)
    expected = ref_conv2d(x, w, (2, 2), (1, 1)) + b[:, None, None]
    got = run_op(lambda g, t, ww, bb: g.conv2d(t, ww, bb, stride=(2, 2), padding=(1, 1)), x, w, b)
    close(got, expected, 1e-4)
    got = run_op(lambda g, t, ww: g.conv2d(t, ww, stride=(1, 2), padding=(0, 1), channels_last=True), x, w)
    close(got, ref_conv2d(x, w, (1, 2), (0, 1)).transpose(0, 2, 3, 1), 1e-4)


def test_depthwise_conv2d(run_op):
    # 20 channels: ggml's channels-contiguous kernel runs 16 in SIMD lanes and the rest one by one.
    x, w, b = randn(1, 20, 9, 10, seed=26), randn(20, 1, 3, 3, seed=27), randn(20, seed=28)
    expected = (
        np.concatenate([ref_conv2d(x[:, c : c + 1], w[c : c + 1], (2, 2), (1, 1)) for c in range(20)], 1)
        + b[:, None, None]
    )
    x_last, w_last = (
        np.ascontiguousarray(x.transpose(0, 2, 3, 1)),
        np.ascontiguousarray(w.transpose(2, 3, 1, 0)),
    )
    got = run_op(
        lambda g, t, ww, bb: g.depthwise_conv2d(t, ww, bb, stride=(2, 2), padding=(1, 1)), x_last, w_last, b
    )
    close(got, expected.transpose(0, 2, 3, 1), 1e-4)


def ref_dwconv1d(x, w, pad):
    xp = np.pad(x, [(0, 0)] * (x.ndim - 1) + [(pad, pad)]).astype(np.float64)
    k = w.shape[-1]
    t_out = xp.shape[-1] - k + 1
    return sum(xp[..., i : i + t_out] * w.reshape(w.shape[0], k)[:, i : i + 1] for i in range(k)).astype(
        np.float32
    )


@pytest.mark.parametrize("path", ["ssm_conv", "taps"])
def test_depthwise_conv1d_is_f32_exact(run_op, path):
    x, w, b = randn(2, 6, 23, seed=29), randn(6, 1, 9, seed=30), randn(6, seed=31)
    expected = ref_dwconv1d(x, w, 4) + b[:, None]
    if path == "ssm_conv":
        got = run_op(lambda g, t, ww, bb: g.depthwise_conv1d(t, ww, bb, padding=4), x, w, b)
    else:
        got = run_op(lambda g, t, ww, bb: g.depthwise_conv1d_taps(t, ww, bb, padding=4), x, w, b)
    close(got, expected, 2e-6)  # f32 exact: the f16 im2col path of ggml_conv_1d_dw is off by ~1e-2


def test_depthwise_conv1d_layouts(run_op):
    x, w = randn(6, 23, seed=32), randn(6, 5, seed=33)
    close(run_op(lambda g, t, ww: g.depthwise_conv1d(t, ww), x, w), ref_dwconv1d(x, w, 0), 2e-6)
    xt = randn(1, 23, 6, seed=34)  # time-major input (N, T, C), as the conformer has it
    got = run_op(
        lambda g, t, ww: g.depthwise_conv1d(g.transpose(t), ww, padding=2, time_major_out=True), xt, w
    )
    close(got, ref_dwconv1d(xt.transpose(0, 2, 1), w, 2).transpose(0, 2, 1), 2e-6)


def test_layout_ops(run_op):
    x = randn(2, 3, 5, 7, seed=35)
    close(run_op(lambda g, t: g.permute(t, (2, 0, 3, 1)), x), x.transpose(2, 0, 3, 1))
    close(run_op(lambda g, t: g.transpose(t, 0, 2), x), x.transpose(2, 1, 0, 3))
    close(
        run_op(lambda g, t: g.reshape(g.permute(t, (1, 0, 2, 3)), (3, -1)), x),
        x.transpose(1, 0, 2, 3).reshape(3, -1),
    )
    close(run_op(lambda g, t: g.slice(t, 2, 1, 4), x), x[:, :, 1:4])
    close(run_op(lambda g, t: g.slice(t, -1, 2, 7), x), x[..., 2:7])
    close(run_op(lambda g, t: g.split(t, 1, (1, 2))[1], x), x[:, 1:])
    close(run_op(lambda g, t: g.cont(g.transpose(t)), x), x.swapaxes(-1, -2))
    got = run_op(lambda g, t: g.cast(t, "f16"), x)
    assert got.dtype == np.float16
    close(got.astype(np.float32), x.astype(np.float16).astype(np.float32))


def test_pad(run_op):
    x = randn(3, 5, 7, seed=36)
    close(run_op(lambda g, t: g.pad(t, ((1, 0), (0, 2), (3, 1))), x), np.pad(x, ((1, 0), (0, 2), (3, 1))))
    close(
        run_op(lambda g, t: g.pad(g.transpose(t), ((0, 0), (2, 2), (0, 1))), x),
        np.pad(x.transpose(0, 2, 1), ((0, 0), (2, 2), (0, 1))),
    )


def test_reductions(run_op):
    x = randn(4, 9, seed=39)
    close(run_op(lambda g, t: g.mean(t), x), x.mean(-1, keepdims=True))
    got = run_op(lambda g, t: g.argmax(t), x)
    assert got.dtype == np.int32 and (got == x.argmax(-1)).all()


def test_glu_variants(run_op):
    x = randn(3, 5, 12, seed=40)
    a, b = x[..., :6], x[..., 6:]
    close(run_op(lambda g, t: g.glu(t), x), a / (1 + np.exp(-b)))
    close(
        run_op(lambda g, t: g.glu(g.transpose(t), axis=-1), x.transpose(0, 2, 1).copy()), a / (1 + np.exp(-b))
    )
    close(run_op(lambda g, t: g.glu(t, axis=1), x[:, :4]), x[:, :2] / (1 + np.exp(-x[:, 2:4])))


def test_attention_with_grouped_heads(run_op):
    q, k, v = randn(4, 5, 8, seed=41), randn(2, 7, 8, seed=42), randn(2, 7, 8, seed=43)
    mask = np.triu(np.full((5, 7), -np.inf, np.float32), 3)
    got = run_op(lambda g, a, b, c, m: g.attention(a, b, c, m), q, k, v, mask)
    kr, vr = np.repeat(k, 2, 0), np.repeat(v, 2, 0)
    expected = softmax(q @ kr.transpose(0, 2, 1) / np.sqrt(8) + mask) @ vr
    close(got, expected, 1e-4)


def test_mixed_float_types_are_promoted(run_op):
    a, b = randn(3, 8, seed=44), randn(8, seed=45)
    half = b.astype(np.float16)
    close(run_op(lambda g, x, y: g.add(x, y), a, half), a + half.astype(np.float32))
    close(run_op(lambda g, x, y: g.sub(y, x), a, half), half.astype(np.float32) - a)
    close(run_op(lambda g, x, y: g.mul(x, y), a, half), a * half.astype(np.float32))
    w, x16 = randn(5, 32, seed=46), randn(3, 32, seed=47).astype(np.float16)
    close(run_op(lambda g, p, q: g.mul_mat(p, q), w, x16), x16.astype(np.float32) @ w.T, 1e-4)


def test_as_strided_rel_shift(run_op):
    # Transformer-XL rel_shift: scores (heads, T, 2T-1) -> (heads, T, T) taking row i from offset T-1-i
    heads, t = 2, 5
    x = randn(heads, t, 2 * t - 1, seed=48)
    expected = np.stack([[x[h, i, t - 1 - i : 2 * t - 1 - i] for i in range(t)] for h in range(heads)])
    strides = (t * (2 * t - 1), 2 * t - 2, 1)  # row stride one element short of a full row
    got = run_op(lambda g, s: g.as_strided(s, (heads, t, t), strides, offset=t - 1), x)
    close(got, expected)
    with pytest.raises(UsageError, match="outside"):
        run_op(lambda g, s: g.as_strided(s, (heads, t, t), strides, offset=2 * t), x)


@pytest.mark.parametrize(("kv_type", "tol"), [("f32", 1e-5), ("f16", 3e-3)])
def test_flash_attention_matches_attention(run_op, kv_type, tol):
    q, k, v = randn(4, 5, 16, seed=49), randn(2, 7, 16, seed=50), randn(2, 7, 16, seed=51)
    mask = np.triu(np.full((5, 7), -np.inf, np.float32), 3)

    def op(g, a, b, c, m):
        return g.flash_attention(a, g.cast(b, kv_type), g.cast(c, kv_type), m)

    got = run_op(op, q, k, v, mask)
    kr, vr = np.repeat(k, 2, 0), np.repeat(v, 2, 0)
    expected = (softmax(q @ kr.transpose(0, 2, 1) / 4.0 + mask) @ vr).transpose(1, 0, 2)
    close(got, expected, tol)
