"""Conversions between float32 numpy arrays and ggml's stored formats, using ggml's own code.

Quantized data travels as uint8 arrays of shape (rows, row_bytes); F16 as float16; BF16 as uint16.
"""

from __future__ import annotations

import numpy as np

from inference.errors import UsageError
from inference.native.bindings import GgmlApi
from inference.native.dtypes import GgmlType


def row_bytes(api: GgmlApi, ggml_type: GgmlType, n_per_row: int) -> int:
    return int(api.ggml_row_size(int(ggml_type), n_per_row))


def can_store_rows(api: GgmlApi, ggml_type: GgmlType, n_per_row: int) -> bool:
    """Whether rows of ``n_per_row`` elements fit whole blocks of ``ggml_type``."""
    return n_per_row % int(api.ggml_blck_size(int(ggml_type))) == 0


def fitting_type(api: GgmlApi, wanted: GgmlType, n_per_row: int) -> GgmlType:
    """The type a matrix with rows of ``n_per_row`` values is stored in when ``wanted`` is asked for: ``wanted``
    when its blocks fit the rows; otherwise q8_0 (32-value blocks, and more precise) in place of a type with
    bigger blocks (the K-quants' 256: the 0.6B R2T2 tower's 896-wide rows, narrow demo models), else f32."""
    if can_store_rows(api, wanted, n_per_row):
        return wanted
    if int(api.ggml_blck_size(int(wanted))) > 32 and can_store_rows(api, GgmlType.Q8_0, n_per_row):
        return GgmlType.Q8_0
    return GgmlType.F32


def quantize(api: GgmlApi, values: np.ndarray, ggml_type: GgmlType) -> np.ndarray:
    """float32 array (..., n_per_row) -> raw bytes (rows, row_bytes) in ``ggml_type`` (f16/bf16 too)."""
    values = np.ascontiguousarray(values, dtype=np.float32)
    n_per_row = values.shape[-1] if values.ndim else 1
    rows = values.size // n_per_row
    if ggml_type == GgmlType.F32:
        return values.reshape(rows, n_per_row).view(np.uint8)
    if not can_store_rows(api, ggml_type, n_per_row):
        block = api.ggml_blck_size(int(ggml_type))
        raise UsageError(
            f"rows of {n_per_row} values cannot be stored as {ggml_type.name} (blocks of {block})"
        )
    if api.ggml_quantize_requires_imatrix(int(ggml_type)):
        raise UsageError(f"{ggml_type.name} needs an importance matrix; pick q8_0, q4_k or q6_k instead")
    size = row_bytes(api, ggml_type, n_per_row)
    out = np.empty((rows, size), dtype=np.uint8)
    written = api.ggml_quantize_chunk(
        int(ggml_type), values.ctypes.data, out.ctypes.data, 0, rows, n_per_row, None
    )
    if written != out.nbytes:
        raise RuntimeError(f"ggml_quantize_chunk wrote {written} bytes, expected {out.nbytes}")
    return out


def dequantize(api: GgmlApi, raw: np.ndarray, ggml_type: GgmlType, shape: tuple[int, ...]) -> np.ndarray:
    """Raw bytes of a tensor stored as ``ggml_type`` -> float32 array of numpy ``shape``."""
    raw = np.ascontiguousarray(raw).reshape(-1).view(np.uint8)
    count = int(np.prod(shape, dtype=np.int64))
    if ggml_type == GgmlType.F32:
        return raw.view(np.float32)[:count].reshape(shape).copy()
    if ggml_type == GgmlType.F16:
        return raw.view(np.float16)[:count].astype(np.float32).reshape(shape)
    if ggml_type == GgmlType.BF16:
        return (raw.view(np.uint16)[:count].astype(np.uint32) << 16).view(np.float32).reshape(shape)
    traits = api.ggml_get_type_traits(int(ggml_type)).contents
    if not traits.to_float:
        raise UsageError(f"ggml cannot convert {ggml_type.name} to float")
    expected = row_bytes(api, ggml_type, shape[-1]) * (count // shape[-1])
    if raw.nbytes < expected:
        raise UsageError(f"{ggml_type.name} data of {raw.nbytes} bytes is too short for shape {shape}")
    out = np.empty(count, dtype=np.float32)
    traits.to_float(raw.ctypes.data, out.ctypes.data, count)
    return out.reshape(shape)
