"""Graph-building operations with numpy axis semantics (see :mod:`inference.native.tensor`).

A :class:`GraphBuilder` owns one ggml context (``no_alloc``: it only holds tensor descriptions)
and offers the operations the model families need. Every method takes and returns
:class:`~inference.native.tensor.Tensor` handles and numpy-order shapes/axes, checks shapes in
Python first (a failed ggml assertion would abort the whole process), and inserts a ``cont``
where ggml needs a contiguous operand.
"""

from __future__ import annotations

import ctypes
import functools
import inspect
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from inference.errors import UsageError
from inference.native.bindings import GgmlApi, InitParams
from inference.native.blas import OpenBlasGemm, ProductArgs
from inference.native.dtypes import GgmlType, as_ggml_type
from inference.native.int8 import Int8Args, Int8Gemm
from inference.native.packed_f32 import PackedArgs, PackedF32Gemm
from inference.native.tensor import MAX_DIMS, ByteLayout, Tensor, ggml_axis, to_ne

DEFAULT_MAX_NODES = 8192
# The ops that read int8 or packed weight matrices (ByteLayout.INT8_TRANSPOSED, PACKED_F32); every other op
# refuses them.
_WEIGHT_LAYOUT_OPS = frozenset({"mul_mat", "linear"})
# Type pairs computed as they are by add/sub/mul/div; mixed pairs are promoted to f32 like numpy
# does (the CPU backend would abort on f32 + f16 and round f16 + f32 to f16).
_BINARY_TYPES = {(GgmlType.F32, GgmlType.F32), (GgmlType.F16, GgmlType.F16), (GgmlType.BF16, GgmlType.BF16)}


_Builder = TypeVar("_Builder", bound=type)


def _refuse_weight_layouts(op: str, tensor: Tensor) -> None:
    if tensor.layout is ByteLayout.INT8_TRANSPOSED:
        raise UsageError(
            f"{op}: the int8 weight {tensor.shape} holds transposed bytes that only mul_mat can read",
            "use it through mul_mat or linear, or store this weight in another type (e.g. q8_0 or f32)",
        )
    if tensor.layout is ByteLayout.PACKED_F32:
        raise UsageError(
            f"{op}: the f32 weight {tensor.shape} is packed on ONNX Runtime, which only mul_mat can use",
            "use it through mul_mat or linear, or load the weights without pack_f32",
        )


def _layout_checked(op: str, method: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(method)
    def checked(self: Any, *args: Any, **kwargs: Any) -> Any:
        for value in (*args, *kwargs.values()):
            for item in value if isinstance(value, list | tuple) else (value,):
                if isinstance(item, Tensor):
                    _refuse_weight_layouts(op, item)
        return method(self, *args, **kwargs)

    return checked


def _ops_refuse_weight_layouts(cls: _Builder) -> _Builder:
    """Every public op but those in _WEIGHT_LAYOUT_OPS refuses int8 and packed weight matrices (ggml would read
    garbage, or nothing)."""
    for name, method in list(vars(cls).items()):
        if inspect.isfunction(method) and not name.startswith("_") and name not in _WEIGHT_LAYOUT_OPS:
            setattr(cls, name, _layout_checked(name, method))
    return cls


@_ops_refuse_weight_layouts
class GraphBuilder:
    """Collects inputs, operations and outputs of one graph. Created and owned by a Graph."""

    def __init__(
        self,
        api: GgmlApi,
        max_nodes: int = DEFAULT_MAX_NODES,
        gemm: OpenBlasGemm | None = None,
        int8: Int8Gemm | None = None,
        packed: PackedF32Gemm | None = None,
    ) -> None:
        self.api = api
        self.gemm = gemm  # big f32 weight products go to OpenBLAS when set (CPU backends)
        self.int8 = int8  # computes products with int8 weights (CPU backends that loaded some)
        self.packed = packed  # computes products with f32 weights packed once (CPU backends that packed some)
        self.row_invariant = False  # set by keep_products_on_ggml()
        # Read by the product callbacks while the graph lives.
        self.product_args: list[ProductArgs | Int8Args | PackedArgs] = []
        self.max_nodes = max_nodes
        self.max_tensors = max_nodes
        self.n_tensors = 0
        # Context memory: tensor descriptions plus the graph object itself (graph holds 2x nodes
        # so that weights from other contexts fit in as leaves).
        mem = api.ggml_tensor_overhead() * self.max_tensors + api.ggml_graph_overhead_custom(
            2 * max_nodes, False
        )
        self.ctx: int | None = api.ggml_init(InitParams(mem, None, True))
        if not self.ctx:
            raise MemoryError("ggml_init failed to allocate the graph context")
        self.inputs: dict[str, Tensor] = {}
        self.outputs: dict[str, Tensor] = {}
        self.side_effects: list[Tensor] = []  # copies into persistent tensors, run after the outputs

    # ----------------------------------------------------------------- bookkeeping
    def free(self) -> None:
        if self.ctx is not None:
            self.api.ggml_free(self.ctx)
            self.ctx = None
        for args in self.product_args:  # their plans hold addresses that die with this graph
            if isinstance(args, Int8Args):
                if self.int8 is not None:
                    self.int8.plans.forget(args.serial)
            elif isinstance(args, PackedArgs):
                if self.packed is not None:
                    self.packed.plans.forget(args.serial)
            elif self.gemm is not None:
                self.gemm.plans.forget(args.serial)
        self.product_args.clear()

    def _ctx(self) -> int:
        if self.ctx is None:
            raise UsageError("this graph has been closed")
        if self.n_tensors >= self.max_tensors - 4:
            raise UsageError(
                f"the graph needs more than {self.max_tensors} tensors",
                "pass a larger max_nodes when building it",
            )
        self.n_tensors += 1
        return self.ctx

    def _wrap(self, ptr: int, ndim: int) -> Tensor:
        return Tensor(ptr, ndim, self)

    def input(self, name: str, shape: Sequence[int], dtype: GgmlType | str | type = "f32") -> Tensor:
        """Declare an input filled from numpy at every run (shape in numpy order)."""
        if name in self.inputs:
            raise UsageError(f"graph input {name!r} is declared twice")
        shape = tuple(int(d) for d in shape)
        ggml_type = as_ggml_type(dtype)
        ne = (ctypes.c_int64 * MAX_DIMS)(*to_ne(shape))
        tensor = self._wrap(self.api.ggml_new_tensor(self._ctx(), int(ggml_type), MAX_DIMS, ne), len(shape))
        self.api.ggml_set_name(tensor.ptr, name.encode()[:63])
        self.api.ggml_set_input(tensor.ptr)
        self.inputs[name] = tensor
        return tensor

    def output(self, name: str, tensor: Tensor) -> Tensor:
        """Mark ``tensor`` as a graph output readable into numpy after each run."""
        if name in self.outputs:
            raise UsageError(f"graph output {name!r} is declared twice")
        tensor = self.contiguous(tensor)  # reading back copies raw bytes, so no strided views
        self.api.ggml_set_output(tensor.ptr)
        self.outputs[name] = tensor
        return tensor

    # ----------------------------------------------------------------- layout helpers
    def _is_contiguous(self, x: Tensor) -> bool:
        return bool(self.api.ggml_is_contiguous(x.ptr))

    def _rows_contiguous(self, x: Tensor) -> bool:
        return x.nb[0] == self.api.ggml_type_size(int(x.type))

    def contiguous(self, x: Tensor) -> Tensor:
        """``x`` itself when already contiguous, otherwise a contiguous copy."""
        return x if self._is_contiguous(x) else self.cont(x)

    def cont(self, x: Tensor) -> Tensor:
        return self._wrap(self.api.ggml_cont(self._ctx(), x.ptr), x.ndim)

    def reshape(self, x: Tensor, shape: Sequence[int]) -> Tensor:
        """numpy ``reshape``; one axis may be -1."""
        shape = _resolve_reshape(x.shape, tuple(int(d) for d in shape))
        x = self.contiguous(x)
        ne = to_ne(shape)
        return self._wrap(self.api.ggml_reshape_4d(self._ctx(), x.ptr, *ne), len(shape))

    def permute(self, x: Tensor, axes: Sequence[int]) -> Tensor:
        """numpy ``transpose(x, axes)``: output axis i is input axis ``axes[i]`` (a strided view)."""
        n = x.ndim
        axes = [a % n for a in axes]
        if sorted(axes) != list(range(n)):
            raise UsageError(f"permute axes {tuple(axes)} are not a permutation of {n} axes")
        # ggml_permute takes, for each source ggml axis, its destination ggml axis.
        dest = list(range(MAX_DIMS))
        for out_axis, in_axis in enumerate(axes):
            dest[n - 1 - in_axis] = n - 1 - out_axis
        return self._wrap(self.api.ggml_permute(self._ctx(), x.ptr, *dest), n)

    def transpose(self, x: Tensor, axis0: int = -2, axis1: int = -1) -> Tensor:
        """Swap two axes (default: the last two, like ``x.mT``); a strided view."""
        axes = list(range(x.ndim))
        axes[axis0], axes[axis1] = axes[axis1], axes[axis0]
        return self.permute(x, axes)

    def slice(self, x: Tensor, axis: int, start: int, stop: int) -> Tensor:
        """``x[..., start:stop, ...]`` along ``axis`` (step 1); a view sharing x's memory."""
        size = x.shape[axis]
        start, stop, _ = slice(start, stop).indices(size)
        if stop <= start:
            raise UsageError(f"empty slice {start}:{stop} of an axis with {size} elements")
        g = ggml_axis(axis, x.ndim)
        x = self._rows(x)  # ggml views always step one element along ne[0]
        ne, nb = list(x.ne), list(x.nb)
        ne[g] = stop - start
        ptr = self.api.ggml_view_4d(self._ctx(), x.ptr, *ne, nb[1], nb[2], nb[3], start * nb[g])
        return self._wrap(ptr, x.ndim)

    def as_strided(self, x: Tensor, shape: Sequence[int], strides: Sequence[int], offset: int = 0) -> Tensor:
        """A view like ``np.lib.stride_tricks.as_strided`` with strides and offset counted in
        elements (not bytes). The last stride must be 1 (ggml views step one element along a row);
        e.g. the relative-position "rel_shift" of Transformer-XL attention is one such view."""
        shape, strides = tuple(int(d) for d in shape), tuple(int(s) for s in strides)
        if len(shape) != len(strides) or strides[-1] != 1:
            raise UsageError(f"as_strided needs one stride per axis and a last stride of 1, got {strides}")
        x = self.contiguous(x)
        total = int(self.api.ggml_nelements(x.ptr))
        last = offset + sum((d - 1) * s for d, s in zip(shape, strides, strict=True))
        if offset < 0 or min(strides) < 0 or last >= total:
            raise UsageError(
                f"as_strided view {shape}/{strides}+{offset} reaches outside the {total} elements"
            )
        size = x.nb[0]
        ne = to_ne(shape)
        nb = [size * s for s in reversed(strides)] + [0] * (MAX_DIMS - len(shape))
        for axis in range(len(shape), MAX_DIMS):  # unused ggml axes have one element; any stride works
            nb[axis] = nb[axis - 1] * ne[axis - 1]
        ptr = self.api.ggml_view_4d(self._ctx(), x.ptr, *ne, nb[1], nb[2], nb[3], offset * size)
        return self._wrap(ptr, len(shape))

    def split(self, x: Tensor, axis: int, sizes: Sequence[int]) -> list[Tensor]:
        """Consecutive views along ``axis`` with the given sizes."""
        if sum(sizes) != x.shape[axis]:
            raise UsageError(f"split sizes {tuple(sizes)} do not add up to {x.shape[axis]}")
        parts, start = [], 0
        for size in sizes:
            parts.append(self.slice(x, axis, start, start + size))
            start += size
        return parts

    def cast(self, x: Tensor, dtype: GgmlType | str | type) -> Tensor:
        return self._wrap(self.api.ggml_cast(self._ctx(), x.ptr, int(as_ggml_type(dtype))), x.ndim)

    def cpy(self, src: Tensor, dst: Tensor) -> Tensor:
        """Copy ``src`` into ``dst`` (e.g. a persistent state tensor); returns the copy node."""
        if src.shape != dst.shape:
            raise UsageError(f"cpy needs equal shapes, got {src.shape} and {dst.shape}")
        is_read_only = getattr(dst.owner, "is_read_only", None)
        if is_read_only is not None and is_read_only(dst):
            raise UsageError(
                "cannot write into a weight that is mapped read-only from its file",
                "load it with map_files=False",
            )
        return self._wrap(self.api.ggml_cpy(self._ctx(), src.ptr, dst.ptr), dst.ndim)

    def store_into(self, dst: Tensor, src: Tensor) -> None:
        """Copy ``src`` into the persistent tensor ``dst`` (e.g. a cache held in a WeightStore)
        at the end of every run; the new value is seen by the next run."""
        self.side_effects.append(self.cpy(src, dst))

    def pad(self, x: Tensor, pad_width: Sequence[tuple[int, int]]) -> Tensor:
        """Zero padding like ``np.pad(x, pad_width)``: one (before, after) pair per axis."""
        if len(pad_width) != x.ndim:
            raise UsageError(f"pad needs {x.ndim} (before, after) pairs, got {len(pad_width)}")
        x = self._rows(x)
        ggml_pairs = [(0, 0)] * MAX_DIMS
        for axis, (before, after) in enumerate(pad_width):
            if before < 0 or after < 0:
                raise UsageError("pad widths must be >= 0")
            ggml_pairs[x.ndim - 1 - axis] = (int(before), int(after))
        flat = [value for pair in ggml_pairs for value in pair]
        return self._wrap(self.api.ggml_pad_ext(self._ctx(), x.ptr, *flat), x.ndim)

    # ----------------------------------------------------------------- arithmetic
    def _binary(self, fn_name: str, a: Tensor, b: Tensor, commutative: bool) -> Tensor:
        ndim = max(a.ndim, b.ndim)
        shape = _broadcast_shape(a.shape, b.shape)
        fn = getattr(self.api, fn_name)
        if _pad_shape(a.shape, ndim) != shape:
            if commutative and _pad_shape(b.shape, ndim) == shape:
                a, b = b, a
            else:
                a = self._repeat_to(a, shape)
        a, b = self._rows(a), self._rows(b)  # the CPU kernels step along rows element by element
        if (a.type, b.type) not in _BINARY_TYPES:  # e.g. f32 activations + an f16 weight
            a, b = self._as_f32(a), self._as_f32(b)
        return self._wrap(fn(self._ctx(), a.ptr, b.ptr), ndim)

    def _repeat_to(self, x: Tensor, shape: tuple[int, ...]) -> Tensor:
        ne = (ctypes.c_int64 * MAX_DIMS)(*to_ne(shape))
        template = self.api.ggml_new_tensor(
            self._ctx(), int(x.type), MAX_DIMS, ne
        )  # shape only, never computed
        return self._wrap(self.api.ggml_repeat(self._ctx(), x.ptr, template), len(shape))

    def add(self, a: Tensor, b: Tensor) -> Tensor:
        """``a + b`` with numpy broadcasting."""
        return self._binary("ggml_add", a, b, commutative=True)

    def sub(self, a: Tensor, b: Tensor) -> Tensor:
        return self._binary("ggml_sub", a, b, commutative=False)

    def mul(self, a: Tensor, b: Tensor) -> Tensor:
        return self._binary("ggml_mul", a, b, commutative=True)

    def scale(self, x: Tensor, factor: float, bias: float = 0.0) -> Tensor:
        """``x * factor + bias``."""
        x = self._rows(x)
        if bias:
            return self._wrap(self.api.ggml_scale_bias(self._ctx(), x.ptr, factor, bias), x.ndim)
        return self._wrap(self.api.ggml_scale(self._ctx(), x.ptr, factor), x.ndim)

    def mul_mat(self, a: Tensor, b: Tensor) -> Tensor:
        """ggml's product in numpy terms: ``b @ a.mT``.

        a: (..., M, K) (weights; any storage type), b: (..., N, K) float32 -> (..., N, M).
        Leading axes of ``a`` broadcast over those of ``b``. Big f32 x f32 products run on OpenBLAS when the
        graph's backend offers it (:mod:`inference.native.blas`), the others on ggml.
        """
        return self._product(a, b, None)

    def _product(self, a: Tensor, b: Tensor, bias: Tensor | None) -> Tensor:
        """``mul_mat(a, b)``, plus ``bias`` over the last axis when given."""
        _refuse_weight_layouts("mul_mat (as its second operand)", b)
        if a.shape[-1] != b.shape[-1]:
            raise UsageError(
                f"mul_mat: inner sizes differ, a {a.shape} vs b {b.shape} (last axes must match)"
            )
        if a.type == GgmlType.I8:
            return self._int8_product(a, b, bias)
        if a.layout is ByteLayout.PACKED_F32:
            return self._packed_product(a, b, bias)
        return self._plus(self._float_product(a, b), bias)

    def _plus(self, y: Tensor, bias: Tensor | None) -> Tensor:
        return y if bias is None else self.add(y, bias)

    def _float_product(self, a: Tensor, b: Tensor) -> Tensor:
        ne_a, ne_b = a.ne, b.ne
        if ne_b[2] % ne_a[2] or ne_b[3] % ne_a[3]:
            raise UsageError(f"mul_mat: leading axes of {a.shape} do not broadcast over {b.shape}")
        if not self._rows_contiguous(a):
            a = self.cont(a)
        if not self._rows_contiguous(b):
            b = self.cont(b)
        b = self._as_f32(b)  # the CPU backend converts f32 activations to the weight's dot type itself
        if self.gemm is not None and self._blas_eligible(a, b):
            return self._blas_product(a, b)
        return self._wrap(self.api.ggml_mul_mat(self._ctx(), a.ptr, b.ptr), max(a.ndim, b.ndim, 2))

    def keep_products_on_ggml(self) -> None:
        """Compute every product of this graph with ggml, whose f32 product gives each output row the same bits
        whatever the row count (OpenBLAS's kernels do not: their blocking depends on the row count and, on some
        CPUs, on the row's position). For graphs whose results must not depend on how rows are batched.
        Products with int8 weights are refused from then on (their activation scale spans a thread's rows)."""
        self.gemm = None
        self.row_invariant = True

    def _blas_eligible(self, a: Tensor, b: Tensor) -> bool:
        """f32 x f32 products big enough for OpenBLAS (quantised/f16 weights keep ggml's int8/f16 kernels)."""
        assert self.gemm is not None
        if a.type != GgmlType.F32 or a.nb[0] != 4 or a.nb[1] % 4 or b.nb[1] % 4:
            return False
        ne_a, ne_b = a.ne, b.ne
        if ne_a[2] == ne_a[3] == 1:  # one weight matrix: every row of b is one product row
            return self.gemm.routes(ne_b[1] * ne_b[2] * ne_b[3], ne_a[1], ne_a[0])
        return self.gemm.routes(ne_b[1], ne_a[1], ne_a[0], ne_b[2] * ne_b[3])

    def _blas_product(self, a: Tensor, b: Tensor) -> Tensor:
        assert self.gemm is not None
        ne_a, ne_b, nb_a, nb_b = a.ne, b.ne, a.nb, b.nb
        if ne_a[2] == ne_a[3] == 1:  # b's leading axes are rows of one product: b must be contiguous
            b = self.contiguous(b)
            ne_b, nb_b = b.ne, b.nb
            rows, batches, batches2 = ne_b[1] * ne_b[2] * ne_b[3], 1, 1
        else:
            rows, batches, batches2 = ne_b[1], ne_b[2] * ne_b[3], ne_b[2]
        args = ProductArgs(
            a.ptr,
            b.ptr,
            rows,
            ne_a[1],
            ne_a[0],
            nb_a[1],
            nb_b[1],
            batches,
            batches2,
            ne_b[2] // ne_a[2],
            ne_b[3] // ne_a[3],
            nb_a[2],
            nb_a[3],
            nb_b[2],
            nb_b[3],
        )
        self.gemm.register(args)
        self.product_args.append(args)
        sources = (ctypes.c_void_p * 2)(a.ptr, b.ptr)
        ptr = self.api.ggml_custom_4d(
            self._ctx(),
            int(GgmlType.F32),
            ne_a[1],
            ne_b[1],
            ne_b[2],
            ne_b[3],
            sources,
            2,
            self.gemm.callback,
            -1,
            ctypes.addressof(args),
        )
        return self._wrap(ptr, max(a.ndim, b.ndim, 2))

    def _int8_product(self, a: Tensor, b: Tensor, bias: Tensor | None) -> Tensor:
        """``b @ a.mT`` (+ ``bias``) for an int8 matrix ``a`` (N, K) of a weight store, on ONNX Runtime
        (native/int8.py)."""
        scale = a.owner.int8_scale(a) if a.layout is ByteLayout.INT8_TRANSPOSED else None
        if scale is None or a.ndim != 2:
            raise UsageError(
                f"mul_mat: an int8 tensor {a.shape} that is not an int8 weight matrix of a store"
            )
        if self.int8 is None:
            raise UsageError(
                "mul_mat: int8 weights on a backend that has no int8 products (load them on its CPU backend)"
            )
        if self.row_invariant:
            raise UsageError(
                "int8 weights cannot serve a graph whose rows must not depend on their batching",
                "pick q8_0 (or f32) for this model's weights",
            )
        n, k = a.shape  # mul_mat checked that b's rows have k values
        panels = a.owner.int8_panels(a)
        b = self.contiguous(self._as_f32(b))
        ne_b = b.ne
        rows = ne_b[1] * ne_b[2] * ne_b[3]
        args = Int8Args(b.ptr, a.ptr, scale.ptr, rows, n, k, panels)
        self.int8.register(args)
        self.product_args.append(args)
        ptr = self._panel_product(b, n, panels, (b.ptr, a.ptr, scale.ptr), self.int8.callback, args)
        return self._from_panels(ptr, b, n, panels, bias)

    def _panel_product(
        self, b: Tensor, n: int, panels: int, sources: tuple[int, ...], callback: Any, args: ctypes.Structure
    ) -> int:
        """A custom product node of ``n`` output columns over ``b``'s rows (contiguous) computed by ``callback``:
        with one panel the output is in row order, with several panel by panel, (panels, rows, n / panels)."""
        ne_b = b.ne
        rows = ne_b[1] * ne_b[2] * ne_b[3]
        ne_out = (n, ne_b[1], ne_b[2], ne_b[3]) if panels == 1 else (n // panels, rows, panels, 1)
        pointers = (ctypes.c_void_p * len(sources))(*sources)
        return int(
            self.api.ggml_custom_4d(
                self._ctx(),
                int(GgmlType.F32),
                *ne_out,
                pointers,
                len(sources),
                callback,
                -1,
                ctypes.addressof(args),
            )
        )

    def _from_panels(self, ptr: int, b: Tensor, n: int, panels: int, bias: Tensor | None) -> Tensor:
        """The output of a product computed panel by panel (``ptr``: (panels, rows, n / panels), or in row order
        for one panel) in row order, shaped like ``b`` with ``n`` columns, plus ``bias``."""
        if panels == 1:
            return self._plus(self._wrap(ptr, max(b.ndim, 2)), bias)
        by_panel = self.permute(self._wrap(ptr, 3), (1, 0, 2))  # (rows, panels, n / panels), a view
        if bias is not None:  # the bias add writes the row order itself: no copy of its own
            by_panel = self.add(by_panel, self.reshape(bias, (panels, n // panels)))
        return self.reshape(by_panel, (*b.shape[:-1], n) if b.ndim >= 2 else (1, n))

    def _packed_product(self, a: Tensor, b: Tensor, bias: Tensor | None) -> Tensor:
        """``b @ a.mT`` (+ ``bias``) for an f32 weight ``a`` (N, K) packed on ONNX Runtime (native/packed_f32.py)."""
        matrix = a.packed
        if matrix is None or a.ndim != 2:
            raise UsageError(
                f"mul_mat: a packed tensor {a.shape} that is not a packed weight matrix of a store"
            )
        if self.packed is None:
            raise UsageError("mul_mat: packed f32 weights on a graph of a backend that did not pack them")
        if self.row_invariant:
            raise UsageError(
                "packed f32 weights cannot serve a graph whose rows must not depend on their batching",
                "load this model's weights without pack_f32",
            )
        n, k = matrix.n, matrix.k
        b = self.contiguous(self._as_f32(b))
        ne_b = b.ne
        rows = ne_b[1] * ne_b[2] * ne_b[3]
        args = PackedArgs(b.ptr, rows, n, k, matrix.panels, matrix.key)
        self.packed.register(args)
        self.product_args.append(args)
        ptr = self._panel_product(b, n, matrix.panels, (b.ptr,), self.packed.callback, args)
        return self._from_panels(ptr, b, n, matrix.panels, bias)

    def linear(self, x: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:
        """PyTorch ``nn.Linear``: ``x @ weight.T + bias`` with weight shaped (out, in)."""
        if x.ndim == 1:
            return self._plus(self.reshape(self.mul_mat(weight, x), (weight.shape[0],)), bias)
        return self._product(weight, x, bias)

    def matmul(self, a: Tensor, b: Tensor) -> Tensor:
        """numpy ``a @ b`` for (..., N, K) @ (..., K, M); copies ``b`` transposed."""
        return self.mul_mat(self.cont(self.transpose(b)), a)

    # ----------------------------------------------------------------- reductions and norms
    def mean(self, x: Tensor) -> Tensor:
        """Mean over the last axis, keeping it with size 1."""
        return self._wrap(self.api.ggml_mean(self._ctx(), self.contiguous(x).ptr), x.ndim)

    def argmax(self, x: Tensor) -> Tensor:
        """int32 index of the maximum along the last axis of a 1-D or 2-D tensor (axis dropped)."""
        if x.ndim > 2:
            raise UsageError(f"argmax works on 1-D or 2-D tensors, got shape {x.shape}")
        result = self._wrap(self.api.ggml_argmax(self._ctx(), self.contiguous(x).ptr), 1)
        return result

    def norm(self, x: Tensor, eps: float) -> Tensor:
        """Normalise the last axis to zero mean, unit variance (no affine part)."""
        return self._wrap(self.api.ggml_norm(self._ctx(), self._rows(x).ptr, eps), x.ndim)

    def layer_norm(self, x: Tensor, weight: Tensor | None, bias: Tensor | None, eps: float = 1e-5) -> Tensor:
        """PyTorch ``nn.LayerNorm`` over the last axis."""
        y = self.norm(x, eps)
        if weight is not None:
            y = self.mul(y, weight)
        return self.add(y, bias) if bias is not None else y

    # ----------------------------------------------------------------- activations
    def _unary(self, fn_name: str, x: Tensor) -> Tensor:
        return self._wrap(getattr(self.api, fn_name)(self._ctx(), self.contiguous(x).ptr), x.ndim)

    def gelu(self, x: Tensor, approximate: bool = False) -> Tensor:
        """GELU; exact (erf, f32) by default like PyTorch; ``approximate`` uses ggml's tanh form,
        which the CPU backend reads from an f16 table (~1e-3 error)."""
        return self._unary("ggml_gelu" if approximate else "ggml_gelu_erf", x)

    def silu(self, x: Tensor) -> Tensor:
        return self._unary("ggml_silu", x)

    def relu(self, x: Tensor) -> Tensor:
        return self._unary("ggml_relu", x)

    def sigmoid(self, x: Tensor) -> Tensor:
        return self._unary("ggml_sigmoid", x)

    def tanh(self, x: Tensor) -> Tensor:
        return self._unary("ggml_tanh", x)

    def exp(self, x: Tensor) -> Tensor:
        return self._unary("ggml_exp", x)

    def log(self, x: Tensor) -> Tensor:
        return self._unary("ggml_log", x)

    def sqrt(self, x: Tensor) -> Tensor:
        return self._unary("ggml_sqrt", x)

    def glu(self, x: Tensor, axis: int = -1) -> Tensor:
        """PyTorch ``F.glu``: first half times sigmoid(second half) along ``axis``."""
        half = x.shape[axis] // 2
        if x.shape[axis] != 2 * half:
            raise UsageError(f"glu needs an even size along axis {axis}, got {x.shape}")
        first, second = self.split(x, axis, (half, half))
        return self.mul(first, self.sigmoid(second))

    # ----------------------------------------------------------------- attention pieces
    def softmax(self, x: Tensor, mask: Tensor | None = None, scale: float = 1.0) -> Tensor:
        """``softmax(x * scale + mask)`` over the last axis.

        x: (..., rows, cols); mask (additive, f32 or f16): (rows', cols) or (h, rows', cols) ...
        with rows' >= rows and its leading axes dividing x's (broadcast).
        """
        x = self.contiguous(x)
        mask_ptr = None
        if mask is not None:
            ne_x, ne_m = x.ne, mask.ne
            if mask.type not in (GgmlType.F32, GgmlType.F16):
                raise UsageError(f"softmax mask must be f32 or f16, got {mask.type.name}")
            if ne_m[0] != ne_x[0] or ne_m[1] < ne_x[1] or ne_x[2] % ne_m[2] or ne_x[3] % ne_m[3]:
                raise UsageError(f"softmax mask of shape {mask.shape} does not fit scores of shape {x.shape}")
            mask_ptr = self.contiguous(mask).ptr
        return self._wrap(self.api.ggml_soft_max_ext(self._ctx(), x.ptr, mask_ptr, scale, 0.0), x.ndim)

    def attention(
        self, q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None = None, scale: float | None = None
    ) -> Tensor:
        """Scaled dot-product attention on (..., heads, time, head_dim) tensors -> same layout as q.

        k and v may have fewer heads than q (grouped-query attention) as long as they divide them.
        """
        scale = q.shape[-1] ** -0.5 if scale is None else scale
        scores = self.mul_mat(k, q)  # (..., heads, tq, tk)
        probs = self.softmax(scores, mask, scale)
        return self.mul_mat(self.cont(self.transpose(v)), probs)  # (..., heads, tq, head_dim)

    def flash_attention(
        self, q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None = None, scale: float | None = None
    ) -> Tensor:
        """Fused attention (``ggml_flash_attn_ext``) on (..., heads, time, head_dim) inputs.

        Returns (..., tq, heads, head_dim) — note the order: ready for a reshape to
        (tq, heads*head_dim). f32 k/v give f32-exact results; f16 k/v are faster and ~1e-3 off.
        The mask (tq, tk) is converted to f16 as ggml requires.
        """
        if not self.api.has("ggml_flash_attn_ext"):
            raise UsageError("this ggml build has no ggml_flash_attn_ext")
        if q.shape[-1] != k.shape[-1] or k.shape[-2] != v.shape[-2] or q.shape[-3] % k.shape[-3]:
            raise UsageError(f"flash_attention shapes do not fit: q {q.shape}, k {k.shape}, v {v.shape}")
        scale = q.shape[-1] ** -0.5 if scale is None else scale
        mask_ptr = None
        if mask is not None:
            if mask.shape[-1] != k.shape[-2] or mask.shape[-2] < q.shape[-2]:
                raise UsageError(
                    f"flash_attention mask {mask.shape} does not fit q {q.shape} and k {k.shape}"
                )
            if mask.type != GgmlType.F16:
                mask = self.cast(mask, GgmlType.F16)
            mask_ptr = self.contiguous(mask).ptr
        q, k, v = self._rows(self._as_f32(q)), self._rows(k), self._rows(v)
        ptr = self.api.ggml_flash_attn_ext(self._ctx(), q.ptr, k.ptr, v.ptr, mask_ptr, scale, 0.0, 0.0)
        return self._wrap(ptr, max(q.ndim, 3))

    # ----------------------------------------------------------------- convolutions
    def conv2d(
        self,
        x: Tensor,
        weight: Tensor,
        bias: Tensor | None = None,
        stride: tuple[int, int] = (1, 1),
        padding: tuple[int, int] = (0, 0),
        dilation: tuple[int, int] = (1, 1),
        channels_last: bool = False,
    ) -> Tensor:
        """PyTorch ``conv2d`` (groups=1) via im2col in f32 + mul_mat.

        x: (N, C, H, W); weight: (OC, C, KH, KW) -> (N, OC, OH, OW), or (N, OH, OW, OC) when
        ``channels_last`` (skips a permute+copy).
        """
        if x.ndim != 4 or weight.ndim != 4 or x.shape[1] != weight.shape[1]:
            raise UsageError(
                f"conv2d needs x (N, C, H, W) and weight (OC, C, KH, KW), got {x.shape}, {weight.shape}"
            )
        n, _, h, w = x.shape
        oc, ic, kh, kw = weight.shape
        (sh, sw), (ph, pw), (dh, dw) = stride, padding, dilation
        oh = (h + 2 * ph - dh * (kh - 1) - 1) // sh + 1
        ow = (w + 2 * pw - dw * (kw - 1) - 1) // sw + 1
        if oh < 1 or ow < 1:
            raise UsageError(f"conv2d input {x.shape} is smaller than the kernel {weight.shape}")
        x = self.contiguous(x)
        cols = self._wrap(
            self.api.ggml_im2col(
                self._ctx(), weight.ptr, x.ptr, sw, sh, pw, ph, dw, dh, True, int(GgmlType.F32)
            ),
            4,
        )  # (N, OH, OW, C*KH*KW)
        kernel = self.reshape(weight, (oc, ic * kh * kw))
        cols2d = self.reshape(cols, (n * oh * ow, ic * kh * kw))
        short = -(ic * kh * kw) % 16
        if short and ic * kh * kw < 64 and weight.type == GgmlType.F32:
            # A short f32 product (K = 9 for a 3x3 kernel on one channel) misses ggml's SIMD GEMM, which wants K
            # in multiples of 16; zero columns add exact zeros, and copying short columns is cheap.
            kernel = self.pad(kernel, ((0, 0), (0, short)))
            cols2d = self.pad(cols2d, ((0, 0), (0, short)))
        y = self.reshape(self.mul_mat(kernel, cols2d), (n, oh, ow, oc))
        if bias is not None:
            y = self.add(y, bias)
        return y if channels_last else self.cont(self.permute(y, (0, 3, 1, 2)))

    def depthwise_conv2d(
        self,
        x: Tensor,
        weight: Tensor,
        bias: Tensor | None = None,
        stride: tuple[int, int] = (1, 1),
        padding: tuple[int, int] = (0, 0),
        dilation: tuple[int, int] = (1, 1),
    ) -> Tensor:
        """PyTorch ``conv2d`` with groups=C on channels-last data, exact f32.

        x: (N, H, W, C); weight: (KH, KW, 1, C) f32 — PyTorch's (C, 1, KH, KW) kernel transposed so that
        channels are contiguous -> (N, OH, OW, C). ggml's channels-contiguous kernel vectorises over C, and
        neither side needs a layout copy (channels-first would cost a full permute of the activations).
        """
        if not self.api.has("ggml_conv_2d_dw_direct"):
            raise UsageError("this ggml build has no ggml_conv_2d_dw_direct")
        if x.ndim != 4 or weight.ndim != 4 or weight.shape[2] != 1 or weight.shape[3] != x.shape[3]:
            raise UsageError(
                f"depthwise_conv2d needs x (N, H, W, C), weight (KH, KW, 1, C); got {x.shape}, {weight.shape}"
            )
        (sh, sw), (ph, pw), (dh, dw) = stride, padding, dilation
        channels_first = self.permute(self.contiguous(x), (0, 3, 1, 2))  # (N, C, H, W) view, C contiguous
        kernel = self.permute(weight, (3, 2, 0, 1))  # (C, 1, KH, KW) view, C contiguous
        y = self._wrap(
            self.api.ggml_conv_2d_dw_direct(
                self._ctx(), kernel.ptr, channels_first.ptr, sw, sh, pw, ph, dw, dh
            ),
            4,
        )  # (N, C, OH, OW) with channels-contiguous strides, as its input
        y = self.permute(y, (0, 2, 3, 1))  # (N, OH, OW, C): a contiguous view
        return self.add(y, bias) if bias is not None else y

    def depthwise_conv1d(
        self,
        x: Tensor,
        weight: Tensor,
        bias: Tensor | None = None,
        padding: int = 0,
        time_major_out: bool = False,
    ) -> Tensor:
        """Exact-f32 PyTorch ``conv1d`` with groups=C, stride 1.

        x: (N, C, T) or (C, T); weight: (C, 1, K) or (C, K) in f32. Output (N, C, T') — or
        (N, T', C) when ``time_major_out`` (saves a transpose when the next op wants time-major).
        Runs on ``ggml_ssm_conv`` (an f32 sliding dot product); ``ggml_conv_1d_dw`` would run
        im2col in f16 and lose ~1e-2.
        """
        squeeze = x.ndim == 2
        if squeeze:
            x = self.reshape(x, (1, *x.shape))
        if x.ndim != 3:
            raise UsageError(f"depthwise_conv1d needs x (N, C, T) or (C, T), got {x.shape}")
        channels = x.shape[1]
        kernel = self.reshape(weight, (weight.shape[0], weight.shape[-1])) if weight.ndim == 3 else weight
        if kernel.shape[0] != channels or weight.type != GgmlType.F32:
            raise UsageError(
                f"depthwise_conv1d needs an f32 weight (C, 1, K) with C={channels}, got {weight.shape} {weight.type.name}"
            )
        k = kernel.shape[1]
        xp = self.pad(x, ((0, 0), (0, 0), (padding, padding))) if padding else self.contiguous(x)
        if xp.shape[-1] < k:
            raise UsageError(
                f"depthwise_conv1d input of length {x.shape[-1]} is shorter than the kernel ({k})"
            )
        if not self.api.has("ggml_ssm_conv"):
            y = self._depthwise_conv1d_taps(xp, kernel, time_major_out)
        else:
            y = self._wrap(
                self.api.ggml_ssm_conv(self._ctx(), xp.ptr, self.contiguous(kernel).ptr), 3
            )  # (N, T', C)
            if not time_major_out:
                y = self.cont(self.transpose(y))
        if bias is not None:
            y = self.add(y, bias if time_major_out else self.reshape(bias, (channels, 1)))
        return self.reshape(y, y.shape[1:]) if squeeze else y

    def depthwise_conv1d_taps(
        self, x: Tensor, weight: Tensor, bias: Tensor | None = None, padding: int = 0
    ) -> Tensor:
        """Same as :meth:`depthwise_conv1d` (channel-major output) using only views, mul and add,
        so it runs on any backend; K multiply-adds over shifted views."""
        kernel = self.reshape(weight, (weight.shape[0], weight.shape[-1])) if weight.ndim == 3 else weight
        nd = x.ndim
        pads = [(0, 0)] * (nd - 1) + [(padding, padding)]
        xp = self.pad(x, pads) if padding else x
        y = self._depthwise_conv1d_taps(xp, kernel, time_major_out=False)
        if bias is not None:
            y = self.add(y, self.reshape(bias, (kernel.shape[0], 1)))
        return y

    def _depthwise_conv1d_taps(self, xp: Tensor, kernel: Tensor, time_major_out: bool) -> Tensor:
        k = kernel.shape[1]
        t_out = xp.shape[-1] - k + 1
        y = None
        for tap in range(k):
            window = self.slice(xp, -1, tap, tap + t_out)
            term = self.mul(self.cont(window), self.slice(kernel, 1, tap, tap + 1))
            y = term if y is None else self.add(y, term)
        assert y is not None
        return self.cont(self.transpose(y)) if time_major_out else y

    # ----------------------------------------------------------------- internal
    def _as_f32(self, x: Tensor) -> Tensor:
        if x.type == GgmlType.F32:
            return x
        if x.type not in (GgmlType.F16, GgmlType.BF16):
            raise UsageError(f"element-wise ops need float operands, got {x.type.name}")
        return self.cast(x, GgmlType.F32)

    def _rows(self, x: Tensor) -> Tensor:
        return x if self._rows_contiguous(x) else self.cont(x)


def _pad_shape(shape: tuple[int, ...], ndim: int) -> tuple[int, ...]:
    return (1,) * (ndim - len(shape)) + tuple(shape)


def _broadcast_shape(a: tuple[int, ...], b: tuple[int, ...]) -> tuple[int, ...]:
    ndim = max(len(a), len(b))
    result = []
    for da, db in zip(_pad_shape(a, ndim), _pad_shape(b, ndim), strict=True):
        if da != db and 1 not in (da, db):
            raise UsageError(f"shapes {a} and {b} do not broadcast")
        result.append(max(da, db))
    return tuple(result)


def _resolve_reshape(old: tuple[int, ...], new: tuple[int, ...]) -> tuple[int, ...]:
    total = 1
    for d in old:
        total *= d
    if new.count(-1) > 1:
        raise UsageError(f"reshape to {new}: only one axis may be -1")
    if -1 in new:
        known = 1
        for d in new:
            if d != -1:
                known *= d
        if known == 0 or total % known:
            raise UsageError(f"cannot reshape {old} to {new}")
        new = tuple(total // known if d == -1 else d for d in new)
    count = 1
    for d in new:
        count *= d
    if count != total:
        raise UsageError(f"cannot reshape {old} ({total} elements) to {new} ({count} elements)")
    return new
