"""The model store on disk: install from the hub, import, remove, verify, clean up.

One class, :class:`ModelStore`, built from one module per seam: ``store_layout`` (names and places),
``store_base`` (locks, free space, the atomic swap), ``downloads`` (partial downloads), ``assembly`` (install),
``importing`` (local models, Phonon-2), ``maintenance`` (remove, verify, cleanup), ``marker`` (the typed
install marker) and ``fsops`` (file operations).

Layout under the models directory (``AppPaths.models``, overridable with ``CAPTIONEER_MODELS_DIR``)::

    <id>/                       an installed package; installed iff captioneer-package.json exists
    .partial/<id>/<file>.part   resumable downloads (+ <file>.json: the remote file they belong to)
    .tmp-<id>-<random>/         an install being assembled; renamed to <id> when complete
    .locks/<id>.lock            held while a process installs, imports or removes <id>

Downloads land in ``.partial`` and survive cancel, crashes and lost connections (``cleanup`` drops
partials untouched for a week and ``.tmp-`` directories untouched for a day). Only when every
file is complete and verified are they moved into a ``.tmp-`` directory, converted if the family
needs it, given the marker, and renamed into place, so a half-done install never looks installed.
Two processes (or two windows) working on the same package would fight over its partial files, so
install, import and remove hold a per-package file lock and refuse, naming the problem, when it is taken;
``cleanup`` leaves a busy package's leftovers alone.

A catalog file may come from another repository than its package's (``spec.py``): the Phonon-2 archive's
sidecars come from nvidia's Parakeet repository. ``import_local`` copies a model as it is, except a Phonon-2
source (``.tar.zst`` or a folder with ``model.fermion``), which it converts like an install would
(``families/parakeet_tdt/phonon_source.py``), downloading the sidecars unless a local folder of them is given.
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
    "DAY_S", "DERIVED_DIR", "DISK_RESERVE_BYTES", "LOCK_DIR", "PARTIAL_DIR", "PARTIAL_MAX_AGE_S", "TMP_PREFIX",
    "DiskUsage", "FileCheck", "ModelStore", "VerifyReport",
]  # fmt: skip


class ModelStore(StoreImporter):
    """Install (``install``), import (``import_local``), remove, verify and clean up model packages under
    ``AppPaths.models``; every step's code lives in the module of its seam (see above)."""
