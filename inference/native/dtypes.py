"""ggml element types, their numpy counterparts, and the weight storage types users can pick."""

from __future__ import annotations

import enum

import numpy as np

from inference.errors import UsageError


class GgmlType(enum.IntEnum):
    """Values of ``enum ggml_type`` (ggml.h) that Captioneer reads or writes."""

    F32 = 0
    F16 = 1
    Q4_0 = 2
    Q4_1 = 3
    Q5_0 = 6
    Q5_1 = 7
    Q8_0 = 8
    Q2_K = 10
    Q3_K = 11
    Q4_K = 12
    Q5_K = 13
    Q6_K = 14
    I8 = 24
    I16 = 25
    I32 = 26
    I64 = 27
    F64 = 28
    BF16 = 30


# numpy has no bfloat16: BF16 data travels as its raw uint16 bit patterns.
_NUMPY_OF_TYPE: dict[GgmlType, np.dtype] = {
    GgmlType.F32: np.dtype(np.float32),
    GgmlType.F16: np.dtype(np.float16),
    GgmlType.BF16: np.dtype(np.uint16),
    GgmlType.I8: np.dtype(np.int8),
    GgmlType.I16: np.dtype(np.int16),
    GgmlType.I32: np.dtype(np.int32),
    GgmlType.I64: np.dtype(np.int64),
    GgmlType.F64: np.dtype(np.float64),
}
_TYPE_OF_NUMPY: dict[np.dtype, GgmlType] = {
    dtype: ggml_type for ggml_type, dtype in _NUMPY_OF_TYPE.items() if ggml_type != GgmlType.BF16
}

QUANTIZED_TYPES = frozenset(
    {
        GgmlType.Q4_0,
        GgmlType.Q4_1,
        GgmlType.Q5_0,
        GgmlType.Q5_1,
        GgmlType.Q8_0,
        GgmlType.Q2_K,
        GgmlType.Q3_K,
        GgmlType.Q4_K,
        GgmlType.Q5_K,
        GgmlType.Q6_K,
    }
)


def numpy_dtype(ggml_type: GgmlType) -> np.dtype:
    """The numpy dtype holding one element of ``ggml_type`` (quantized types have none)."""
    try:
        return _NUMPY_OF_TYPE[ggml_type]
    except KeyError:
        raise UsageError(
            f"ggml type {ggml_type.name} has no numpy element type (it is block-quantized)"
        ) from None


def ggml_type_of(dtype: np.dtype | type | str) -> GgmlType:
    """The ggml type for a numpy dtype (float32, float16, int32, ...)."""
    dtype = np.dtype(dtype)
    try:
        return _TYPE_OF_NUMPY[dtype]
    except KeyError:
        allowed = ", ".join(str(d) for d in _TYPE_OF_NUMPY)
        raise UsageError(f"numpy dtype {dtype} has no ggml counterpart (use one of: {allowed})") from None


def as_ggml_type(value: GgmlType | np.dtype | type | str) -> GgmlType:
    """Accept a GgmlType, a ggml type name ('f16', 'q8_0') or a numpy dtype."""
    if isinstance(value, GgmlType):
        return value
    if isinstance(value, str) and value.upper() in GgmlType.__members__:
        return GgmlType[value.upper()]
    return ggml_type_of(value)


class StorageType(enum.StrEnum):
    """How weights are kept in backend memory; chosen at load time."""

    NATIVE = "native"  # whatever type the checkpoint stores
    F32 = "f32"
    F16 = "f16"
    BF16 = "bf16"
    Q8_0 = "q8_0"
    # K-quants run batched products on ggml's tiled int8 kernel (2-4x the f32 rate on AVX-512/VNNI);
    # q6_k keeps encoder outputs close to f32 (tests/parakeet_tdt/test_weight_types.py).
    Q6_K = "q6_k"
    Q4_K = "q4_k"
    # Per-row int8 matrices multiplied by ONNX Runtime's VNNI int8 GEMM on the CPU backend (native/int8.py).
    INT8 = "int8"

    @classmethod
    def parse(cls, value: StorageType | str) -> StorageType:
        try:
            return cls(str(value).lower())
        except ValueError:
            allowed = ", ".join(member.value for member in cls)
            raise UsageError(f"unknown weight storage type {value!r}; choose one of: {allowed}") from None

    @property
    def is_quantized(self) -> bool:
        """A block-quantised type (``native`` is not: it depends on the checkpoint)."""
        return self not in (StorageType.NATIVE, StorageType.INT8) and GgmlType[self.name] in QUANTIZED_TYPES

    @property
    def needs_matrices(self) -> bool:
        """Whether weights in this type must be 2-D matrices (block rows, or int8's per-row scales)."""
        return self.is_quantized or self is StorageType.INT8

    def ggml_type(self, stored: GgmlType) -> GgmlType:
        """The type a tensor stored as ``stored`` ends up in (int8 matrices: I8, see native/int8.py)."""
        if self is StorageType.NATIVE:
            return stored
        if self is StorageType.INT8:
            return GgmlType.I8
        return GgmlType[self.name]
