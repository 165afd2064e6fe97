"""Tensor handles and THE axis convention of the native layer.

Axis convention (the only place it is written down)
---------------------------------------------------
Every shape and axis that Python code sees is in **numpy / PyTorch order, row-major**: the last
axis is the contiguous one. ggml stores the same tensor with its axes reversed: ggml's ``ne[0]``
is numpy's last axis. So a numpy array of shape ``(batch, time, channels)`` is a ggml tensor with
``ne = [channels, time, batch, 1]``, and a PyTorch ``nn.Linear`` weight of shape ``(out, in)`` is
a ggml tensor with ``ne = [in, out]`` — exactly what ``ggml_mul_mat`` wants, so linear weights are
uploaded unchanged.

Only this module and :mod:`inference.native.ops` translate between the two orders; family code
uses numpy shapes and numpy axis numbers (negative axes allowed) everywhere. ggml has no rank, so
each :class:`Tensor` remembers its numpy rank; ``shape`` is derived from ggml's ``ne`` on demand.
"""

from __future__ import annotations

from enum import Enum
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from inference.errors import UsageError
from inference.native.bindings import TensorHead
from inference.native.dtypes import GgmlType

if TYPE_CHECKING:
    from inference.native.packed_f32 import PackedMatrix

MAX_DIMS = 4


class ByteLayout(Enum):
    """How a tensor's bytes are laid out, the one place that says so."""

    GGML = "ggml"  # as ggml reads its type
    # An int8 weight matrix (N, K) of a store, bytes transposed to (K, N) for the int8 GEMM (native/int8.py):
    # only mul_mat can take it, ggml's own ops would read garbage.
    INT8_TRANSPOSED = "int8_transposed"
    # An f32 weight matrix (N, K) of a store whose bytes only ONNX Runtime holds, packed (native/packed_f32.py):
    # the ggml tensor has no data, so only mul_mat can take it.
    PACKED_F32 = "packed_f32"


@runtime_checkable
class TensorArithmetic(Protocol):
    """What the tensor operators need from the graph builder that owns an operand (native/ops.py)."""

    def add(self, a: Tensor, b: Tensor) -> Tensor: ...

    def sub(self, a: Tensor, b: Tensor) -> Tensor: ...

    def mul(self, a: Tensor, b: Tensor) -> Tensor: ...

    def scale(self, x: Tensor, factor: float, bias: float = 0.0) -> Tensor: ...


def to_ne(shape: tuple[int, ...]) -> list[int]:
    """numpy shape -> ggml ne (4 entries)."""
    if not 1 <= len(shape) <= MAX_DIMS:
        raise UsageError(f"ggml tensors have 1 to {MAX_DIMS} axes, got shape {shape}")
    if any(int(d) < 1 for d in shape):
        raise UsageError(f"every axis needs at least one element, got shape {shape}")
    return [int(d) for d in reversed(shape)] + [1] * (MAX_DIMS - len(shape))


def ggml_axis(axis: int, ndim: int) -> int:
    """numpy axis (negative allowed) -> ggml axis index."""
    if not -ndim <= axis < ndim:
        raise UsageError(f"axis {axis} is out of range for a tensor with {ndim} axes")
    return ndim - 1 - (axis % ndim)


class Tensor:
    """A ggml tensor seen from Python: a pointer plus its numpy rank.

    ``owner`` keeps alive whatever allocated the tensor (a graph builder or a weight store). ``packed``: the same
    weight packed once on ONNX Runtime (native/packed_f32.py), which products use instead of the ggml bytes.
    Arithmetic operators work on tensors that belong to a graph builder (``x + y``, ``x * w``).
    """

    __slots__ = ("ptr", "ndim", "owner", "layout", "packed")

    def __init__(
        self,
        ptr: int,
        ndim: int,
        owner: Any,
        layout: ByteLayout = ByteLayout.GGML,
        packed: PackedMatrix | None = None,
    ) -> None:
        if not ptr:
            raise UsageError("ggml returned no tensor (NULL)")
        self.ptr = ptr
        self.ndim = ndim
        self.owner = owner
        self.layout = layout
        self.packed = packed

    @property
    def _head(self) -> TensorHead:
        return TensorHead.from_address(self.ptr)

    @property
    def ne(self) -> tuple[int, int, int, int]:
        return tuple(self._head.ne)  # type: ignore[return-value]

    @property
    def nb(self) -> tuple[int, int, int, int]:
        return tuple(self._head.nb)  # type: ignore[return-value]

    @property
    def shape(self) -> tuple[int, ...]:
        ne = self._head.ne
        return tuple(ne[i] for i in range(self.ndim - 1, -1, -1))

    @property
    def type(self) -> GgmlType:
        return GgmlType(self._head.type)

    def __repr__(self) -> str:
        return f"Tensor(shape={self.shape}, type={self.type.name})"

    # Operators delegate to the graph builder that owns one of the operands.
    def _builder(self, other: Any) -> TensorArithmetic:
        for candidate in (self.owner, getattr(other, "owner", None)):
            if isinstance(candidate, TensorArithmetic):
                return candidate
        raise UsageError("arithmetic on tensors needs one operand that belongs to a graph being built")

    def __add__(self, other: Tensor) -> Tensor:
        return self._builder(other).add(self, other)

    def __radd__(self, other: Tensor) -> Tensor:
        return self._builder(other).add(other, self)

    def __sub__(self, other: Tensor) -> Tensor:
        return self._builder(other).sub(self, other)

    def __rsub__(self, other: Tensor) -> Tensor:
        return self._builder(other).sub(other, self)

    def __mul__(self, other: Tensor | float) -> Tensor:
        if isinstance(other, int | float):
            return self._builder(None).scale(self, float(other))
        return self._builder(other).mul(self, other)

    def __rmul__(self, other: Tensor | float) -> Tensor:
        if isinstance(other, int | float):
            return self._builder(None).scale(self, float(other))
        return self._builder(other).mul(other, self)
