"""numpy's BLAS thread counts as a test sees them, recorded at every call of a function under test."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from threadpoolctl import threadpool_info


def numpy_blas_threads() -> set[int]:
    """The thread counts of the BLAS pools loaded in this process."""
    return {pool["num_threads"] for pool in threadpool_info() if pool["user_api"] == "blas"}


def recording_blas_threads(function: Callable[..., Any], seen: list[set[int]]) -> Callable[..., Any]:
    """``function`` that first appends the BLAS pools' thread counts to ``seen``."""

    def recording(*args: Any, **kwargs: Any) -> Any:
        seen.append(numpy_blas_threads())
        return function(*args, **kwargs)

    return recording
