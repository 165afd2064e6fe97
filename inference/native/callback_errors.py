"""Exceptions raised inside ggml custom-op callbacks, kept until the compute returns.

ggml calls a custom op's callback from its compute threads through C, which cannot take a Python exception;
the product routers (native/blas.py, native/int8.py) keep the first one here and the graph raises it after
the compute (``Graph._compute_graph``) instead of returning garbage.
"""

from __future__ import annotations

import threading

from inference.errors import BackendError


class CallbackErrors:
    """The first exception of any compute thread since the last :meth:`raise_kept`."""

    def __init__(self, what: str, fix: str) -> None:
        self._what, self._fix = what, fix
        self._failure: BaseException | None = None
        self._lock = threading.Lock()

    def keep(self, exc: BaseException) -> None:
        with self._lock:
            self._failure = self._failure or exc

    def raise_kept(self) -> None:
        """Raise what a callback failed with during the last compute as a BackendError (then forget it)."""
        if self._failure is not None:
            failure, self._failure = self._failure, None
            raise BackendError(f"{self._what} failed: {failure!r}", self._fix) from failure
