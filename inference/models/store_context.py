"""What every part of the model store shares (:class:`StoreContext`): its folders, catalog, hub client,
conversions and clock, the per-package lock, free space checks, progress reports and the atomic swap of an
assembled package into place. The parts (``maintenance``, ``downloads``, ``assembly``, ``importing``) each hold
one context; none inherits another."""

from __future__ import annotations

import contextlib
import os
import shutil
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from filelock import FileLock, Timeout

from inference.errors import UsageError
from inference.models.catalog import Catalog
from inference.models.conversion import ConversionRegistry
from inference.models.errors import DiskSpaceError
from inference.models.fsops import is_linked, remove_tree, walk_files
from inference.models.hashing import sha256_file
from inference.models.hub import HubClient
from inference.models.marker import INSTALL_MARKER, MarkerFile
from inference.models.progress import (
    ProgressCallback,
    ProgressTracker,
    ThrottledReporter,
    hash_reporter,
    human_bytes,
)
from inference.models.store_layout import LOCK_DIR, TMP_PREFIX
from inference.paths import AppPaths

DiskUsage = Callable[[Path], Any]  # shutil.disk_usage-like: returns an object with .free


class StoreContext:
    """The models folder with what every store part needs: paths, catalog, hub, conversions, disk and clock,
    the per-package lock, free-space checks, progress trackers and the temporary folder swapped into place."""

    def __init__(
        self,
        paths: AppPaths,
        catalog: Catalog | None = None,
        hub: HubClient | None = None,
        conversions: ConversionRegistry | None = None,
        disk_usage: DiskUsage = shutil.disk_usage,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.paths = paths
        self.catalog = catalog or Catalog(paths)
        self._hub = hub
        # The families' hooks (``FamilyRegistry.conversions()``); without them the store converts nothing.
        self.conversions = conversions or ConversionRegistry()
        self.disk_usage = disk_usage
        self.clock = clock

    @property
    def root(self) -> Path:
        return self.paths.models

    @property
    def hub(self) -> HubClient:
        if self._hub is None:  # built lazily so import/remove/verify work without huggingface_hub settings
            self._hub = HubClient.from_environment()
        return self._hub

    def lock_for(self, package_id: str) -> FileLock:
        lock_dir = self.root / LOCK_DIR
        lock_dir.mkdir(parents=True, exist_ok=True)
        return FileLock(lock_dir / f"{package_id}.lock", timeout=0)

    @contextlib.contextmanager
    def package_lock(self, package_id: str, action: str) -> Iterator[None]:
        lock = self.lock_for(package_id)
        try:
            lock.acquire()
        except Timeout:
            raise UsageError(
                f"cannot {action} {package_id}: another Captioneer process or window is installing, importing or "
                "removing it right now",
                "wait for that to finish (or cancel it there), then try again",
            ) from None
        try:
            yield
        finally:
            _release_and_remove(lock)

    def tracker(self, package_id: str, progress: ProgressCallback | None) -> ProgressTracker:
        """Package-wide progress reports for one job, throttled for a user interface."""
        return ProgressTracker(package_id, ThrottledReporter(progress))

    def is_busy(self, package_id: str) -> bool:
        """Whether some process holds ``package_id``'s lock (an install, import or removal is running); a lock
        file nobody holds (left by a killed process) is removed."""
        if not (self.root / LOCK_DIR / f"{package_id}.lock").exists():
            return False
        lock = self.lock_for(package_id)
        try:
            lock.acquire()
        except Timeout:
            return True
        _release_and_remove(lock)
        return False

    def require_space(self, needed: int, purpose: str) -> None:
        free = int(self.disk_usage(self.root).free)
        if free < needed:
            raise DiskSpaceError(
                f"not enough free disk space {purpose}: needs {human_bytes(needed)} ({needed} bytes), "
                f"only {human_bytes(free)} ({free} bytes) free in {self.root}",
                "free some space, or move the model folder to a larger disk with CAPTIONEER_MODELS_DIR",
            )

    def new_tmp_dir(self, package_id: str) -> Path:
        tmp = self.root / f"{TMP_PREFIX}{package_id}-{uuid.uuid4().hex[:8]}"
        tmp.mkdir(parents=True)
        return tmp

    def swap_into_place(self, tmp: Path, package_id: str) -> Path:
        final = self.root / package_id
        if final.exists() or final.is_symlink():
            old = self.root / f"{TMP_PREFIX}{package_id}-old-{uuid.uuid4().hex[:8]}"
            os.replace(final, old)
            os.replace(tmp, final)
            remove_tree(old)
        else:
            os.replace(tmp, final)
        return final

    def describe_files(
        self,
        directory: Path,
        known: dict[str, str | None],
        tracker: ProgressTracker,
        cancel: threading.Event | None,
        hash_links: bool = True,
    ) -> tuple[MarkerFile, ...]:
        """Every file of an assembled package with its size and sha256 (``known`` ones are not hashed again)."""
        files = []
        for path in walk_files(directory):
            rel = path.relative_to(directory).as_posix()
            if rel in (INSTALL_MARKER, INSTALL_MARKER + ".tmp"):
                continue
            digest = known.get(rel)
            if digest is None and (hash_links or not is_linked(path, directory)):
                digest = sha256_file(path, hash_reporter(tracker, "finishing", 0, None, rel), cancel)
            files.append(MarkerFile(rel, path.stat().st_size, digest))
        return tuple(files)


def _release_and_remove(lock: FileLock) -> None:
    """Release ``lock`` and delete its file, so no ``.locks/<id>.lock`` outlives its holder. The file is unlinked
    while still held: a process that opened it meanwhile gets a deleted inode, which filelock sees and does not
    count as acquired (with timeout 0 it reports the package busy), so two holders are impossible. Windows
    refuses to unlink an open file; filelock deletes it there on release."""
    with contextlib.suppress(OSError):
        Path(lock.lock_file).unlink()
    lock.release()
