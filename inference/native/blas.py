"""Large f32 products on OpenBLAS's packed SGEMM, as a ggml custom op inside the graph.

Why: ggml's CPU f32 product reaches about half of an AVX-512 core's peak, a packed GEMM nearly all of it
(figures: tests/bench/README.md, "Big f32 products on OpenBLAS"). f32 x f32 products with enough rows go to
``cblas_sgemm`` from ``scipy-openblas32`` (``scipy_``-prefixed symbols, so it never clashes with another BLAS).

How: ``ggml_custom_4d`` calls back on every compute thread; each runs a single-threaded ``cblas_sgemm`` on its
share of the output (ctypes releases the GIL; OpenBLAS stays at one thread so it never competes with ggml's).
Products stay exact f32; only the summation order differs from ggml's.

Choice (``open_backend(gemm=...)``, else ``$CAPTIONEER_F32_GEMM``): ``auto`` uses OpenBLAS when it loads on a
CPU backend, for the products whose weights are not packed once at load (native/packed_f32.py: ``auto`` packs
where ONNX Runtime loads, ``onnxruntime`` requires it); ``openblas`` requires OpenBLAS and packs nothing, ``ggml``
uses neither. ``OPENBLAS_CORETYPE`` is respected (forcing
``Haswell`` on AVX-512 halves the speed), so the benchmarks print the core.
"""

from __future__ import annotations

import ctypes
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from inference.errors import BackendError, UsageError
from inference.native.bindings import I32, I64, CustomOp, P
from inference.native.callback_errors import CallbackErrors
from inference.native.node_plans import NodePlans

GEMM_CHOICES = ("auto", "ggml", "openblas", "onnxruntime")
# The choices under which a CPU backend packs its stores' f32 weights once (native/packed_f32.py).
PACKING_CHOICES = ("auto", "onnxruntime")
GEMM_ENV = "CAPTIONEER_F32_GEMM"
INSTALL_FIX = "pip install scipy-openblas32 (a Captioneer dependency), or set CAPTIONEER_F32_GEMM=ggml"

# CBLAS enums.
_ROW_MAJOR, _NO_TRANS, _TRANS = 101, 111, 112
# Output columns per thread are whole multiples of this (full SIMD panels for the packed kernels).
_COLUMN_ALIGN = 64


class ProductArgs(ctypes.Structure):
    """What one product node needs at compute time (kept alive by the graph that holds the node).

    ggml's ``mul_mat(a, b)``: for each of ``batches`` (b's axes 2 and 3, flattened) ``out = b @ a.T`` with
    a (n, k) and b (rows, k); a's batch index is b's divided by ``a_repeat`` (ggml broadcasts a over b).
    Strides in bytes; rows of k contiguous floats on both sides. The output is contiguous."""

    _fields_ = [
        ("a", P),  # ggml tensors (read with ggml_get_data at compute time: the allocator places them)
        ("b", P),
        ("rows", I64),
        ("n", I64),
        ("k", I64),
        ("a_row", I64),
        ("b_row", I64),
        ("batches", I64),
        ("batches2", I64),  # b's axis-2 size: batch i is (i % batches2, i // batches2)
        ("a_repeat2", I64),
        ("a_repeat3", I64),
        ("a_nb2", I64),
        ("a_nb3", I64),
        ("b_nb2", I64),
        ("b_nb3", I64),
        ("serial", I64),  # the node's number in the gemm's plans (OpenBlasGemm.register)
    ]


@dataclass(frozen=True)
class GemmLimits:
    """Products smaller than this stay on ggml: the callback costs a few microseconds per thread and
    OpenBLAS packs the weight on every call, which only pays off over enough rows (measured on the
    Zen 5 above: equal at 32 rows, 1.3x at 128, 1.7x at 750)."""

    min_rows: int = 64
    min_macs: int = 1 << 22


def requested_gemm(gemm: str | None) -> str:
    choice = (gemm if gemm is not None else os.environ.get(GEMM_ENV, "auto")).strip().lower() or "auto"
    if choice not in GEMM_CHOICES:
        source = "gemm" if gemm is not None else GEMM_ENV
        raise UsageError(
            f"unknown f32 GEMM {choice!r} (from {source})", f"choose one of: {', '.join(GEMM_CHOICES)}"
        )
    return choice


def _load_library() -> ctypes.CDLL:
    try:
        import scipy_openblas32
    except ImportError as exc:
        raise BackendError("the OpenBLAS package scipy-openblas32 is not installed", INSTALL_FIX) from exc
    lib_dir = Path(scipy_openblas32.get_lib_dir())
    suffix = {"win32": ".dll", "darwin": ".dylib"}.get(sys.platform, ".so")
    candidates = sorted(p for p in lib_dir.iterdir() if "scipy_openblas" in p.name and suffix in p.name)
    if not candidates:
        raise BackendError(f"no OpenBLAS library in {lib_dir}", INSTALL_FIX)
    return ctypes.CDLL(str(candidates[0]))


class OpenBlasGemm:
    """Routes big f32 products of a CPU graph to OpenBLAS; one per backend."""

    def __init__(self, get_data: Callable[[int], int], limits: GemmLimits | None = None) -> None:
        lib = _load_library()
        self.limits = limits or GemmLimits()
        self._get_data = get_data
        lib.scipy_openblas_set_num_threads(1)
        corename = lib.scipy_openblas_get_corename
        corename.restype = ctypes.c_char_p
        self.core = corename().decode()
        config = lib.scipy_openblas_get_config
        config.restype = ctypes.c_char_p
        self.config = config().decode()
        sgemm = lib.scipy_cblas_sgemm
        sgemm.restype = None
        # (order, transA, transB, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc); this build's ints are 32-bit
        sgemm.argtypes = [I32] * 6 + [ctypes.c_float, P, I32, P, I32, ctypes.c_float, P, I32]
        self._sgemm = sgemm
        self._lib = lib
        self._errors = CallbackErrors("an OpenBLAS product", f"set {GEMM_ENV}=ggml")
        # Each node's sgemm calls per thread, worked out on its first compute (native/node_plans.py).
        self.plans: NodePlans[tuple[tuple[Any, ...], ...]] = NodePlans()
        # One C entry point for every node; the node's ProductArgs arrive as userdata.
        self.callback = CustomOp(self._compute)

    def register(self, args: ProductArgs) -> None:
        """Number a new node's arguments (before the graph computes); its builder forgets it when freed."""
        args.serial = self.plans.new_serial()

    def routes(self, rows: int, n: int, k: int, batches: int = 1) -> bool:
        """Whether a product of ``batches`` matrices, each (rows, k) times (k, n), should go to OpenBLAS."""
        return rows >= self.limits.min_rows and batches * rows * n * k >= self.limits.min_macs

    def _compute(self, dst: int, ith: int, nth: int, userdata: int) -> None:
        try:
            plan = self.plans.plan_for(ProductArgs.from_address(userdata), dst, ith, nth, self._plan)
            sgemm = self._sgemm
            for call in plan:
                sgemm(*call)
        except BaseException as exc:  # a C caller cannot take an exception: keep it for check()
            self._errors.keep(exc)

    def _plan(self, args: ProductArgs, dst: int, ith: int, nth: int) -> tuple[tuple[Any, ...], ...]:
        """The ``cblas_sgemm`` arguments thread ``ith`` of ``nth`` runs for this node (none: no share)."""
        n, rows = args.n, args.rows
        a0, b0, out0 = self._get_data(args.a), self._get_data(args.b), self._get_data(dst)
        if args.batches >= nth:  # whole matrices per thread (attention heads)
            batches, first, columns = range(ith, args.batches, nth), 0, n
        else:  # a share of the output columns per thread, whole 64-column panels where possible
            share = -(-n // nth)
            share = -(-share // _COLUMN_ALIGN) * _COLUMN_ALIGN
            first = ith * share
            columns = min(n, first + share) - first
            if columns <= 0:
                return ()
            batches = range(args.batches)
        lda, ldb = args.a_row // 4, args.b_row // 4
        calls = []
        for i in batches:
            i2, i3 = i % args.batches2, i // args.batches2
            a = (
                a0
                + (i2 // args.a_repeat2) * args.a_nb2
                + (i3 // args.a_repeat3) * args.a_nb3
                + first * args.a_row
            )
            b = b0 + i2 * args.b_nb2 + i3 * args.b_nb3
            out = out0 + (i * rows * n + first) * 4
            calls.append(
                (_ROW_MAJOR, _NO_TRANS, _TRANS, rows, columns, args.k, 1.0, b, ldb, a, lda, 0.0, out, n)
            )
        return tuple(calls)

    def check(self) -> None:
        """Raise what a product callback failed with during the last compute (then forget it)."""
        self._errors.raise_kept()


def open_gemm(choice: str, is_cpu: bool, get_data: Callable[[int], int]) -> OpenBlasGemm | None:
    """The product router a backend should use for ``choice`` (None: ggml does every product)."""
    if choice == "ggml" or not is_cpu:
        if choice in ("openblas", "onnxruntime") and not is_cpu:
            raise UsageError(f"the {choice} f32 GEMM runs on the CPU backend only", "use --backend cpu")
        return None
    try:
        return OpenBlasGemm(get_data)
    except (BackendError, OSError, AttributeError) as exc:
        if choice == "openblas":
            if isinstance(exc, BackendError):
                raise
            raise BackendError(f"could not load OpenBLAS: {exc}", INSTALL_FIX) from exc
        return None  # auto: ggml's own product is the fallback
