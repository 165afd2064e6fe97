"""Importing a local model folder or file (copied while hashing, or linked), or handing a local source that a
family converts (``source_import.py``: its importers come with the context's ``conversions``) to that family, with
the same all-or-nothing assembly as an install."""

from __future__ import annotations

import threading
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

from inference.errors import UsageError
from inference.models.assembly import Assembler
from inference.models.catalog import Catalog
from inference.models.downloads import Downloads
from inference.models.fsops import copy_hashing, remove_tree, walk_files
from inference.models.hub import HubClient
from inference.models.layout import locate_model
from inference.models.maintenance import Maintenance
from inference.models.marker import INSTALL_MARKER, InstallMarker, write_marker
from inference.models.progress import ProgressCallback, ProgressTracker
from inference.models.source_import import SOURCE_OPTIONS, Planned, SourceImport, SourceImporter, claiming
from inference.models.spec import PackageSpec
from inference.models.store_context import StoreContext
from inference.models.store_layout import DISK_RESERVE_BYTES, PACKAGE_ID, SKIP_IMPORT_DIRS, slug


class Importer:
    """Add a local model (copy or link) or convert a local source a family knows into a package."""

    def __init__(
        self, context: StoreContext, downloads: Downloads, assembler: Assembler, maintenance: Maintenance
    ) -> None:
        self.context = context
        self.downloads = downloads
        self.assembler = assembler
        self.maintenance = maintenance

    def import_local(
        self,
        source: Path,
        package_id: str | None = None,
        link: bool = False,
        progress: ProgressCallback | None = None,
        cancel: threading.Event | None = None,
        sidecars: Path | None = None,
        sha256: str | None = None,
        license_text: str | None = None,
    ) -> Path:
        """Copy (or link) a model folder or file into the store under ``package_id``.

        A source that a family converts (its importer in ``context.conversions.source_importers`` claims it: a
        NeMo ``.nemo``, a Phonon-2 archive) is handed to that importer instead; ``sidecars``, ``sha256`` and
        ``license_text`` apply to such sources only, each to the importers that take it.
        """
        source = Path(source).expanduser()
        if not source.exists():
            raise UsageError(f"nothing to import at {source}", "pass an existing model folder or .gguf file")
        source = source.resolve()
        importers = self.context.conversions.source_importers
        given = {"sidecars": sidecars, "sha256": sha256, "license_text": license_text}
        importer = claiming(importers, source)
        _check_source_options(
            importer, importers, [name for name, value in given.items() if value is not None]
        )
        if importer is not None:
            if link:
                raise UsageError(
                    f"{source.name} cannot be linked: it is converted into a new model",
                    "import it without --link",
                )
            request = SourceImport(source, package_id, sidecars, sha256, license_text, progress, cancel)
            return importer.import_source(_ImportTools(self), request)
        family = self.context.conversions.detect_family(
            source
        )  # a ModelError with a fix if no family loads it
        pid = package_id or slug(source.stem if source.is_file() else source.name)
        if not PACKAGE_ID.match(pid):
            raise UsageError(
                f"{pid!r} cannot be a package id", "use letters, digits, '_', '-' or '.', e.g. --id my_model"
            )
        known = {p.id: p for p in self.context.catalog.packages()}
        if pid in known:
            if known[pid].family != family:
                raise UsageError(
                    f"{pid} is a {known[pid].family} package, but {source} is a {family} model",
                    "choose another id with --id",
                )
            if self.context.catalog.installed_path(known[pid]) is not None:
                raise UsageError(
                    f"{pid} is already installed", "remove it first or choose another id with --id"
                )
        self.context.root.mkdir(parents=True, exist_ok=True)
        with self.context.package_lock(pid, "import"):
            return self._import_locked(source, pid, family, known, link, progress, cancel)

    def _import_locked(
        self,
        source: Path,
        pid: str,
        family: str,
        known: dict[str, PackageSpec],
        link: bool,
        progress: ProgressCallback | None,
        cancel: threading.Event | None,
    ) -> Path:
        if (self.context.root / pid / INSTALL_MARKER).exists():
            raise UsageError(f"{pid} is already installed", "remove it first or choose another id with --id")
        self.maintenance.cleanup(keep=pid)  # what a killed import of this id left (we hold its lock now)
        tracker = self.context.tracker(pid, progress)
        sources = [source] if source.is_file() else list(walk_files(source, skip_dirs=SKIP_IMPORT_DIRS))
        total = sum(p.stat().st_size for p in sources)
        if not link:
            self.context.require_space(total + DISK_RESERVE_BYTES, f"to import {source.name}")
        tmp = self.context.new_tmp_dir(pid)
        try:
            known_hashes: dict[str, str | None] = {}
            if link:
                (tmp / source.name).symlink_to(source, target_is_directory=source.is_dir())
                model_path = source.name
            elif source.is_file():
                known_hashes[source.name] = copy_hashing(source, tmp / source.name, tracker, 0, total, cancel)
                model_path = source.name
            else:
                done = 0
                for path in sources:
                    rel = path.relative_to(source).as_posix()
                    known_hashes[rel] = copy_hashing(path, tmp / rel, tracker, done, total, cancel)
                    done += path.stat().st_size
                model_path = "."
            tracker.emit("finishing", message="recording sizes", force=True)
            files = self.context.describe_files(tmp, known_hashes, tracker, cancel, hash_links=False)
            fmt = locate_model(source).kind  # the file the engine will load decides the format
            catalog_pkg = known.get(pid)
            write_marker(
                tmp,
                InstallMarker(
                    id=pid,
                    family=family,
                    format=catalog_pkg.format if catalog_pkg else fmt,
                    name=catalog_pkg.name if catalog_pkg else f"{source.name} (imported)",
                    quantization=catalog_pkg.quantization if catalog_pkg else None,
                    model_path=model_path,
                    source="import",
                    origin=str(source),
                    linked=link,
                    installed_at=self.context.clock(),
                    files=files,
                ),
            )
            final = self.context.swap_into_place(tmp, pid)
        except BaseException:
            remove_tree(tmp)
            raise
        tracker.emit("done", message=str(final / model_path), force=True)
        return final / model_path


def _check_source_options(
    importer: SourceImporter | None, importers: list[SourceImporter], given: list[str]
) -> None:
    """Refuse the source-only options that ``importer`` (None: a plain model) does not take, naming the sources
    that do."""
    refused = [name for name in given if importer is None or name not in importer.options]
    if not refused:
        return
    takers = [i for i in importers if set(refused) <= i.options]
    flags = " and ".join(SOURCE_OPTIONS[name] for name in refused)
    verb = "applies" if len(refused) == 1 else "apply"
    leave = f"leave {'it' if len(refused) == 1 else 'them'} out"
    if not takers:
        raise UsageError(f"{flags} {verb} to no source this build converts", leave)
    raise UsageError(
        f"{flags} {verb} to {' and '.join(i.label for i in takers)} only",
        f"{leave} for this model, or pass " + " or ".join(i.example for i in takers),
    )


class _ImportTools:
    """The store as a source importer sees it (``source_import.ConvertingStore``): the importer's parts."""

    def __init__(self, importer: Importer) -> None:
        self._context = importer.context
        self._downloads = importer.downloads
        self._assembler = importer.assembler
        self._maintenance = importer.maintenance

    @property
    def catalog(self) -> Catalog:
        return self._context.catalog

    @property
    def root(self) -> Path:
        return self._context.root

    @property
    def hub(self) -> HubClient:
        return self._context.hub

    def package_lock(self, package_id: str, action: str) -> AbstractContextManager[None]:
        return self._context.package_lock(package_id, action)

    def cleanup(self, keep: str) -> None:
        self._maintenance.cleanup(keep=keep)

    def require_space(self, needed: int, purpose: str) -> None:
        self._context.require_space(needed, purpose)

    def plan(self, pkg: PackageSpec, cancel: threading.Event | None) -> list[Planned]:
        return self._downloads.plan(pkg, cancel)

    def remaining(self, planned: list[Planned]) -> int:
        return self._downloads.remaining(planned)

    def download_all(
        self,
        pkg: PackageSpec,
        planned: list[Planned],
        tracker: ProgressTracker,
        cancel: threading.Event | None,
    ) -> None:
        self._downloads.download_all(pkg, planned, tracker, cancel)

    def verify_downloads(
        self, planned: list[Planned], tracker: ProgressTracker, cancel: threading.Event | None
    ) -> None:
        self._downloads.verify_downloads(planned, tracker, cancel)

    def assemble_converted(
        self,
        pkg: PackageSpec,
        planned: list[Planned],
        tracker: ProgressTracker,
        cancel: threading.Event | None,
        converter: Any,
        source: Path,
        sidecars: Path | None,
    ) -> Path:
        return self._assembler.assemble_converted(pkg, planned, tracker, cancel, converter, source, sidecars)
