"""ggml's quantizer and dequantizer against the gguf package's independent numpy implementation."""

from __future__ import annotations

import numpy as np
import pytest
from gguf import GGMLQuantizationType as QT
from gguf import quants

from inference.errors import UsageError
from inference.native import GgmlType, load_api
from inference.native.quant import dequantize, fitting_type, quantize


@pytest.fixture(scope="module")
def api():
    return load_api()


def values(rows: int, cols: int) -> np.ndarray:
    return (np.random.default_rng(rows * cols).standard_normal((rows, cols)) * 3).astype(np.float32)


def test_q8_0_round_trip_matches_gguf(api):
    x = values(7, 96)
    ours = quantize(api, x, GgmlType.Q8_0)
    theirs = quants.quantize(x, QT.Q8_0)
    assert ours.shape == theirs.shape == (7, 3 * 34)
    # Same algorithm; rounding of exact .5 ties may differ between C and numpy, so compare values.
    mismatched = np.count_nonzero(ours != theirs)
    assert mismatched <= 2, mismatched
    np.testing.assert_array_equal(
        dequantize(api, ours, GgmlType.Q8_0, x.shape), quants.dequantize(ours, QT.Q8_0)
    )
    error = np.abs(dequantize(api, ours, GgmlType.Q8_0, x.shape) - x).max()
    assert 0 < error <= np.abs(x).max() / 127 * 0.51


@pytest.mark.parametrize(
    ("ggml_type", "gguf_type"), [(GgmlType.Q4_K, QT.Q4_K), (GgmlType.Q6_K, QT.Q6_K), (GgmlType.Q4_0, QT.Q4_0)]
)
def test_k_quants_dequantize_like_gguf(api, ggml_type, gguf_type):
    x = values(3, 512)
    raw = quantize(api, x, ggml_type)
    ours = dequantize(api, raw, ggml_type, x.shape)
    np.testing.assert_allclose(ours, quants.dequantize(raw, gguf_type), rtol=1e-6, atol=1e-6)
    assert np.abs(ours - x).max() < 0.25 * np.abs(x).max()


def test_float_formats(api):
    x = values(4, 33)
    f16 = quantize(api, x, GgmlType.F16)
    np.testing.assert_array_equal(f16.view(np.float16), x.astype(np.float16))
    bf16 = quantize(api, x, GgmlType.BF16)
    np.testing.assert_array_equal(bf16.view(np.uint16), quants.quantize(x, QT.BF16).view(np.uint16))
    np.testing.assert_array_equal(
        dequantize(api, bf16, GgmlType.BF16, x.shape), quants.dequantize(bf16, QT.BF16)
    )


def test_rows_that_do_not_fit_blocks_are_rejected(api):
    with pytest.raises(UsageError, match="blocks of 32"):
        quantize(api, values(2, 33), GgmlType.Q8_0)


@pytest.mark.parametrize(
    ("wanted", "row", "stored"),
    [
        (GgmlType.Q6_K, 1024, GgmlType.Q6_K),
        (GgmlType.Q6_K, 896, GgmlType.Q8_0),  # K-quant blocks hold 256 values; q8_0's 32 fit
        (GgmlType.Q4_K, 576, GgmlType.Q8_0),
        (GgmlType.Q4_K, 40, GgmlType.F32),  # neither fits
        (GgmlType.Q8_0, 40, GgmlType.F32),
        (GgmlType.F16, 7, GgmlType.F16),
    ],
)
def test_rows_that_do_not_fit_a_type_take_its_fallback(api, wanted, row, stored):
    assert fitting_type(api, wanted, row) == stored


def test_the_loader_applies_the_fallback(cpu_backend):
    from inference.native import load_weights

    arrays = {
        "wide": values(4, 512),
        "narrow": values(4, 96),
        "odd": values(4, 40),
        "norm": values(1, 512)[0],
    }
    with load_weights(cpu_backend, arrays=arrays, storage="q6_k") as store:
        assert [store[name].type for name in arrays] == [
            GgmlType.Q6_K,
            GgmlType.Q8_0,
            GgmlType.F32,
            GgmlType.F32,
        ]
