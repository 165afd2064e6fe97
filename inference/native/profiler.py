"""The op profiler: per-node timings of the graphs a backend computes while ``backend.profiler`` is set.

:class:`~inference.native.graph.Graph` runs each node as a one-node graph through a :class:`NodeRunner`
and records a :class:`NodeTiming` for it; ``tests/bench/profile_ops.py`` reads them.
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass, field

from inference.native.bindings import (
    GGML_TENSOR_FLAG_INPUT,
    GgmlApi,
    InitParams,
    TensorNode,
    check_node_layout,
)

# Ops that only describe a layout: ggml's compute loop skips them, so the profiler does too.
_EMPTY_OPS = frozenset({"NONE", "VIEW", "RESHAPE", "PERMUTE", "TRANSPOSE"})


@dataclass(frozen=True)
class Operand:
    """One source of a profiled node: ggml type name, ne (ggml order), whether it is a weight
    (a leaf that is not a graph input, possibly seen through views), and its op."""

    type: str
    ne: tuple[int, ...]
    weight: bool
    op: str  # the op that made it, seen through views/reshapes (NONE for leaves, IM2COL for a conv's columns)


@dataclass(frozen=True)
class NodeTiming:
    op: str  # ggml_op_desc: MUL_MAT, SOFT_MAX, ... (unary/glu ops by their own name: GELU, SWIGLU)
    name: str
    type: str
    ne: tuple[int, ...]  # result shape in ggml order
    srcs: tuple[Operand, ...]
    seconds: float
    flops: float  # multiply-adds count twice; 0 for ops without a meaningful count


@dataclass
class OpProfiler:
    """Per-node timings of every graph computed on a backend while ``backend.profiler`` is this object.

    Each non-empty node runs as its own one-node graph on the same allocation (same order, same
    buffers, so the results are identical), timed around ``ggml_backend_graph_compute``. The sum of
    node times is a little above an ordinary run (one dispatch per node); ``graph_seconds`` holds
    the wall time of each profiled graph for that comparison. With ``backend.profiler`` None (the
    default) an ordinary compute costs one attribute check.
    """

    records: list[NodeTiming] = field(default_factory=list)
    graph_seconds: list[float] = field(default_factory=list)

    def clear(self) -> None:
        self.records.clear()
        self.graph_seconds.clear()


def node_flops(op: str, ne: tuple[int, ...], srcs: tuple[Operand, ...]) -> float:
    """Floating-point operations of one node (2 per multiply-add), for the ops that dominate."""
    elements = float(ne[0] * ne[1] * ne[2] * ne[3])
    if op in ("MUL_MAT", "CUSTOM"):  # Captioneer's custom ops are products (native/blas.py, native/int8.py)
        return (
            2.0 * srcs[0].ne[0] * elements
        )  # src0's ne0 is K: the weight's (mul_mat, OpenBLAS) or x's (int8)
    if op == "FLASH_ATTN_EXT":  # q (D, n_q, H, B), k (D, n_kv, ...), v (Dv, n_kv, ...)
        q, k, v = srcs[0].ne, srcs[1].ne, srcs[2].ne
        return 2.0 * q[1] * q[2] * q[3] * k[1] * (q[0] + v[0])
    if op == "SSM_CONV":  # taps (d_conv, channels)
        return 2.0 * srcs[1].ne[0] * elements
    if op == "CONV_2D_DW":  # kernel first: (KW, KH, 1, C)
        return 2.0 * srcs[0].ne[0] * srcs[0].ne[1] * elements
    return 0.0


def timed_node(api: GgmlApi, ptr: int, seconds: float) -> NodeTiming:
    """The profile record of graph node ``ptr`` (any ggml graph, libllama's too; call
    :func:`~inference.native.bindings.check_node_layout` once before)."""
    node = TensorNode.from_address(ptr)
    srcs = []
    for src in node.src:
        if not src:
            break
        head = TensorNode.from_address(src)
        root = head
        while root.view_src:
            root = TensorNode.from_address(root.view_src)
        weight = root.op == 0 and not root.flags & GGML_TENSOR_FLAG_INPUT
        made_by = api.ggml_op_desc(ctypes.addressof(root)).decode()
        srcs.append(Operand(api.ggml_type_name(head.type).decode(), tuple(head.ne), weight, made_by))
    op, ne = api.ggml_op_desc(ptr).decode(), tuple(node.ne)
    name, type_name = node.name.decode(errors="replace"), api.ggml_type_name(node.type).decode()
    return NodeTiming(op, name, type_name, ne, tuple(srcs), seconds, node_flops(op, ne, tuple(srcs)))


def is_empty_op(api: GgmlApi, ptr: int) -> bool:
    """Layout-only nodes (views, reshapes, permutes): ggml computes nothing for them."""
    return api.ggml_op_desc(ptr).decode() in _EMPTY_OPS


class NodeRunner:
    """A one-node graph in its own small context, refilled for every node of a profiled graph."""

    def __init__(self, api: GgmlApi) -> None:
        check_node_layout(api)
        self.api = api
        self.ctx = api.ggml_init(InitParams(api.ggml_graph_overhead_custom(1, False) + 1024, None, True))
        if not self.ctx:
            raise MemoryError("ggml_init failed to allocate the profiler's graph context")
        self.cgraph = api.ggml_new_graph_custom(self.ctx, 1, False)

    def free(self) -> None:
        if self.ctx:
            self.api.ggml_free(self.ctx)
            self.ctx = None
