"""The model store on disk: install from the hub, import, remove, verify, clean up.

:class:`ModelStore` is built from one module per seam: ``store_layout``, ``store_base`` (locks, free space, the
atomic swap), ``downloads``, ``assembly``, ``importing``, ``maintenance``, ``marker`` and ``fsops``.

Layout under the models directory (``AppPaths.models``, overridable with ``CAPTIONEER_MODELS_DIR``)::

    <id>/                       an installed package; installed iff captioneer-package.json exists
    .partial/<id>/<file>.part   resumable downloads (+ <file>.json: the remote file they belong to)
    .tmp-<id>-<random>/         an install being assembled; renamed to <id> when complete
    .locks/<id>.lock            held while a process installs, imports or removes <id>

Only verified, complete files are assembled (converted if the family needs it) and renamed into place, so a
half-done install never looks installed. Install, import and remove hold the per-package lock, because two
processes would fight over the partial files; ``cleanup`` drops week-old partials and day-old ``.tmp-`` folders.
"""

from __future__ import annotations

from inference.models.importing import StoreImporter
from inference.models.maintenance import FileCheck, VerifyReport
from inference.models.store_base import DiskUsage
from inference.models.store_layout import (
    DAY_S,
    DERIVED_DIR,
    DISK_RESERVE_BYTES,
    LOCK_DIR,
    PARTIAL_DIR,
    PARTIAL_MAX_AGE_S,
    TMP_PREFIX,
)

__all__ = [
    "DAY_S",
    "DERIVED_DIR",
    "DISK_RESERVE_BYTES",
    "LOCK_DIR",
    "PARTIAL_DIR",
    "PARTIAL_MAX_AGE_S",
    "TMP_PREFIX",
    "DiskUsage",
    "FileCheck",
    "ModelStore",
    "VerifyReport",
]


class ModelStore(StoreImporter):
    """Install (``install``), import (``import_local``), remove, verify and clean up model packages under
    ``AppPaths.models``; every step's code lives in the module of its seam (see above)."""
