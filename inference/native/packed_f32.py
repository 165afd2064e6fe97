"""f32 weight products on ONNX Runtime's SGEMM (MLAS) with each weight packed once at load, as a ggml custom op.

Why: OpenBLAS packs the weight on every product and ggml streams it unpacked; from one row up that per-call cost
follows the weight's size, not the rows, so short clips ran their products at 90-130 GFLOP/s per core where a
weight packed once runs at 220-250 (AMD EPYC Zen 5, one thread; tests/bench/README.md, "f32 weights packed once").
MLAS packs a *constant* initializer when its session is created and keeps only the packed copy.

How: a store's 2-D f32 matrix ``W`` (N, K) that it memory-maps from a checkpoint file is split into column panels
(one per backend thread when N splits into whole 64-column panels, else one: :func:`~inference.native.node_plans.
weight_panels`); each panel is a one-node ONNX model ``y = x @ w.T`` (``Gemm``, ``transB``) whose initializer ``w``
is *external data*: ONNX Runtime reads the panel's rows from the checkpoint file itself (the offsets the checkpoint
reader validated), packs them and drops what it read. Memory holds the packed copy only; the store's own mapping of
the file stays untouched (its pages are never made resident), so graphs that must compute on ggml (row-invariant
ones: ``GraphBuilder.keep_products_on_ggml``) still read the weight from there.

Each ggml thread runs whole panels (or, with more threads than panels, its share of the rows through every panel),
single-threaded, like the int8 products (native/int8.py); the output comes out panel by panel and the graph puts it
back in row order. Results are exact f32 products; only the summation order differs from ggml's and OpenBLAS's.
"""

from __future__ import annotations

import ctypes
import itertools
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from inference.errors import BackendError, UsageError
from inference.native.bindings import I64, CustomOp, P
from inference.native.callback_errors import CallbackErrors
from inference.native.node_plans import NodePlans, thread_units

INSTALL_FIX = "pip install onnxruntime onnx (Captioneer dependencies), or set CAPTIONEER_F32_GEMM=openblas"
_OPSET = 17


class PackedArgs(ctypes.Structure):
    """One packed-weight product node: ``out (rows, n) = x (rows, k) @ W.T``, W held by ONNX Runtime."""

    _fields_ = [
        ("x", P),  # a ggml tensor, read with ggml_get_data at compute time
        ("rows", I64),
        ("n", I64),
        ("k", I64),
        ("panels", I64),  # the output is (panels, rows, n / panels)
        ("matrix", I64),  # the PackedMatrix's key in its PackedF32Gemm
        ("serial", I64),  # the node's number in the gemm's plans (PackedF32Gemm.register)
    ]


@dataclass(frozen=True)
class FileMatrix:
    """Where a (n, k) little-endian float32 matrix lies in a file: ``offset`` bytes in, rows contiguous."""

    path: Path
    offset: int
    n: int
    k: int

    def check(self, file_size: int) -> None:
        """Refuse a matrix that does not lie wholly in the file (the readers validated it; this is cheap)."""
        if self.offset < 0 or self.n <= 0 or self.k <= 0 or self.offset + self.n * self.k * 4 > file_size:
            raise UsageError(
                f"{self.path.name}: a {self.n}x{self.k} f32 matrix at byte {self.offset} is outside the file"
            )

    def read(self) -> np.ndarray:
        """The matrix as float32 values, read from the file."""
        self.check(self.path.stat().st_size)
        values = np.fromfile(self.path, dtype="<f4", count=self.n * self.k, offset=self.offset)
        return values.astype(np.float32, copy=False).reshape(self.n, self.k)


@dataclass(frozen=True)
class PackedMatrix:
    """``source`` as ``panels`` ONNX Runtime sessions, one per column panel (key: its id in the gemm)."""

    key: int
    source: FileMatrix
    panels: int
    sessions: tuple[Any, ...]

    @property
    def n(self) -> int:
        return self.source.n

    @property
    def k(self) -> int:
        return self.source.k


class PackedF32Gemm:
    """Holds the packed weights of a CPU backend and computes their products; one per backend, opened on first use."""

    def __init__(self, get_data: Callable[[int], int]) -> None:
        try:
            import onnx
            import onnxruntime as ort
        except ImportError as exc:
            raise BackendError(
                "packed f32 weights need ONNX Runtime and the onnx package, which are not installed",
                INSTALL_FIX,
            ) from exc
        self._ort: Any = ort
        self._onnx: Any = onnx
        self.version = ort.__version__
        self._get_data = get_data
        self._errors = CallbackErrors("a packed f32 product", INSTALL_FIX)
        self._keys = itertools.count(1)
        self._matrices: dict[int, PackedMatrix] = {}
        # Each node's I/O bindings per thread, made on its first compute (native/node_plans.py).
        self.plans: NodePlans[tuple[tuple[Any, Any], ...]] = NodePlans()
        self.callback = CustomOp(self._compute)

    # ----------------------------------------------------------------- weights
    def pack(self, source: FileMatrix, panels: int) -> PackedMatrix:
        """Pack ``source`` into ``panels`` column panels (ONNX Runtime reads the file; nothing stays mapped)."""
        source.check(source.path.stat().st_size)
        if panels < 1 or source.n % panels:
            raise UsageError(f"{source.n} output columns do not split into {panels} panels")
        width = source.n // panels
        options = self._ort.SessionOptions()
        options.intra_op_num_threads = 1  # ggml's threads already cover the cores
        options.inter_op_num_threads = 1
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        # One Gemm has nothing to optimise; the optimiser's passes over the initializer cost a third of the load.
        options.graph_optimization_level = self._ort.GraphOptimizationLevel.ORT_DISABLE_ALL
        options.add_session_config_entry(
            "session.model_external_initializers_file_folder_path", str(source.path.parent)
        )
        sessions = []
        for panel in range(panels):
            offset = source.offset + panel * width * source.k * 4
            model = self._panel_model(source.path.name, offset, width, source.k)
            try:
                sessions.append(
                    self._ort.InferenceSession(model, options, providers=["CPUExecutionProvider"])
                )
            except Exception as exc:  # ONNX Runtime raises its own exception types
                raise BackendError(
                    f"ONNX Runtime could not pack a {source.n}x{source.k} weight of {source.path.name}: {exc}",
                    INSTALL_FIX,
                ) from exc
        matrix = PackedMatrix(next(self._keys), source, panels, tuple(sessions))
        self._matrices[matrix.key] = matrix
        return matrix

    def drop(self, matrix: PackedMatrix) -> None:
        """Free a packed weight (its store closed); a graph still using it fails with a clear error."""
        self._matrices.pop(matrix.key, None)

    def _panel_model(self, file_name: str, offset: int, width: int, k: int) -> bytes:
        onnx = self._onnx
        helper, tensor_proto = onnx.helper, onnx.TensorProto
        weight = tensor_proto(name="w", data_type=tensor_proto.FLOAT, dims=[width, k])
        weight.data_location = tensor_proto.EXTERNAL
        for key, value in (("location", file_name), ("offset", str(offset)), ("length", str(width * k * 4))):
            entry = weight.external_data.add()
            entry.key, entry.value = key, value
        node = helper.make_node("Gemm", ["x", "w"], ["y"], transB=1)
        graph = helper.make_graph(
            [node],
            "captioneer_packed_f32_product",
            [helper.make_tensor_value_info("x", tensor_proto.FLOAT, ["rows", k])],
            [helper.make_tensor_value_info("y", tensor_proto.FLOAT, ["rows", width])],
            initializer=[weight],
        )
        model = helper.make_model(
            graph, opset_imports=[helper.make_opsetid("", _OPSET)], producer_name="captioneer"
        )
        model.ir_version = 8  # readable by every ONNX Runtime Captioneer supports
        return bytes(model.SerializeToString())

    # ----------------------------------------------------------------- products
    def register(self, args: PackedArgs) -> None:
        """Number a new node's arguments (before the graph computes); its builder forgets it when freed."""
        args.serial = self.plans.new_serial()

    def _compute(self, dst: int, ith: int, nth: int, userdata: int) -> None:
        try:
            runs = self.plans.plan_for(PackedArgs.from_address(userdata), dst, ith, nth, self._bind)
            for session, binding in runs:
                session.run_with_iobinding(binding)
        except BaseException as exc:  # a C caller cannot take an exception: keep it for check()
            self._errors.keep(exc)

    def _bind(self, args: PackedArgs, dst: int, ith: int, nth: int) -> tuple[tuple[Any, Any], ...]:
        matrix = self._matrices.get(args.matrix)
        if matrix is None:
            raise UsageError("a packed weight was used after its weight store closed")
        rows, k, panels = args.rows, args.k, args.panels
        width = args.n // panels
        x, out = self._get_data(args.x), self._get_data(dst)
        runs = []
        for panel, first, count in thread_units(rows, panels, ith, nth):
            session = matrix.sessions[panel]
            binding = session.io_binding()
            binding.bind_input("x", "cpu", 0, np.float32, [count, k], x + first * k * 4)
            binding.bind_output(
                "y", "cpu", 0, np.float32, [count, width], out + (panel * rows + first) * width * 4
            )
            runs.append((session, binding))
        return tuple(runs)

    def check(self) -> None:
        """Raise what a packed product failed with during the last compute (then forget it)."""
        self._errors.raise_kept()


def open_packed(get_data: Callable[[int], int], required: bool) -> PackedF32Gemm | None:
    """The packed-weight engine of a CPU backend (None where it cannot load and was not ``required``)."""
    try:
        return PackedF32Gemm(get_data)
    except BackendError:
        if required:
            raise
        return None
