"""Removing, verifying and cleaning up installed packages and the leftovers of interrupted installs."""

from __future__ import annotations

import os
import shutil
import threading
import uuid
from dataclasses import dataclass
from pathlib import Path

from inference.errors import UsageError
from inference.models.fsops import newest_mtime, remove_tree
from inference.models.hashing import sha256_file
from inference.models.marker import read_marker
from inference.models.progress import ProgressCallback, hash_reporter
from inference.models.spec import PackageSpec
from inference.models.store_context import StoreContext
from inference.models.store_layout import (
    DERIVED_DIR,
    LOCK_DIR,
    PARTIAL_DIR,
    PARTIAL_MAX_AGE_S,
    TMP_PREFIX,
    check_id,
    file_target,
    owner_id,
)


@dataclass(frozen=True)
class FileCheck:
    path: str
    ok: bool
    problem: str = ""


@dataclass(frozen=True)
class VerifyReport:
    package_id: str
    directory: Path
    files: tuple[FileCheck, ...]

    @property
    def ok(self) -> bool:
        return all(f.ok for f in self.files)

    @property
    def problems(self) -> list[str]:
        return [f"{f.path}: {f.problem}" for f in self.files if not f.ok]


class Maintenance:
    """Remove, verify and clean up (the part of the store that needs no hub)."""

    def __init__(self, context: StoreContext) -> None:
        self.context = context

    def remove(self, package_id: str) -> Path:
        """Delete an installed package (and any partial download of it); returns the removed directory."""
        check_id(package_id)
        pkg = next((p for p in self.context.catalog.packages() if p.id == package_id), None)
        if pkg is not None and pkg.format == "bundled":
            raise UsageError(f"{package_id} is bundled with Captioneer and cannot be removed")
        if not self.context.root.is_dir():
            return self._remove_locked(package_id, pkg)  # nothing to lock: reports unknown / not installed
        with self.context.package_lock(package_id, "remove"):
            return self._remove_locked(package_id, pkg)

    def _remove_locked(self, package_id: str, pkg: PackageSpec | None) -> Path:
        directory = self.context.root / package_id
        partial = self.context.root / PARTIAL_DIR / package_id
        if not (directory.exists() or directory.is_symlink()) and not partial.exists():
            if pkg is None:
                known = ", ".join(p.id for p in self.context.catalog.packages())
                raise UsageError(f"unknown model package {package_id!r}", f"known packages: {known}")
            raise UsageError(f"{package_id} is not installed")
        if directory.exists() or directory.is_symlink():
            # Rename first: the package disappears at once even if deleting gigabytes takes a while.
            doomed = self.context.root / f"{TMP_PREFIX}{package_id}-removing-{uuid.uuid4().hex[:8]}"
            os.replace(directory, doomed)
            remove_tree(doomed)
        shutil.rmtree(partial, ignore_errors=True)
        return directory

    def verify(
        self, package_id: str, progress: ProgressCallback | None = None, cancel: threading.Event | None = None
    ) -> VerifyReport:
        """Recompute sizes and sha256 of an installed package against its marker and the catalog.

        A marker that cannot be read (damaged, or from another Captioneer version) is an InvalidMarkerError that
        says so and how to repair it.
        """
        check_id(package_id)
        directory = self.context.root / package_id
        marker = read_marker(directory)
        if marker is None:
            self.context.catalog.get(package_id)  # unknown id → a usage error naming the known ones
            raise UsageError(
                f"{package_id} is not installed", f"install it with `captioneer models install {package_id}`"
            )
        pkg = next((p for p in self.context.catalog.packages() if p.id == package_id), None)
        catalog_sha = {}
        if pkg is not None:
            catalog_sha = {file_target(pkg, f): f.sha256.lower() for f in pkg.files if f.sha256}
        tracker = self.context.tracker(package_id, progress)
        total = marker.size_bytes or None
        checks: list[FileCheck] = []
        done = 0
        for entry in marker.files:
            rel = entry.path
            path = directory / rel
            if rel.startswith(DERIVED_DIR + "/"):
                # Conversion caches (e.g. the thinker GGUF) are rebuilt on demand by a newer converter,
                # so their bytes may legitimately change; they are not part of what was downloaded.
                checks.append(FileCheck(rel, True, "derived cache (rebuilt when missing or outdated)"))
                continue
            if not path.exists():
                checks.append(FileCheck(rel, False, "missing"))
                continue
            size = path.stat().st_size
            if size != entry.size:
                checks.append(FileCheck(rel, False, f"size is {size} bytes, expected {entry.size}"))
                done += size
                continue
            wanted = entry.sha256 or catalog_sha.get(rel)
            if wanted is None:
                checks.append(FileCheck(rel, True, "size only (no checksum recorded)"))
                done += size
                continue
            digest = sha256_file(path, hash_reporter(tracker, "verifying", done, total, rel), cancel)
            done += size
            if digest != wanted or (rel in catalog_sha and digest != catalog_sha[rel]):
                checks.append(FileCheck(rel, False, f"sha256 is {digest}, expected {wanted}"))
            else:
                checks.append(FileCheck(rel, True))
        if not (directory / marker.model_path).exists():
            checks.append(FileCheck(marker.model_path, False, "model path missing"))
        tracker.emit("done", done, total, force=True)
        return VerifyReport(package_id, directory, tuple(checks))

    def cleanup(
        self,
        partial_max_age_s: float = PARTIAL_MAX_AGE_S,
        everything: bool = False,
        keep: str | None = None,
    ) -> list[Path]:
        """Delete leftover ``.tmp-*`` folders, partial downloads (untouched for ``partial_max_age_s``; a paused
        multi-GB download is worth keeping) and lock files nobody holds.

        A ``.tmp-*`` folder is only ever written under its package's lock, so one whose lock is free belongs to
        a process that died (a SIGKILLed import) and goes at once, whatever its age. ``keep`` spares the partial download of the package about to be resumed (its
        caller holds that package's lock). Leftovers of packages another process is busy with are never
        touched; ``everything=True`` (on demand) removes all other partial downloads regardless of age.
        """
        removed: list[Path] = []
        if not self.context.root.is_dir():
            return removed
        now = self.context.clock()
        candidates: list[tuple[Path, float | None]] = [
            (p, None) for p in self.context.root.iterdir() if p.name.startswith(TMP_PREFIX)
        ]
        partial_root = self.context.root / PARTIAL_DIR
        if partial_root.is_dir():
            candidates += [(p, partial_max_age_s) for p in partial_root.iterdir() if p.name != keep]
        for path, age in candidates:
            if not (everything or age is None or now - newest_mtime(path) > age):
                continue
            owner = owner_id(path)
            if owner != keep and self.context.is_busy(owner):
                continue  # a running install/import/removal is using it, however old its files look
            remove_tree(path)
            removed.append(path)
        lock_dir = self.context.root / LOCK_DIR
        if lock_dir.is_dir():
            for lock_file in lock_dir.glob("*.lock"):
                if lock_file.stem != keep:
                    self.context.is_busy(lock_file.stem)  # removes the file when nobody holds it
        return removed

    def partial_bytes(self, package_id: str) -> int:
        """Bytes already downloaded towards a package (what a resumed install will not fetch again)."""
        directory = self.context.root / PARTIAL_DIR / package_id
        return sum(p.stat().st_size for p in directory.glob("*.part")) if directory.is_dir() else 0
