"""8-bit weight products on ONNX Runtime's int8 GEMM (MLAS), as a ggml custom op inside the graph.

Why: ggml has no tiled x86 kernel for q8_0, while MLAS's u8 x s8 GEMM uses AVX-512 VNNI / AVX-VNNI
(figures: tests/bench/README.md, "int8 weights"). ONNX Runtime is already a dependency (Silero VAD).

Format (``weight_type=int8``): each output row ``n`` of ``W`` (N, K) has a scale ``s[n] = max|W[n]| / qmax`` and
is stored as ``round(W[n] / s[n])``. The ggml tensor keeps the logical shape (N, K), type I8, but holds the bytes
**transposed**, (K, N) row-major, as MLAS's ``B`` operand wants; only :class:`Int8Gemm` reads it. The scales are
a separate f32 tensor (``WeightStore.int8_scale``). qmax is 127 with VNNI (``Backend._has_vnni``), else 63:
MLAS's AVX2 kernel sums pairs in 16 bits, which can saturate (ONNX Runtime's ``reduce_range``).

Activations are quantized per call and per thread share of the rows, so results depend on the thread count at
the level of the int8 rounding; graphs whose rows must not depend on batching (R2T2's live tower) cannot use it.
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
from inference.native.node_plans import NodePlans

MODEL_PATH = Path(__file__).with_name("dynamic_quantize_matmul.onnx")
INSTALL_FIX = "pip install onnxruntime (a Captioneer dependency), or pick weight_type q8_0"
# The weight scale: VNNI CPUs multiply u8 x s8 into 32 bits; AVX2's pairwise 16-bit sums can saturate
# above 7-bit weights (255 * 127 * 2 > 32767).
QMAX_VNNI, QMAX_NO_VNNI = 127, 63


class Int8Args(ctypes.Structure):
    """One int8 product node: ``out (rows, n) = x (rows, k) @ dequant(w)``; ggml tensors read at compute time."""

    _fields_ = [
        ("x", P),
        ("w", P),
        ("scale", P),
        ("rows", I64),
        ("n", I64),
        ("k", I64),
        ("serial", I64),  # the node's number in the Int8Gemm's plans (Int8Gemm.register)
    ]


def quantize_rows(weight: np.ndarray, qmax: int) -> tuple[np.ndarray, np.ndarray]:
    """(N, K) float weights -> ((K, N) int8 transposed, (N,) float32 scales), one symmetric scale per row."""
    values = np.asarray(weight, dtype=np.float32)
    if values.ndim != 2:
        raise ValueError(f"int8 weights are matrices, got shape {values.shape}")
    peak = np.max(np.abs(values), axis=1)
    scale = np.where(peak > 0, peak / qmax, 1.0).astype(np.float32)
    scaled = np.divide(values, scale[:, None])  # |scaled| <= qmax, so rounding stays in range (no clip)
    np.rint(scaled, out=scaled)
    return np.ascontiguousarray(scaled.astype(np.int8).T), scale  # transposing int8 bytes: a quarter of f32's


def dequantize_rows(transposed: np.ndarray, scale: np.ndarray) -> np.ndarray:
    """The float32 (N, K) weight an int8 weight stands for."""
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
        # Each node's I/O binding per thread (None: no rows for that thread), made on its first compute
        # (native/node_plans.py): binding four tensors cost more Python than the run itself on short clips.
        self.plans: NodePlans[Any] = NodePlans()
        self.callback = CustomOp(self._compute)

    def register(self, args: Int8Args) -> None:
        """Number a new node's arguments (before the graph computes); its builder forgets it when freed."""
        args.serial = self.plans.new_serial()

    def _compute(self, dst: int, ith: int, nth: int, userdata: int) -> None:
        try:
            serial = Int8Args.from_address(userdata).serial
            binding = self.plans.get(serial, ith, nth)
            if binding is None:
                binding = self._bind(Int8Args.from_address(userdata), dst, ith, nth)
                self.plans.put(serial, ith, nth, binding)
            if binding is not False:
                self._session.run_with_iobinding(binding)
        except BaseException as exc:  # a C caller cannot take an exception: keep it for check()
            self._errors.keep(exc)

    def _bind(self, args: Int8Args, dst: int, ith: int, nth: int) -> Any:
        """Thread ``ith``'s share of the rows bound to ONNX Runtime (False: no rows for this thread)."""
        share = -(-args.rows // nth)
        first = ith * share
        rows = min(args.rows, first + share) - first
        if rows <= 0:
            return False
        n, k = args.n, args.k
        binding = self._session.io_binding()
        binding.bind_input("x", "cpu", 0, np.float32, [rows, k], self._get_data(args.x) + first * k * 4)
        binding.bind_input("w", "cpu", 0, np.int8, [k, n], self._get_data(args.w))
        binding.bind_input("w_scale", "cpu", 0, np.float32, [n], self._get_data(args.scale))
        binding.bind_output("y", "cpu", 0, np.float32, [rows, n], self._get_data(dst) + first * n * 4)
        return binding

    def check(self) -> None:
        """Raise what an int8 product failed with during the last compute (then forget it)."""
        self._errors.raise_kept()
