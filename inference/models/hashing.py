"""sha256 of files with progress and cancel (a multi-GB file takes seconds to minutes)."""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Callable
from pathlib import Path

from inference.models.progress import check_cancel

_BLOCK = 4 * 1024 * 1024


def sha256_file(
    path: Path,
    on_bytes: Callable[[int], None] | None = None,
    cancel: threading.Event | None = None,
) -> str:
    digest = hashlib.sha256()
    done = 0
    with path.open("rb") as handle:
        while block := handle.read(_BLOCK):
            check_cancel(cancel)
            digest.update(block)
            done += len(block)
            if on_bytes is not None:
                on_bytes(done)
    return digest.hexdigest()
