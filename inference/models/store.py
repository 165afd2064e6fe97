"""The model store on disk: install from the hub, import, remove, verify, clean up.

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
(``phonon.py``), downloading the sidecars unless a local folder of them is given.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import logging
import os
import re
import shutil
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

from filelock import FileLock, Timeout

from inference.errors import ModelError, NotImplementedFamilyError, UsageError
from inference.models import phonon
from inference.models.catalog import INSTALL_MARKER, Catalog
from inference.models.conversion import (
    FORMATS_NEEDING_CONVERSION,
    ConversionContext,
    ConversionRegistry,
    default_conversions,
)
from inference.models.errors import ChecksumMismatchError, DiskSpaceError
from inference.models.hashing import sha256_file
from inference.models.hub import HubClient, RemoteFile
from inference.models.layout import locate_model
from inference.models.marker import read_marker, write_marker
from inference.models.progress import (
    InstallProgress,
    ProgressCallback,
    RateMeter,
    ThrottledReporter,
    check_cancel,
    human_bytes,
)
from inference.models.spec import PackageFile, PackageSpec
from inference.paths import AppPaths

log = logging.getLogger("captioneer.models")
DERIVED_DIR = ".captioneer"  # per-package caches written by conversions, not downloads

PARTIAL_DIR = ".partial"
TMP_PREFIX = ".tmp-"
LOCK_DIR = ".locks"
_TMP_NAME = re.compile(r"^\.tmp-(?P<id>.+?)(?:-old|-removing)?-[0-9a-f]{8}$")
DAY_S = 24 * 3600
PARTIAL_MAX_AGE_S = 7 * DAY_S
DISK_RESERVE_BYTES = 32 * 1024 * 1024  # never fill the disk to the last byte
_COPY_BLOCK = 4 * 1024 * 1024
_PACKAGE_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,79}$")
_SKIP_IMPORT_DIRS = {".git", ".cache", "__pycache__"}

DiskUsage = Callable[[Path], Any]  # shutil.disk_usage-like: returns an object with .free


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


@dataclass
class _Planned:
    spec: PackageFile
    remote: RemoteFile
    target: str  # path inside the package directory
    partial: Path
    expected_sha256: str | None
    sha256: str | None = None

    @property
    def sidecar(self) -> Path:
        return self.partial.with_suffix(".json")


@dataclass
class _Progress:
    """Turns per-file byte counts into package-wide reports with speed and ETA."""

    package_id: str
    report: ThrottledReporter
    meter: RateMeter = field(default_factory=RateMeter)

    def emit(self, phase: str, done: int = 0, total: int | None = None, file: str = "", message: str = "",
             rate: bool = False, force: bool = False) -> None:
        speed = eta = None
        if rate:
            self.meter.add(done)
            speed, eta = self.meter.speed(), self.meter.eta(done, total)
        self.report(InstallProgress(self.package_id, phase, done, total, file, speed, eta, message), force=force)


class ModelStore:
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
        self.conversions = conversions or default_conversions()
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

    # ----------------------------------------------------------------- install from the hub

    def install(
        self,
        package_id: str,
        progress: ProgressCallback | None = None,
        cancel: threading.Event | None = None,
        force: bool = False,
    ) -> Path:
        """Download, verify, convert and install a catalog package; returns its model path."""
        pkg = self.catalog.get(package_id)
        if pkg.format == "bundled":
            raise UsageError(f"{pkg.id} is bundled with Captioneer; there is nothing to download")
        if not pkg.hf_repo or not pkg.files:
            raise UsageError(f"{pkg.id} has no download source in the catalog", "import it from a local copy instead")
        existing = self.catalog.installed_path(pkg)
        if existing is not None and not force:
            return existing
        converter = self.conversions.for_package(pkg)
        if pkg.format in FORMATS_NEEDING_CONVERSION and converter is None:
            raise NotImplementedFamilyError(
                f"{pkg.name} needs an install-time conversion that this build of Captioneer does not have yet",
                "install another package of the same family, or update Captioneer",
            )
        self.conversions.preflight(pkg)  # e.g. an optional dependency the conversion needs: before any download
        self.root.mkdir(parents=True, exist_ok=True)
        with self._package_lock(pkg.id, "install"):
            existing = self.catalog.installed_path(pkg)  # again: another process may have just finished it
            if existing is not None and not force:
                return existing
            self.cleanup(keep=pkg.id)
            tracker = _Progress(pkg.id, ThrottledReporter(progress))
            tracker.emit("checking", message=f"asking {self.hub.endpoint} about {pkg.hf_repo}", force=True)
            planned = self._plan(pkg, cancel)
            self._preflight(pkg, planned, self.conversions.extra_space(pkg))
            self._download_all(pkg, planned, tracker, cancel)
            self._verify_downloads(planned, tracker, cancel)
            path = self._assemble(pkg, planned, tracker, cancel, converter)
            tracker.emit("done", message=str(path), force=True)
            return path

    # ----------------------------------------------------------------- one process per package at a time

    def _lock_for(self, package_id: str) -> FileLock:
        lock_dir = self.root / LOCK_DIR
        lock_dir.mkdir(parents=True, exist_ok=True)
        return FileLock(lock_dir / f"{package_id}.lock", timeout=0)

    @contextlib.contextmanager
    def _package_lock(self, package_id: str, action: str) -> Iterator[None]:
        lock = self._lock_for(package_id)
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
            lock.release()

    def is_busy(self, package_id: str) -> bool:
        """Whether some process holds ``package_id``'s lock (an install, import or removal is running)."""
        if not (self.root / LOCK_DIR / f"{package_id}.lock").exists():
            return False
        lock = self._lock_for(package_id)
        try:
            lock.acquire()
        except Timeout:
            return True
        lock.release()
        return False

    def _plan(self, pkg: PackageSpec, cancel: threading.Event | None) -> list[_Planned]:
        partial_dir = self.root / PARTIAL_DIR / pkg.id
        partial_dir.mkdir(parents=True, exist_ok=True)
        planned: list[_Planned] = []
        for spec in pkg.files:
            repo, revision = pkg.source_of(spec)
            if repo is None:
                raise ModelError(f"catalog entry {pkg.id} does not say which repository {spec.path} comes from")
            remote = self.hub.file_info(repo, spec.path, revision, cancel)
            expected = spec.sha256.lower() if spec.sha256 else None
            if expected and remote.etag_sha256 and remote.etag_sha256 != expected:
                # The hub tells us the content hash up front: fail before downloading gigabytes.
                raise ChecksumMismatchError(
                    f"{spec.path} in {repo}@{revision} has sha256 {remote.etag_sha256}, "
                    f"but the catalog expects {expected}",
                    "the file changed upstream; update Captioneer's catalog or pin the revision",
                )
            target = _file_target(pkg, spec)
            # Files of another repository are named by their place in the package (their repository paths
            # may repeat the package's own, e.g. config.json).
            partial = partial_dir / (quote(target if pkg.is_foreign(spec) else spec.path, safe="") + ".part")
            if any(p.target == target or p.partial == partial for p in planned):
                raise ModelError(f"catalog entry {pkg.id} puts two files at {target}")
            item = _Planned(spec, remote, target, partial, expected or remote.etag_sha256)
            self._adopt_partial(item)
            planned.append(item)
        return planned

    def _adopt_partial(self, item: _Planned) -> None:
        """Keep a partial only if it belongs to the same remote file (same ETag and size)."""
        identity = {"repo": item.remote.repo, "path": item.remote.path, "etag": item.remote.etag,
                    "size": item.remote.size}
        previous: dict[str, Any] = {}
        with contextlib.suppress(OSError, json.JSONDecodeError):
            previous = json.loads(item.sidecar.read_text(encoding="utf-8"))
        if any(previous.get(k) != v for k, v in identity.items()):
            item.partial.unlink(missing_ok=True)
            previous = {}
        elif previous.get("sha256") and item.partial.exists() and item.partial.stat().st_size == item.remote.size:
            item.sha256 = previous["sha256"]  # verified on an earlier run
        item.sidecar.write_text(json.dumps({**identity, "sha256": item.sha256}), encoding="utf-8")

    def _remaining(self, planned: list[_Planned]) -> int:
        total = 0
        for item in planned:
            have = item.partial.stat().st_size if item.partial.exists() else 0
            total += max(0, (item.remote.size or item.spec.size or 0) - have)
        return total

    def _preflight(self, pkg: PackageSpec, planned: list[_Planned], conversion_bytes: int) -> None:
        needed = self._remaining(planned) + conversion_bytes + DISK_RESERVE_BYTES
        if any(item.remote.size is None and item.spec.size is None for item in planned):
            needed = max(needed, pkg.size_bytes)  # the hub did not say: trust the catalog's estimate
        self._require_space(needed, f"to download {pkg.name}")

    def _require_space(self, needed: int, purpose: str) -> None:
        free = int(self.disk_usage(self.root).free)
        if free < needed:
            raise DiskSpaceError(
                f"not enough free disk space {purpose}: needs {human_bytes(needed)} ({needed} bytes), "
                f"only {human_bytes(free)} ({free} bytes) free in {self.root}",
                "free some space, or move the model folder to a larger disk with CAPTIONEER_MODELS_DIR",
            )

    def _download_all(
        self, pkg: PackageSpec, planned: list[_Planned], tracker: _Progress, cancel: threading.Event | None
    ) -> None:
        sizes = [item.remote.size or item.spec.size or 0 for item in planned]
        total = sum(sizes) or None
        before = 0
        for item, size in zip(planned, sizes, strict=True):
            name = item.spec.path.rsplit("/", 1)[-1]

            def on_bytes(file_done: int, base: int = before, name: str = name) -> None:
                tracker.emit("downloading", base + file_done, total, name, rate=True)

            on_bytes(item.partial.stat().st_size if item.partial.exists() else 0)
            self.hub.download(item.remote, item.partial, on_bytes, cancel)
            before += size
        tracker.emit("downloading", before, total, force=True)

    def _verify_downloads(self, planned: list[_Planned], tracker: _Progress, cancel: threading.Event | None) -> None:
        total = sum(item.partial.stat().st_size for item in planned)
        before = 0
        for item in planned:
            name = item.spec.path.rsplit("/", 1)[-1]
            size = item.partial.stat().st_size
            if item.sha256 is None:
                item.sha256 = sha256_file(item.partial, _reporter(tracker, "verifying", before, total, name), cancel)
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

    def _assemble(
        self,
        pkg: PackageSpec,
        planned: list[_Planned],
        tracker: _Progress,
        cancel: threading.Event | None,
        converter: Any,
        marker_fields: dict[str, Any] | None = None,
    ) -> Path:
        tmp = self._new_tmp_dir(pkg.id)
        moved: list[_Planned] = []
        try:
            for item in planned:
                destination = tmp / item.target
                destination.parent.mkdir(parents=True, exist_ok=True)
                os.replace(item.partial, destination)
                moved.append(item)
            model_path = _default_model_path(pkg, [item.target for item in planned])
            if converter is not None:
                tracker.emit("converting", message=pkg.name, force=True)
                context = ConversionContext(
                    pkg, tmp, lambda done, total, msg: tracker.emit("converting", done, total, message=msg), cancel
                )
                result = converter(context)
                if result is not None and result.model_path:
                    model_path = result.model_path
                check_cancel(cancel)
            if not (tmp / model_path).exists():
                raise ModelError(f"the installed {pkg.name} lacks its model at {model_path}")
            tracker.emit("finishing", message="recording checksums", force=True)
            known = {item.target: item.sha256 for item in planned}
            files = self._describe_files(tmp, known, tracker, cancel)
            own = [item for item in planned if not pkg.is_foreign(item.spec)]
            commit = next((item.remote.commit for item in own if item.remote.commit), None)
            marker = {
                "id": pkg.id, "family": pkg.family, "format": pkg.format, "name": pkg.name,
                "quantization": pkg.quantization, "model_path": model_path, "source": "hub",
                "hf_repo": pkg.hf_repo, "revision": pkg.revision, "commit": commit,
                "installed_at": self.clock(), "size_bytes": sum(f["size"] for f in files), "files": files,
            }
            foreign = [item for item in planned if pkg.is_foreign(item.spec)]
            if foreign:
                marker["other_sources"] = [
                    {"path": item.target, "hf_repo": item.remote.repo, "revision": item.remote.revision,
                     "commit": item.remote.commit}
                    for item in foreign
                ]
            write_marker(tmp, {**marker, **(marker_fields or {})})
            final = self._swap_into_place(tmp, pkg.id)
        except BaseException:
            # Give the downloads back to the partial area so a retry does not fetch them again; they
            # are hashed again next time in case a converter changed them before failing.
            for item in moved:
                with contextlib.suppress(OSError):
                    os.replace(tmp / item.target, item.partial)
                    sidecar = json.loads(item.sidecar.read_text(encoding="utf-8"))
                    item.sidecar.write_text(json.dumps({**sidecar, "sha256": None}), encoding="utf-8")
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        for item in planned:
            item.sidecar.unlink(missing_ok=True)
        with contextlib.suppress(OSError):
            (self.root / PARTIAL_DIR / pkg.id).rmdir()
        return final / model_path

    def _new_tmp_dir(self, package_id: str) -> Path:
        tmp = self.root / f"{TMP_PREFIX}{package_id}-{uuid.uuid4().hex[:8]}"
        tmp.mkdir(parents=True)
        return tmp

    def _swap_into_place(self, tmp: Path, package_id: str) -> Path:
        final = self.root / package_id
        if final.exists() or final.is_symlink():
            old = self.root / f"{TMP_PREFIX}{package_id}-old-{uuid.uuid4().hex[:8]}"
            os.replace(final, old)
            os.replace(tmp, final)
            _remove_tree(old)
        else:
            os.replace(tmp, final)
        return final

    def _describe_files(
        self, directory: Path, known: dict[str, str | None], tracker: _Progress, cancel: threading.Event | None,
        hash_links: bool = True,
    ) -> list[dict[str, Any]]:
        files = []
        for path in _walk_files(directory):
            rel = path.relative_to(directory).as_posix()
            if rel in (INSTALL_MARKER, INSTALL_MARKER + ".tmp"):
                continue
            digest = known.get(rel)
            if digest is None and (hash_links or not _is_linked(path, directory)):
                digest = sha256_file(path, _reporter(tracker, "finishing", 0, None, rel), cancel)
            files.append({"path": rel, "size": path.stat().st_size, "sha256": digest})
        return files

    # ----------------------------------------------------------------- import, remove, verify, cleanup

    def import_local(
        self,
        source: Path,
        package_id: str | None = None,
        link: bool = False,
        progress: ProgressCallback | None = None,
        cancel: threading.Event | None = None,
        sidecars: Path | None = None,
        sha256: str | None = None,
    ) -> Path:
        """Copy (or link) a model folder or file into the store under ``package_id``.

        A Phonon-2 source (a ``.tar.zst`` archive, or a folder holding ``model.fermion`` and ``config.json``)
        is converted instead, see :meth:`_import_phonon2`; ``sidecars`` and ``sha256`` apply to it only.
        """
        from inference.engine import detect_family

        source = Path(source).expanduser()
        if not source.exists():
            raise UsageError(f"nothing to import at {source}", "pass an existing model folder or .gguf file")
        source = source.resolve()
        if phonon.is_phonon2_source(source):
            if link:
                raise UsageError(f"{source.name} cannot be linked: it is converted into a new model",
                                 "import it without --link")  # fmt: skip
            return self._import_phonon2(source, package_id, sidecars, sha256, progress, cancel)
        if sidecars is not None or sha256 is not None:
            raise UsageError("--sidecars and --sha256 apply to Phonon-2 sources only",
                             "pass a .tar.zst archive or a folder holding model.fermion")  # fmt: skip
        family = detect_family(source)  # raises ModelError with a fix if it is no model we can load
        pid = package_id or _slug(source.stem if source.is_file() else source.name)
        if not _PACKAGE_ID.match(pid):
            raise UsageError(
                f"{pid!r} cannot be a package id", "use letters, digits, '_', '-' or '.', e.g. --id my_model"
            )
        known = {p.id: p for p in self.catalog.packages()}
        if pid in known:
            if known[pid].family != family:
                raise UsageError(
                    f"{pid} is a {known[pid].family} package, but {source} is a {family} model",
                    "choose another id with --id",
                )
            if self.catalog.installed_path(known[pid]) is not None:
                raise UsageError(f"{pid} is already installed", "remove it first or choose another id with --id")
        self.root.mkdir(parents=True, exist_ok=True)
        with self._package_lock(pid, "import"):
            return self._import_locked(source, pid, family, known, link, progress, cancel)

    def _import_phonon2(
        self, source: Path, package_id: str | None, sidecars: Path | None, sha256: str | None,
        progress: ProgressCallback | None, cancel: threading.Event | None,
    ) -> Path:  # fmt: skip
        """Convert a local Phonon-2 source into a package (default id: the catalog's Phonon-2 package).

        The sidecars (nvidia v3 ``config.json``, ``tokenizer.json``, ``processor_config.json``) come from the
        folder ``sidecars`` or, without it, from the hub as the catalog's Phonon-2 package lists them. The
        source must hash to ``sha256``, else to the digest the catalog pins or the published one. Everything
        is assembled in a temporary directory, so a refused or failed import leaves nothing installed.
        """
        known = {p.id: p for p in self.catalog.packages()}
        catalog_pkg = next((p for p in known.values() if p.format == phonon.FORMAT and p.family == phonon.FAMILY
                            and p.files), None)  # fmt: skip
        pid = package_id or (catalog_pkg.id if catalog_pkg is not None else "phonon2")
        if not _PACKAGE_ID.match(pid):
            raise UsageError(f"{pid!r} cannot be a package id", "use letters, digits, '_', '-' or '.', e.g. --id my_model")
        if pid in known and known[pid].family != phonon.FAMILY:
            raise UsageError(f"{pid} is a {known[pid].family} package, but {source} is a Phonon-2 ({phonon.FAMILY}) model",
                             "choose another id with --id")  # fmt: skip
        if pid in known and self.catalog.installed_path(known[pid]) is not None:
            raise UsageError(f"{pid} is already installed", "remove it first or choose another id with --id")
        expected = phonon.expected_digest(source, catalog_pkg, sha256)
        if source.is_file():
            phonon.require_zstandard(f"reading {source.name}")
        side_files: tuple[PackageFile, ...] = ()
        if sidecars is not None:
            sidecars = Path(sidecars).expanduser().resolve()
            if not sidecars.is_dir():
                raise UsageError(f"--sidecars {sidecars} is not a folder",
                                 "pass the folder holding config.json, tokenizer.json and processor_config.json")  # fmt: skip
        elif catalog_pkg is not None:
            side_files = phonon.sidecar_files(catalog_pkg, lambda f: _file_target(catalog_pkg, f))
        if sidecars is None and not side_files:
            raise UsageError("the catalog does not say where the Phonon-2 sidecars come from",
                             "pass --sidecars DIR holding config.json, tokenizer.json and processor_config.json of "
                             "nvidia/parakeet-tdt-0.6b-v3")  # fmt: skip
        size = source.stat().st_size if source.is_file() else sum(p.stat().st_size for p in _walk_files(source))
        named = known.get(pid)
        pkg = PackageSpec(
            id=pid, family=phonon.FAMILY, name=named.name if named else f"{source.name} (imported Phonon-2)",
            format=phonon.FORMAT, files=side_files, size_bytes=size,
            hf_repo=catalog_pkg.hf_repo if catalog_pkg else None, revision=catalog_pkg.revision if catalog_pkg else None,
            quantization="f32", languages=("en",),
        )  # fmt: skip
        self.root.mkdir(parents=True, exist_ok=True)
        with self._package_lock(pid, "import"):
            if (self.root / pid / INSTALL_MARKER).exists():
                raise UsageError(f"{pid} is already installed", "remove it first or choose another id with --id")
            tracker = _Progress(pid, ThrottledReporter(progress))
            checked = source if source.is_file() else source / phonon.CONTAINER
            total = checked.stat().st_size
            phonon.check_digest(checked, expected, lambda done: tracker.emit("verifying", done, total, checked.name),
                                cancel)  # fmt: skip
            planned: list[_Planned] = []
            if side_files:
                tracker.emit("checking", message=f"asking {self.hub.endpoint} for the sidecars", force=True)
                planned = self._plan(pkg, cancel)
            needed = self._remaining(planned) + phonon.extra_space(pkg) + DISK_RESERVE_BYTES
            self._require_space(needed, f"to import {source.name}")
            if planned:
                self._download_all(pkg, planned, tracker, cancel)
                self._verify_downloads(planned, tracker, cancel)
            converter = phonon.import_converter(source, sidecars)
            path = self._assemble(pkg, planned, tracker, cancel, converter, marker_fields={
                "source": "import", "origin": str(source), "linked": False, "hf_repo": None, "revision": None,
                "commit": None, "sidecars_origin": str(sidecars) if sidecars is not None else None,
            })  # fmt: skip
            tracker.emit("done", message=str(path), force=True)
            return path

    def _import_locked(
        self, source: Path, pid: str, family: str, known: dict[str, PackageSpec], link: bool,
        progress: ProgressCallback | None, cancel: threading.Event | None,
    ) -> Path:  # fmt: skip
        if (self.root / pid / INSTALL_MARKER).exists():
            raise UsageError(f"{pid} is already installed", "remove it first or choose another id with --id")
        tracker = _Progress(pid, ThrottledReporter(progress))
        sources = [source] if source.is_file() else list(_walk_files(source, skip_dirs=_SKIP_IMPORT_DIRS))
        total = sum(p.stat().st_size for p in sources)
        if not link:
            self._require_space(total + DISK_RESERVE_BYTES, f"to import {source.name}")
        tmp = self._new_tmp_dir(pid)
        try:
            known_hashes: dict[str, str | None] = {}
            if link:
                (tmp / source.name).symlink_to(source, target_is_directory=source.is_dir())
                model_path = source.name
            elif source.is_file():
                known_hashes[source.name] = _copy_hashing(source, tmp / source.name, tracker, 0, total, cancel)
                model_path = source.name
            else:
                done = 0
                for path in sources:
                    rel = path.relative_to(source).as_posix()
                    known_hashes[rel] = _copy_hashing(path, tmp / rel, tracker, done, total, cancel)
                    done += path.stat().st_size
                model_path = "."
            tracker.emit("finishing", message="recording sizes", force=True)
            files = self._describe_files(tmp, known_hashes, tracker, cancel, hash_links=False)
            fmt = locate_model(source).kind  # the file the engine will load decides the format
            catalog_pkg = known.get(pid)
            write_marker(tmp, {
                "id": pid, "family": family, "format": catalog_pkg.format if catalog_pkg else fmt,
                "name": catalog_pkg.name if catalog_pkg else f"{source.name} (imported)",
                "quantization": catalog_pkg.quantization if catalog_pkg else None, "model_path": model_path,
                "source": "import", "origin": str(source), "linked": link, "installed_at": self.clock(),
                "size_bytes": sum(f["size"] for f in files), "files": files,
            })
            final = self._swap_into_place(tmp, pid)
        except BaseException:
            _remove_tree(tmp)
            raise
        tracker.emit("done", message=str(final / model_path), force=True)
        return final / model_path

    def remove(self, package_id: str) -> Path:
        """Delete an installed package (and any partial download of it); returns the removed directory."""
        _check_id(package_id)
        pkg = next((p for p in self.catalog.packages() if p.id == package_id), None)
        if pkg is not None and pkg.format == "bundled":
            raise UsageError(f"{package_id} is bundled with Captioneer and cannot be removed")
        if not self.root.is_dir():
            return self._remove_locked(package_id, pkg)  # nothing to lock: reports unknown / not installed
        with self._package_lock(package_id, "remove"):
            return self._remove_locked(package_id, pkg)

    def _remove_locked(self, package_id: str, pkg: PackageSpec | None) -> Path:
        directory = self.root / package_id
        partial = self.root / PARTIAL_DIR / package_id
        if not (directory.exists() or directory.is_symlink()) and not partial.exists():
            if pkg is None:
                known = ", ".join(p.id for p in self.catalog.packages())
                raise UsageError(f"unknown model package {package_id!r}", f"known packages: {known}")
            raise UsageError(f"{package_id} is not installed")
        if directory.exists() or directory.is_symlink():
            # Rename first: the package disappears at once even if deleting gigabytes takes a while.
            doomed = self.root / f"{TMP_PREFIX}{package_id}-removing-{uuid.uuid4().hex[:8]}"
            os.replace(directory, doomed)
            _remove_tree(doomed)
        shutil.rmtree(partial, ignore_errors=True)
        return directory

    def verify(
        self, package_id: str, progress: ProgressCallback | None = None, cancel: threading.Event | None = None
    ) -> VerifyReport:
        """Recompute sizes and sha256 of an installed package against its marker and the catalog."""
        _check_id(package_id)
        directory = self.root / package_id
        marker = read_marker(directory)
        if marker is None:
            self.catalog.get(package_id)  # unknown id → a usage error naming the known ones
            raise UsageError(f"{package_id} is not installed", f"install it with `captioneer models install {package_id}`")
        pkg = next((p for p in self.catalog.packages() if p.id == package_id), None)
        catalog_sha = {}
        if pkg is not None:
            catalog_sha = {_file_target(pkg, f): f.sha256.lower() for f in pkg.files if f.sha256}
        tracker = _Progress(package_id, ThrottledReporter(progress))
        recorded = marker.get("files") or []
        total = sum(int(f.get("size") or 0) for f in recorded) or None
        checks: list[FileCheck] = []
        done = 0
        for entry in recorded:
            rel = str(entry.get("path"))
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
            if entry.get("size") is not None and size != int(entry["size"]):
                checks.append(FileCheck(rel, False, f"size is {size} bytes, expected {entry['size']}"))
                done += size
                continue
            wanted = entry.get("sha256") or catalog_sha.get(rel)
            if wanted is None:
                checks.append(FileCheck(rel, True, "size only (no checksum recorded)"))
                done += size
                continue
            digest = sha256_file(path, _reporter(tracker, "verifying", done, total, rel), cancel)
            done += size
            if digest != wanted or (rel in catalog_sha and digest != catalog_sha[rel]):
                checks.append(FileCheck(rel, False, f"sha256 is {digest}, expected {wanted}"))
            else:
                checks.append(FileCheck(rel, True))
        model_path = directory / str(marker.get("model_path", "."))
        if not model_path.exists():
            checks.append(FileCheck(str(marker.get("model_path")), False, "model path missing"))
        tracker.emit("done", done, total, force=True)
        return VerifyReport(package_id, directory, tuple(checks))

    def cleanup(
        self,
        max_age_s: float = DAY_S,
        partial_max_age_s: float = PARTIAL_MAX_AGE_S,
        everything: bool = False,
        keep: str | None = None,
    ) -> list[Path]:
        """Delete leftover ``.tmp-*`` directories (untouched for ``max_age_s``) and partial downloads
        (untouched for ``partial_max_age_s``; longer, since a paused multi-GB download is worth keeping).

        ``keep`` spares the partial download of the package about to be resumed (its caller holds that
        package's lock). Leftovers of packages another process is busy with are never touched;
        ``everything=True`` (on demand) removes all other leftovers regardless of age.
        """
        removed: list[Path] = []
        if not self.root.is_dir():
            return removed
        now = self.clock()
        candidates = [(p, max_age_s) for p in self.root.iterdir() if p.name.startswith(TMP_PREFIX)]
        partial_root = self.root / PARTIAL_DIR
        if partial_root.is_dir():
            candidates += [(p, partial_max_age_s) for p in partial_root.iterdir() if p.name != keep]
        for path, age in candidates:
            if not (everything or now - _newest_mtime(path) > age):
                continue
            owner = _owner_id(path)
            if owner != keep and self.is_busy(owner):
                continue  # a running install/import/removal is using it, however old its files look
            _remove_tree(path)
            removed.append(path)
        return removed

    def partial_bytes(self, package_id: str) -> int:
        """Bytes already downloaded towards a package (what a resumed install will not fetch again)."""
        directory = self.root / PARTIAL_DIR / package_id
        return sum(p.stat().st_size for p in directory.glob("*.part")) if directory.is_dir() else 0


# --------------------------------------------------------------------- helpers


def _owner_id(path: Path) -> str:
    """The package a leftover belongs to: ``.partial/<id>`` or ``.tmp-<id>[-old|-removing]-<hex>``."""
    match = _TMP_NAME.match(path.name)
    return match.group("id") if match else path.name


def _check_id(package_id: str) -> None:
    if not _PACKAGE_ID.match(package_id):
        raise UsageError(f"{package_id!r} is not a package id", "see `captioneer models list`")


def _target_path(pkg: PackageSpec, repo_path: str) -> str:
    """Where a repository file goes inside the package directory (``strip_prefix``, ``target_dir``)."""
    rel = repo_path.removeprefix(pkg.strip_prefix) if pkg.strip_prefix else repo_path
    if pkg.target_dir:
        rel = f"{pkg.target_dir.strip('/')}/{rel}"
    return _safe_relative(pkg, rel, repo_path)


def _safe_relative(pkg: PackageSpec, rel: str, repo_path: str) -> str:
    parts = Path(rel).parts
    if not parts or Path(rel).is_absolute() or ".." in parts or rel == INSTALL_MARKER:
        raise ModelError(f"catalog entry {pkg.id} has an unsafe file path {repo_path!r}")
    return Path(rel).as_posix()


def _file_target(pkg: PackageSpec, file: PackageFile) -> str:
    """Where a catalog file goes inside the package directory: its own ``target_dir`` when it names one."""
    if file.target_dir is None:
        return _target_path(pkg, file.path)
    rel = f"{file.target_dir.strip('/')}/{file.path}" if file.target_dir.strip("/") else file.path
    return _safe_relative(pkg, rel, file.path)


def _default_model_path(pkg: PackageSpec, targets: list[str]) -> str:
    if pkg.format == "gguf":
        ggufs = [t for t in targets if t.endswith(".gguf")]
        if len(ggufs) == 1:
            return ggufs[0]
    return pkg.target_dir.strip("/") if pkg.target_dir else "."


def _walk_files(root: Path, skip_dirs: set[str] | frozenset[str] = frozenset()) -> Iterator[Path]:
    for dirpath, dirnames, filenames in os.walk(root, followlinks=True):
        dirnames[:] = sorted(d for d in dirnames if d not in skip_dirs)
        for name in sorted(filenames):
            yield Path(dirpath) / name


def _is_linked(path: Path, root: Path) -> bool:
    return any(parent.is_symlink() for parent in [path, *path.parents] if parent != root and root in parent.parents)


def _newest_mtime(path: Path) -> float:
    try:
        newest = path.lstat().st_mtime
    except OSError:
        return 0.0
    if path.is_dir() and not path.is_symlink():
        for dirpath, _dirs, files in os.walk(path):
            for name in files:
                with contextlib.suppress(OSError):
                    newest = max(newest, (Path(dirpath) / name).lstat().st_mtime)
    return newest


def _remove_tree(path: Path) -> None:
    """Delete a directory without following symlinks (a linked import's source must survive)."""
    if path.is_symlink() or path.is_file():
        path.unlink(missing_ok=True)
    elif path.exists():
        shutil.rmtree(path, ignore_errors=True)


def _slug(name: str) -> str:
    slug = re.sub(r"[^A-Za-z0-9_.-]+", "_", name).strip("._-")
    return slug[:80] or "imported_model"


def _copy_hashing(
    source: Path, destination: Path, tracker: _Progress, base: int, total: int, cancel: threading.Event | None
) -> str:
    """Copy and hash in one pass, so an import reads each byte once."""
    destination.parent.mkdir(parents=True, exist_ok=True)
    digest = hashlib.sha256()
    done = 0
    try:
        with source.open("rb") as src, destination.open("wb") as dst:
            while block := src.read(_COPY_BLOCK):
                check_cancel(cancel)
                dst.write(block)
                digest.update(block)
                done += len(block)
                tracker.emit("copying", base + done, total, source.name, rate=True)
    except OSError as exc:
        if exc.errno in (errno.ENOSPC, errno.EDQUOT):
            raise DiskSpaceError(f"the disk filled up while copying {source.name}", "free some space") from exc
        raise
    shutil.copystat(source, destination)
    return digest.hexdigest()


def _reporter(tracker: Any, stage: str, offset: int, total: int | None, name: str) -> Callable[[int], None]:
    """Progress of hashing one file, counted from ``offset`` bytes into a larger job."""

    def report(done: int) -> None:
        tracker.emit(stage, offset + done, total, name)

    return report
