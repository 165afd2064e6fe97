"""The install marker ``<models>/<id>/captioneer-package.json``: written last, so its presence means installed.

Fields (schema 1): ``schema``, ``id``, ``family``, ``format``, ``name``, ``model_path`` (relative to the
package dir), ``source`` ("hub" or "import"), ``hf_repo``, ``revision``, ``commit``, ``origin`` (import
source path), ``linked`` (import by link), ``installed_at`` (unix time), ``size_bytes``, and ``files``:
``[{"path", "size", "sha256"}]`` with the hashes computed at install time (``sha256`` may be null for
linked imports).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from inference.models.catalog import INSTALL_MARKER

MARKER_SCHEMA = 1


def read_marker(package_dir: Path) -> dict[str, Any] | None:
    try:
        data = json.loads((package_dir / INSTALL_MARKER).read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return None
    return data if isinstance(data, dict) else None


def write_marker(package_dir: Path, data: dict[str, Any]) -> None:
    """Write through a temporary name and rename, so a crash never leaves half a marker."""
    payload = {"schema": MARKER_SCHEMA, **data}
    tmp = package_dir / (INSTALL_MARKER + ".tmp")
    with tmp.open("w", encoding="utf-8") as handle:
        json.dump(payload, handle, indent=2, ensure_ascii=False)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, package_dir / INSTALL_MARKER)
