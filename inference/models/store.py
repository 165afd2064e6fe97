"""The model store on disk: install from the hub, import, remove, verify, clean up.

:class:`ModelStore` holds the store's parts, each over one shared :class:`StoreContext` (``store_context``:
folders, catalog, hub, locks, free space, progress, the atomic swap) and each usable alone:
:class:`Maintenance` (remove, verify, cleanup), :class:`Downloads` (plan, resume, fetch, check),
:class:`Assembler` (temporary folder → converted → marker → swapped into place), :class:`Installer` (a catalog
package from the hub) and :class:`Importer` (a local folder or file, or a source a family converts). It forwards
the operations callers use to the part that does them.

Layout under the models directory (``AppPaths.models``, overridable with ``CAPTIONEER_MODELS_DIR``)::

    <id>/                       an installed package; installed iff captioneer-package.json exists
    .partial/<id>/<file>.part   resumable downloads (+ <file>.json: the remote file they belong to)
    .tmp-<id>-<random>/         an install being assembled; renamed to <id> when complete
    .locks/<id>.lock            held while a process installs, imports or removes <id>

Only verified, complete files are assembled (converted if the family needs it) and renamed into place, so a
half-done install never looks installed. Install, import and remove hold the per-package lock, because two
processes would fight over the partial files; ``cleanup`` drops week-old partials and the ``.tmp-`` folders of
processes that died (their lock is free).
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable
from pathlib import Path

from inference.models.assembly import Assembler, Installer
from inference.models.catalog import Catalog
from inference.models.conversion import ConversionRegistry
from inference.models.downloads import Downloads
from inference.models.hub import HubClient
from inference.models.importing import Importer
from inference.models.maintenance import FileCheck, Maintenance, VerifyReport
from inference.models.store_context import DiskUsage, StoreContext
from inference.models.store_layout import (
    DAY_S,
    DERIVED_DIR,
    DISK_RESERVE_BYTES,
    LOCK_DIR,
    PARTIAL_DIR,
    PARTIAL_MAX_AGE_S,
    TMP_PREFIX,
)
from inference.paths import AppPaths

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
    "StoreContext",
    "VerifyReport",
]


class ModelStore:
    """Install (``install``), import (``import_local``), remove, verify and clean up model packages under
    ``AppPaths.models``: the parts over one context, and the operations forwarded to the part that does them."""

    def __init__(
        self,
        paths: AppPaths,
        catalog: Catalog | None = None,
        hub: HubClient | None = None,
        conversions: ConversionRegistry | None = None,
        disk_usage: DiskUsage = shutil.disk_usage,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.context = StoreContext(paths, catalog, hub, conversions, disk_usage, clock)
        self.maintenance = Maintenance(self.context)
        self.downloads = Downloads(self.context)
        self.assembler = Assembler(self.context)
        self.installer = Installer(self.context, self.downloads, self.assembler, self.maintenance)
        self.importer = Importer(self.context, self.downloads, self.assembler, self.maintenance)
        self.install = self.installer.install
        self.import_local = self.importer.import_local
        self.remove = self.maintenance.remove
        self.verify = self.maintenance.verify
        self.cleanup = self.maintenance.cleanup
        self.partial_bytes = self.maintenance.partial_bytes
        self.is_busy = self.context.is_busy

    @property
    def root(self) -> Path:
        return self.context.root

    @property
    def catalog(self) -> Catalog:
        return self.context.catalog

    @property
    def conversions(self) -> ConversionRegistry:
        return self.context.conversions
