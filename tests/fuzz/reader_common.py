"""What the reader fuzz targets (run in the harness's children) and the test side share, kept light: the test
process never imports the targets' modules (the readers, the native library), only the zygote does."""

from __future__ import annotations

import hashlib
from typing import Any

SIDECARS_ENV = "CAPTIONEER_FUZZ_SIDECARS"  # the Phonon sidecar folder the test prepared


def digest(data: Any) -> str:
    """A short digest of bytes (or a buffer) for comparing what two readers read."""
    return hashlib.sha256(bytes(data)).hexdigest()[:16]
