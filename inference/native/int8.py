"""8-bit weight products on ONNX Runtime's int8 GEMM (MLAS), as a ggml custom op inside the graph.

Why: ggml has no tiled x86 kernel for q8_0, while MLAS's u8 x s8 GEMM uses AVX-512 VNNI / AVX-VNNI
(figures: tests/bench/README.md, "int8 weights"). ONNX Runtime is already a dependency (Silero VAD).

Format (``weight_type=int8``): each output row ``n`` of ``W`` (N, K) has a scale ``s[n] = max|W[n]| / qmax`` and
is stored as ``round(W[n] / s[n])``. The ggml tensor keeps the logical shape (N, K), type I8, but holds the bytes
**transposed** in column panels, (P, K, N/P) row-major: each panel is a (K, N/P) ``B`` operand as MLAS wants it;
only :class:`Int8Gemm` reads it. P is the backend's thread count when N splits into whole 64-column panels, else
1 (:func:`~inference.native.node_plans.weight_panels`; the store records it). The scales are a separate f32
tensor (``WeightStore.int8_scale``).
qmax is 127 with VNNI (``Backend._has_vnni``), else 63: MLAS's AVX2 kernel sums pairs in 16 bits, which can
saturate (ONNX Runtime's ``reduce_range``).

Why panels: MLAS packs a ``B`` that is an input (not a constant) on every call, a cost that follows the weight's
size, not the rows. Split by rows, every thread packed the whole weight; split by panels, each packs its own, which
halved the products' CPU on short clips (tests/bench/README.md, "Parakeet on 2-10 s clips"). The product's output
comes out panel by panel, (P, rows, N/P); the graph puts it back in row order (``GraphBuilder._int8_product``).
With as many threads as panels every thread quantizes all rows, so results do not depend on the thread count;
with more threads than panels, or from ``ROW_SPLIT_MIN_ROWS`` rows up (where packing is amortised), each thread
takes a share of the rows through every panel (activations quantized per share, as before). Either way results
depend on the rows in the call at the level of the int8 rounding, so graphs whose rows must not depend on batching
(R2T2's live tower) cannot use it.
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from inference.errors import BackendError
from inference.native.bindings import I64, CustomOp, P
from inference.native.callback_errors import CallbackErrors
from inference.native.node_plans import NodePlans, thread_units

MODEL_PATH = Path(__file__).with_name("dynamic_quantize_matmul.onnx")
INSTALL_FIX = "pip install onnxruntime (a Captioneer dependency), or pick weight_type q8_0"
# The weight scale: VNNI CPUs multiply u8 x s8 into 32 bits; AVX2's pairwise 16-bit sums can saturate
# above 7-bit weights (255 * 127 * 2 > 32767).
QMAX_VNNI, QMAX_NO_VNNI = 127, 63
# From this many rows up the threads split the rows (through every panel) instead of the panels: the packing is
# amortised over the rows there, and the column split measured 7-15 % slower on a 60 s clip (750 rows).
ROW_SPLIT_MIN_ROWS = 256


class Int8Args(ctypes.Structure):
    """One int8 product node: ``out (rows, n) = x (rows, k) @ dequant(w)``; ggml tensors read at compute time."""

    _fields_ = [
        ("x", P),
        ("w", P),
        ("scale", P),
        ("rows", I64),
        ("n", I64),
        ("k", I64),
        # The weight's column panels (weight_panels); the output is (panels, rows, n / panels).
        ("panels", I64),
        ("serial", I64),  # the node's number in the Int8Gemm's plans (Int8Gemm.register)
    ]


def quantize_rows(weight: np.ndarray, qmax: int, panels: int = 1) -> tuple[np.ndarray, np.ndarray]:
    """(N, K) float weights -> ((panels, K, N / panels) int8 transposed column panels, (N,) float32 scales),
    one symmetric scale per row."""
    values = np.asarray(weight, dtype=np.float32)
    if values.ndim != 2:
        raise ValueError(f"int8 weights are matrices, got shape {values.shape}")
    n, k = values.shape
    if panels < 1 or n % panels:
        raise ValueError(f"{n} output columns do not split into {panels} panels")
    peak = np.max(np.abs(values), axis=1)
    scale = np.where(peak > 0, peak / qmax, 1.0).astype(np.float32)
    scaled = np.divide(values, scale[:, None])  # |scaled| <= qmax, so rounding stays in range (no clip)
    np.rint(scaled, out=scaled)
    # Transposing int8 bytes costs a quarter of f32's; panel p holds output columns [p·N/P, (p+1)·N/P).
    quantized = scaled.astype(np.int8).reshape(panels, n // panels, k)
    return np.ascontiguousarray(quantized.transpose(0, 2, 1)), scale


def dequantize_rows(panelled: np.ndarray, scale: np.ndarray) -> np.ndarray:
    """The float32 (N, K) weight an int8 weight stands for (``panelled``: (P, K, N/P), or (K, N) for one panel)."""
    transposed = panelled if panelled.ndim == 2 else np.concatenate(list(panelled), axis=1)
    return transposed.T.astype(np.float32) * scale[:, None]


class Int8Gemm:
    """Computes the int8 weight products of a CPU backend's graphs; one per backend, opened on first use."""

    def __init__(self, get_data: Callable[[int], int], has_vnni: bool) -> None:
        try:
            import onnxruntime as ort
        except ImportError as exc:
            raise BackendError("int8 weights need ONNX Runtime, which is not installed", INSTALL_FIX) from exc
        if not MODEL_PATH.is_file():
            raise BackendError(f"the int8 product model {MODEL_PATH.name} is missing", "reinstall Captioneer")
        options = ort.SessionOptions()
        # ggml's threads already cover the cores: each runs its own single-threaded product.
        options.intra_op_num_threads = 1
        options.inter_op_num_threads = 1
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        self._session: Any = ort.InferenceSession(
            str(MODEL_PATH), options, providers=["CPUExecutionProvider"]
        )
        self.qmax = QMAX_VNNI if has_vnni else QMAX_NO_VNNI
        self.version = ort.__version__
        self._get_data = get_data
        self._errors = CallbackErrors("an int8 product", INSTALL_FIX)
        # Each node's I/O bindings per thread (none: no work for that thread), made on its first compute
        # (native/node_plans.py): binding four tensors cost more Python than the run itself on short clips.
        self.plans: NodePlans[tuple[Any, ...]] = NodePlans()
        self.callback = CustomOp(self._compute)

    def register(self, args: Int8Args) -> None:
        """Number a new node's arguments (before the graph computes); its builder forgets it when freed."""
        args.serial = self.plans.new_serial()

    def _compute(self, dst: int, ith: int, nth: int, userdata: int) -> None:
        try:
            bindings = self.plans.plan_for(Int8Args.from_address(userdata), dst, ith, nth, self._bind)
            run = self._session.run_with_iobinding
            for binding in bindings:
                run(binding)
        except BaseException as exc:  # a C caller cannot take an exception: keep it for check()
            self._errors.keep(exc)

    def _bind(self, args: Int8Args, dst: int, ith: int, nth: int) -> tuple[Any, ...]:
        """Thread ``ith``'s products bound to ONNX Runtime: whole column panels when there are at least as many
        panels as threads and few rows, else a share of the rows through every panel (none: no work)."""
        rows, n, k, panels = args.rows, args.n, args.k, args.panels
        width = n // panels
        units = thread_units(rows, panels, ith, nth, row_split_from=ROW_SPLIT_MIN_ROWS)
        x, w, scale, out = (
            self._get_data(args.x),
            self._get_data(args.w),
            self._get_data(args.scale),
            self._get_data(dst),
        )
        bindings = []
        for panel, first, count in units:
            binding = self._session.io_binding()
            binding.bind_input("x", "cpu", 0, np.float32, [count, k], x + first * k * 4)
            binding.bind_input("w", "cpu", 0, np.int8, [k, width], w + panel * k * width)
            binding.bind_input("w_scale", "cpu", 0, np.float32, [width], scale + panel * width * 4)
            binding.bind_output(
                "y", "cpu", 0, np.float32, [count, width], out + (panel * rows + first) * width * 4
            )
            bindings.append(binding)
        return tuple(bindings)

    def check(self) -> None:
        """Raise what an int8 product failed with during the last compute (then forget it)."""
        self._errors.raise_kept()
