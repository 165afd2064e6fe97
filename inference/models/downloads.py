"""Partial downloads: planning the files of a package, resuming what an earlier run fetched (same remote file
only), free-space checks, downloading and checking every file's sha256 before anything is assembled."""

from __future__ import annotations

import contextlib
import json
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

from inference.errors import ModelError
from inference.models.errors import ChecksumMismatchError
from inference.models.hashing import sha256_file
from inference.models.hub import RemoteFile
from inference.models.progress import ProgressTracker, hash_reporter
from inference.models.spec import PackageFile, PackageSpec
from inference.models.store_context import StoreContext
from inference.models.store_layout import DISK_RESERVE_BYTES, PARTIAL_DIR, file_target


@dataclass
class PlannedFile:
    spec: PackageFile
    remote: RemoteFile
    target: str  # path inside the package directory
    partial: Path
    expected_sha256: str | None
    sha256: str | None = None

    @property
    def sidecar(self) -> Path:
        return self.partial.with_suffix(".json")


class Downloads:
    """Plan, resume, download and verify the files of a package in ``.partial/<id>/``."""

    def __init__(self, context: StoreContext) -> None:
        self.context = context

    def plan(self, pkg: PackageSpec, cancel: threading.Event | None) -> list[PlannedFile]:
        partial_dir = self.context.root / PARTIAL_DIR / pkg.id
        partial_dir.mkdir(parents=True, exist_ok=True)
        planned: list[PlannedFile] = []
        for spec in pkg.files:
            repo, revision = pkg.source_of(spec)
            if repo is None:
                raise ModelError(
                    f"catalog entry {pkg.id} does not say which repository {spec.path} comes from"
                )
            remote = self.context.hub.file_info(repo, spec.path, revision, cancel)
            expected = spec.sha256.lower() if spec.sha256 else None
            if expected and remote.etag_sha256 and remote.etag_sha256 != expected:
                # The hub tells us the content hash up front: fail before downloading gigabytes.
                raise ChecksumMismatchError(
                    f"{spec.path} in {repo}@{revision} has sha256 {remote.etag_sha256}, "
                    f"but the catalog expects {expected}",
                    "the file changed upstream; update Captioneer's catalog or pin the revision",
                )
            target = file_target(pkg, spec)
            # Files of another repository are named by their place in the package (their repository paths
            # may repeat the package's own, e.g. config.json).
            partial = partial_dir / (quote(target if pkg.is_foreign(spec) else spec.path, safe="") + ".part")
            if any(p.target == target or p.partial == partial for p in planned):
                raise ModelError(f"catalog entry {pkg.id} puts two files at {target}")
            item = PlannedFile(spec, remote, target, partial, expected or remote.etag_sha256)
            self._adopt_partial(item)
            planned.append(item)
        return planned

    def _adopt_partial(self, item: PlannedFile) -> None:
        """Keep a partial only if it belongs to the same remote file (same ETag and size)."""
        identity = {
            "repo": item.remote.repo,
            "path": item.remote.path,
            "etag": item.remote.etag,
            "size": item.remote.size,
        }
        previous: Any = {}
        with contextlib.suppress(OSError, ValueError, RecursionError):  # a damaged sidecar: start afresh
            previous = json.loads(item.sidecar.read_text(encoding="utf-8"))
        if not isinstance(previous, dict) or any(previous.get(k) != v for k, v in identity.items()):
            item.partial.unlink(missing_ok=True)
            previous = {}
        elif (
            isinstance(previous.get("sha256"), str)
            and item.partial.exists()
            and item.partial.stat().st_size == item.remote.size
        ):
            item.sha256 = previous["sha256"]  # verified on an earlier run
        item.sidecar.write_text(json.dumps({**identity, "sha256": item.sha256}), encoding="utf-8")

    def remaining(self, planned: list[PlannedFile]) -> int:
        total = 0
        for item in planned:
            have = item.partial.stat().st_size if item.partial.exists() else 0
            total += max(0, (item.remote.size or item.spec.size or 0) - have)
        return total

    def preflight(self, pkg: PackageSpec, planned: list[PlannedFile], conversion_bytes: int) -> None:
        needed = self.remaining(planned) + conversion_bytes + DISK_RESERVE_BYTES
        if any(item.remote.size is None and item.spec.size is None for item in planned):
            needed = max(needed, pkg.size_bytes)  # the hub did not say: trust the catalog's estimate
        self.context.require_space(needed, f"to download {pkg.name}")

    def download_all(
        self,
        pkg: PackageSpec,
        planned: list[PlannedFile],
        tracker: ProgressTracker,
        cancel: threading.Event | None,
    ) -> None:
        sizes = [item.remote.size or item.spec.size or 0 for item in planned]
        total = sum(sizes) or None
        before = 0
        for item, size in zip(planned, sizes, strict=True):
            name = item.spec.path.rsplit("/", 1)[-1]

            def on_bytes(file_done: int, base: int = before, name: str = name) -> None:
                tracker.emit("downloading", base + file_done, total, name, rate=True)

            on_bytes(item.partial.stat().st_size if item.partial.exists() else 0)
            self.context.hub.download(item.remote, item.partial, on_bytes, cancel, max_bytes=item.spec.size)
            before += size
        tracker.emit("downloading", before, total, force=True)

    def verify_downloads(
        self, planned: list[PlannedFile], tracker: ProgressTracker, cancel: threading.Event | None
    ) -> None:
        total = sum(item.partial.stat().st_size for item in planned)
        before = 0
        for item in planned:
            name = item.spec.path.rsplit("/", 1)[-1]
            size = item.partial.stat().st_size
            if item.sha256 is None:
                item.sha256 = sha256_file(
                    item.partial, hash_reporter(tracker, "verifying", before, total, name), cancel
                )
            before += size
            if item.expected_sha256 and item.sha256 != item.expected_sha256:
                item.partial.unlink(missing_ok=True)
                item.sidecar.unlink(missing_ok=True)
                raise ChecksumMismatchError(
                    f"{item.spec.path} is corrupt: its sha256 is {item.sha256}, expected {item.expected_sha256}",
                    "install again to download it afresh; if it fails again, the mirror or the catalog is wrong",
                )
            sidecar = json.loads(item.sidecar.read_text(encoding="utf-8"))
            item.sidecar.write_text(json.dumps({**sidecar, "sha256": item.sha256}), encoding="utf-8")
