"""Built, allocated graphs and a cache of them keyed by shape bucket.

A :class:`Graph` owns its ggml context, its ``ggml_cgraph`` and its compute buffer (a gallocr);
``close()`` (or ``with``) frees all three. A :class:`GraphCache` builds one graph per shape bucket
with a family-supplied build function and rebuilds only when a new bucket is asked for.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable, Hashable, Mapping
from typing import Any

import numpy as np

from inference.errors import BackendError, UsageError
from inference.native.backend import Backend
from inference.native.dtypes import numpy_dtype
from inference.native.ops import DEFAULT_MAX_NODES, GraphBuilder
from inference.native.owner import NativeOwner
from inference.native.profiler import NodeRunner, OpProfiler, is_empty_op, timed_node
from inference.native.tensor import Tensor

BuildFn = Callable[..., None]


class Graph(NativeOwner):
    """One computation graph, allocated on a backend and ready to run many times.

    ``build(g, *args)`` declares inputs with ``g.input(...)``, composes ops and marks results with
    ``g.output(...)``. Weight tensors from a :class:`~inference.native.weights.WeightStore` on the
    same backend can be used directly; keep the store open while the graph lives.
    """

    def __init__(
        self, backend: Backend, build: BuildFn, *args: Any, max_nodes: int = DEFAULT_MAX_NODES
    ) -> None:
        self.backend = backend
        api = self.api = backend.api
        self._gallocr: int | None = None
        self._node_runner: NodeRunner | None = None  # made on the first profiled compute
        self._builder = GraphBuilder(
            api, max_nodes, backend.gemm, backend.int8_products, backend.packed_products
        )
        try:
            build(self._builder, *args)
            if not self._builder.outputs:
                raise UsageError("a graph needs at least one output (call g.output(name, tensor))")
            ctx = self._builder.ctx
            self._cgraph = api.ggml_new_graph_custom(ctx, 2 * max_nodes, False)
            for tensor in (*self._builder.outputs.values(), *self._builder.side_effects):
                api.ggml_build_forward_expand(self._cgraph, tensor.ptr)
            if not backend.is_cpu:
                self._check_backend_supports_ops()
            self._gallocr = api.ggml_gallocr_new(backend.buffer_type)
            if not api.ggml_gallocr_alloc_graph(self._gallocr, self._cgraph):
                raise BackendError(
                    "could not allocate the compute buffer for a graph", "free memory or use smaller inputs"
                )
            self._check_inputs_used()
        except BaseException:
            self.close()
            raise
        # Everything run() needs, resolved once so the per-call path stays short.
        self._inputs = {
            name: (t.ptr, t.shape, numpy_dtype(t.type)) for name, t in self._builder.inputs.items()
        }
        self._outputs = {
            name: (t.ptr, t.shape, numpy_dtype(t.type)) for name, t in self._builder.outputs.items()
        }
        self._set = api.ggml_backend_tensor_set
        self._get = api.ggml_backend_tensor_get
        self._compute = api.ggml_backend_graph_compute

    def _check_backend_supports_ops(self) -> None:
        # Without a scheduler there is no CPU fallback, so say which op is missing up front.
        missing = set()
        for index in range(self.api.ggml_graph_n_nodes(self._cgraph)):
            node = self.api.ggml_graph_node(self._cgraph, index)
            if not self.api.ggml_backend_supports_op(self.backend.ptr, node):
                missing.add(self.api.ggml_op_desc(node).decode())
        if missing:
            raise BackendError(
                f"the {self.backend.kind} backend cannot run: {', '.join(sorted(missing))}",
                "use --backend cpu",
            )

    def _check_inputs_used(self) -> None:
        for name, tensor in self._builder.inputs.items():
            if not self.api.ggml_get_data(tensor.ptr):
                raise UsageError(f"graph input {name!r} is not used by any output")

    @property
    def input_shapes(self) -> dict[str, tuple[int, ...]]:
        return {name: spec[1] for name, spec in self._inputs.items()}

    @property
    def output_shapes(self) -> dict[str, tuple[int, ...]]:
        return {name: spec[1] for name, spec in self._outputs.items()}

    @property
    def n_nodes(self) -> int:
        return int(self.api.ggml_graph_n_nodes(self._cgraph))

    @property
    def compute_buffer_bytes(self) -> int:
        return int(self.api.ggml_gallocr_get_buffer_size(self._live_gallocr(), 0))

    def output_tensor(self, name: str) -> Tensor:
        return self._builder.outputs[name]

    def _live_gallocr(self) -> int:
        if self._gallocr is None:
            raise UsageError("this graph has been closed")
        return self._gallocr

    # ----------------------------------------------------------------- running
    def set_input(self, name: str, array: np.ndarray) -> None:
        try:
            ptr, shape, dtype = self._inputs[name]
        except KeyError:
            raise UsageError(f"graph has no input {name!r} (inputs: {', '.join(self._inputs)})") from None
        if array.shape != shape:
            raise UsageError(f"graph input {name!r} expects shape {shape}, got {array.shape}")
        array = np.ascontiguousarray(array, dtype=dtype)
        self._set(ptr, array.ctypes.data, 0, array.nbytes)

    def compute(self) -> None:
        self._live_gallocr()
        profiler = self.backend.profiler
        if profiler is not None:
            self._compute_profiled(profiler)
            return
        status = self._compute_graph(self._cgraph)
        if status != 0:
            raise BackendError(f"graph computation failed (ggml status {status})", "see the log for details")

    def _compute_graph(self, cgraph: int) -> int:
        """ggml's compute status for ``cgraph``, after raising what an OpenBLAS, int8 or packed product callback
        failed with inside it (a C caller cannot take the exception, see native/blas.py)."""
        status = self._compute(self.backend.ptr, cgraph)
        for products in (self.backend.gemm, self.backend.int8_products, self.backend.packed_products):
            if products is not None:
                products.check()
        return int(status)

    def _compute_profiled(self, profiler: OpProfiler) -> None:
        api = self.api
        if self._node_runner is None:
            self._node_runner = NodeRunner(api)
        runner = self._node_runner
        clock = time.perf_counter
        started = clock()
        for index in range(api.ggml_graph_n_nodes(self._cgraph)):
            ptr = api.ggml_graph_node(self._cgraph, index)
            if is_empty_op(api, ptr):
                continue
            api.ggml_graph_clear(runner.cgraph)
            api.ggml_graph_add_node(runner.cgraph, ptr)
            t0 = clock()
            status = self._compute_graph(runner.cgraph)
            seconds = clock() - t0
            record = timed_node(api, ptr, seconds)
            if status != 0:
                raise BackendError(
                    f"computing node {record.name!r} ({record.op}) failed (ggml status {status})"
                )
            profiler.records.append(record)
        profiler.graph_seconds.append(clock() - started)

    def get_output(self, name: str, out: np.ndarray | None = None) -> np.ndarray:
        ptr, shape, dtype = self._outputs[name]
        if out is None:
            out = np.empty(shape, dtype)
        elif out.shape != shape or out.dtype != dtype or not out.flags.c_contiguous:
            raise UsageError(
                f"output buffer for {name!r} must be a contiguous {dtype} array of shape {shape}"
            )
        self._get(ptr, out.ctypes.data, 0, out.nbytes)
        return out

    def run(self, inputs: Mapping[str, np.ndarray] | None = None, **kw: np.ndarray) -> dict[str, np.ndarray]:
        """Set every input from numpy, compute, and return every output as a new numpy array."""
        given = dict(inputs or {}, **kw)
        if given.keys() != self._inputs.keys():
            missing = sorted(self._inputs.keys() - given.keys())
            extra = sorted(given.keys() - self._inputs.keys())
            raise UsageError(f"graph inputs do not match: missing {missing}, unexpected {extra}")
        for name, array in given.items():
            self.set_input(name, array)
        self.compute()
        return {name: self.get_output(name) for name in self._outputs}

    # ----------------------------------------------------------------- lifetime
    def close(self) -> None:
        if self._gallocr is not None:
            self.api.ggml_gallocr_free(self._gallocr)
            self._gallocr = None
        if self._node_runner is not None:
            self._node_runner.free()
            self._node_runner = None
        if self._builder is not None:
            self._builder.free()


class GraphBudgetError(UsageError):
    """A graph needs more compute memory than its cache may hold; families re-raise it naming their option."""

    def __init__(self, needed_bytes: int, limit_bytes: int) -> None:
        super().__init__(
            f"a graph needs {needed_bytes / 2**20:.1f} MiB of compute memory, more than the {limit_bytes / 2**20:.1f} MiB "
            "limit",
            "raise the limit or use smaller inputs",
        )
        self.needed_bytes = needed_bytes
        self.limit_bytes = limit_bytes


class GraphCache:
    """Graphs built by ``build(g, key)`` for shape-bucket ``key``; keeps the ``max_graphs`` most recent.

    Family code pads its inputs to the bucket (e.g. the frame count rounded up) and asks for the
    graph of that bucket; a graph is rebuilt only when its bucket is not cached.

    ``max_buffer_bytes`` bounds the compute memory of the cached graphs together (a family's
    "graph arena" option): older graphs are evicted to make room, and a graph that alone needs more
    raises :class:`GraphBudgetError` (it is freed before anything runs on it).
    """

    def __init__(
        self,
        backend: Backend,
        build: Callable[[GraphBuilder, Any], None],
        max_graphs: int = 4,
        max_nodes: int = DEFAULT_MAX_NODES,
        max_buffer_bytes: int | None = None,
    ) -> None:
        if max_graphs < 1:
            raise UsageError("a graph cache must hold at least one graph")
        if max_buffer_bytes is not None and max_buffer_bytes <= 0:
            raise UsageError(f"a graph cache's compute memory limit must be positive, got {max_buffer_bytes}")
        self.backend = backend
        self.build = build
        self.max_graphs = max_graphs
        self.max_nodes = max_nodes
        self.max_buffer_bytes = max_buffer_bytes
        self.builds = 0  # how many graphs were built (for tests and stats)
        self._graphs: OrderedDict[Hashable, Graph] = OrderedDict()

    @property
    def buffer_bytes(self) -> int:
        """Compute memory held by the cached graphs."""
        return sum(graph.compute_buffer_bytes for graph in self._graphs.values())

    def get(self, key: Hashable) -> Graph:
        graph = self._graphs.get(key)
        if graph is not None:
            self._graphs.move_to_end(key)
            return graph
        graph = Graph(self.backend, self.build, key, max_nodes=self.max_nodes)
        self.builds += 1
        needed = graph.compute_buffer_bytes
        if self.max_buffer_bytes is not None and needed > self.max_buffer_bytes:
            graph.close()
            raise GraphBudgetError(needed, self.max_buffer_bytes)
        self._graphs[key] = graph
        while len(self._graphs) > self.max_graphs or (
            self.max_buffer_bytes is not None
            and len(self._graphs) > 1
            and self.buffer_bytes > self.max_buffer_bytes
        ):
            _, evicted = self._graphs.popitem(last=False)
            evicted.close()
        return graph

    def run(
        self, key: Hashable, inputs: Mapping[str, np.ndarray] | None = None, **kw: np.ndarray
    ) -> dict[str, np.ndarray]:
        return self.get(key).run(inputs, **kw)

    def __len__(self) -> int:
        return len(self._graphs)

    def keys(self) -> list[Hashable]:
        """Keys of the cached graphs, least recently used first."""
        return list(self._graphs)

    def close(self) -> None:
        while self._graphs:
            _, graph = self._graphs.popitem()
            graph.close()

    def __enter__(self) -> GraphCache:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
