"""Force every f32 product of a backend onto OpenBLAS and record them, for parity tests of whole models."""

from __future__ import annotations

from typing import Any

from inference.native import Backend
from inference.native.blas import GemmLimits


def every_product_on_openblas(backend: Backend) -> list[tuple[int, int, int]]:
    """Lift the speed limits (the tiny fixture models' products are all under them) and record the (M, N, K) of
    every ``cblas_sgemm`` call from now on; the returned list fills as graphs run."""
    assert backend.gemm is not None, "open the backend with gemm='openblas'"
    backend.gemm.limits = GemmLimits(min_rows=1, min_macs=1)
    calls: list[tuple[int, int, int]] = []
    sgemm = backend.gemm._sgemm

    def recording(*args: Any) -> None:
        calls.append(args[3:6])
        sgemm(*args)

    backend.gemm._sgemm = recording
    return calls
