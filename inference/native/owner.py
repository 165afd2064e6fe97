"""A base for objects that own native memory (backends, graphs, weight buffers)."""

from __future__ import annotations

import contextlib
from typing import Self


class NativeOwner:
    """``with`` support plus a last-resort finaliser; subclasses implement an idempotent ``close()``.

    Owners should call ``close()`` (or use ``with``): ``__del__`` only guards against leaks when they forget.
    """

    def close(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        with contextlib.suppress(Exception):
            self.close()
