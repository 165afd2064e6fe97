"""Importing a local model folder or file (copied while hashing, or linked), and converting a local Phonon-2
source (``families/parakeet_tdt/phonon_source.py``) or a NeMo ``.nemo`` (``nemo_importing.py``), with the same
all-or-nothing assembly as an install."""

from __future__ import annotations

import threading
from pathlib import Path

from inference.errors import UsageError
from inference.families.parakeet_tdt import phonon_source as phonon
from inference.families.parakeet_tdt.install import extra_space as phonon_extra_space
from inference.models import nemo
from inference.models.assembly import Assembler
from inference.models.downloads import Downloads, PlannedFile
from inference.models.fsops import copy_hashing, remove_tree, walk_files
from inference.models.identify import detect_family
from inference.models.layout import locate_model
from inference.models.maintenance import Maintenance
from inference.models.marker import INSTALL_MARKER, InstallMarker, write_marker
from inference.models.nemo_importing import NemoImporter
from inference.models.progress import ProgressCallback
from inference.models.spec import PackageFile, PackageSpec
from inference.models.store_context import StoreContext
from inference.models.store_layout import DISK_RESERVE_BYTES, PACKAGE_ID, SKIP_IMPORT_DIRS, file_target, slug


class Importer:
    """Add a local model (copy or link) or convert a local Phonon-2 or NeMo source into a package."""

    def __init__(
        self,
        context: StoreContext,
        downloads: Downloads,
        assembler: Assembler,
        maintenance: Maintenance,
        nemo_importer: NemoImporter,
    ) -> None:
        self.context = context
        self.downloads = downloads
        self.assembler = assembler
        self.maintenance = maintenance
        self.nemo_importer = nemo_importer

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

        A Phonon-2 source (a ``.tar.zst`` archive, or a folder holding ``model.fermion`` and ``config.json``)
        is converted instead, see :meth:`_import_phonon2`, and so is a NeMo ``.nemo`` checkpoint, see
        :meth:`NemoImporter.import_nemo`; ``sidecars`` and ``sha256`` apply to those only, ``license_text``
        to a ``.nemo``.
        """
        source = Path(source).expanduser()
        if not source.exists():
            raise UsageError(f"nothing to import at {source}", "pass an existing model folder or .gguf file")
        source = source.resolve()
        if nemo.is_nemo_source(source):
            if link:
                raise UsageError(
                    f"{source.name} cannot be linked: it is converted into a new model",
                    "import it without --link",
                )
            return self.nemo_importer.import_nemo(
                source, package_id, sidecars, sha256, license_text, progress, cancel
            )
        if license_text is not None:
            raise UsageError("--license applies to .nemo checkpoints only", "leave it out for this model")
        if phonon.is_phonon2_source(source):
            if link:
                raise UsageError(
                    f"{source.name} cannot be linked: it is converted into a new model",
                    "import it without --link",
                )
            return self._import_phonon2(source, package_id, sidecars, sha256, progress, cancel)
        if sidecars is not None or sha256 is not None:
            raise UsageError(
                "--sidecars and --sha256 apply to Phonon-2 and .nemo sources only",
                "pass a .nemo file, a .tar.zst archive or a folder holding model.fermion",
            )
        family = detect_family(source)  # raises ModelError with a fix if it is no model we can load
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

    def _import_phonon2(
        self,
        source: Path,
        package_id: str | None,
        sidecars: Path | None,
        sha256: str | None,
        progress: ProgressCallback | None,
        cancel: threading.Event | None,
    ) -> Path:
        """Convert a local Phonon-2 source into a package (default id: the catalog's Phonon-2 package).

        The sidecars (nvidia v3 ``config.json``, ``tokenizer.json``, ``processor_config.json``) come from the
        folder ``sidecars`` or, without it, from the hub as the catalog's Phonon-2 package lists them. The
        source must hash to ``sha256``, else to the digest the catalog pins or the published one. Everything
        is assembled in a temporary directory, so a refused or failed import leaves nothing installed.
        """
        known = {p.id: p for p in self.context.catalog.packages()}
        catalog_pkg = next(
            (
                p
                for p in known.values()
                if p.format == phonon.FORMAT and p.family == phonon.FAMILY and p.files
            ),
            None,
        )
        pid = package_id or (catalog_pkg.id if catalog_pkg is not None else "phonon2")
        if not PACKAGE_ID.match(pid):
            raise UsageError(
                f"{pid!r} cannot be a package id", "use letters, digits, '_', '-' or '.', e.g. --id my_model"
            )
        if pid in known and known[pid].family != phonon.FAMILY:
            raise UsageError(
                f"{pid} is a {known[pid].family} package, but {source} is a Phonon-2 ({phonon.FAMILY}) model",
                "choose another id with --id",
            )
        if pid in known and self.context.catalog.installed_path(known[pid]) is not None:
            raise UsageError(f"{pid} is already installed", "remove it first or choose another id with --id")
        expected = phonon.expected_digest(source, catalog_pkg, sha256)
        if source.is_file():
            phonon.require_zstandard(f"reading {source.name}")
        side_files: tuple[PackageFile, ...] = ()
        if sidecars is not None:
            sidecars = Path(sidecars).expanduser().resolve()
            if not sidecars.is_dir():
                raise UsageError(
                    f"--sidecars {sidecars} is not a folder",
                    "pass the folder holding config.json, tokenizer.json and processor_config.json",
                )
        elif catalog_pkg is not None:
            side_files = phonon.sidecar_files(catalog_pkg, lambda f: file_target(catalog_pkg, f))
        if sidecars is None and not side_files:
            raise UsageError(
                "the catalog does not say where the Phonon-2 sidecars come from",
                "pass --sidecars DIR holding config.json, tokenizer.json and processor_config.json of "
                "nvidia/parakeet-tdt-0.6b-v3",
            )
        size = (
            source.stat().st_size if source.is_file() else sum(p.stat().st_size for p in walk_files(source))
        )
        named = known.get(pid)
        pkg = PackageSpec(
            id=pid,
            family=phonon.FAMILY,
            name=named.name if named else f"{source.name} (imported Phonon-2)",
            format=phonon.FORMAT,
            files=side_files,
            size_bytes=size,
            hf_repo=catalog_pkg.hf_repo if catalog_pkg else None,
            revision=catalog_pkg.revision if catalog_pkg else None,
            quantization="f32",
            languages=("en",),
        )
        self.context.root.mkdir(parents=True, exist_ok=True)
        with self.context.package_lock(pid, "import"):
            if (self.context.root / pid / INSTALL_MARKER).exists():
                raise UsageError(
                    f"{pid} is already installed", "remove it first or choose another id with --id"
                )
            self.maintenance.cleanup(keep=pid)  # what a killed import of this id left (we hold its lock now)
            tracker = self.context.tracker(pid, progress)
            checked = source if source.is_file() else source / phonon.CONTAINER
            total = checked.stat().st_size
            phonon.check_digest(
                checked, expected, lambda done: tracker.emit("verifying", done, total, checked.name), cancel
            )
            planned: list[PlannedFile] = []
            if side_files:
                tracker.emit(
                    "checking", message=f"asking {self.context.hub.endpoint} for the sidecars", force=True
                )
                planned = self.downloads.plan(pkg, cancel)
            needed = self.downloads.remaining(planned) + phonon_extra_space(pkg) + DISK_RESERVE_BYTES
            self.context.require_space(needed, f"to import {source.name}")
            if planned:
                self.downloads.download_all(pkg, planned, tracker, cancel)
                self.downloads.verify_downloads(planned, tracker, cancel)
            converter = phonon.import_converter(source, sidecars)
            return self.assembler.assemble_converted(
                pkg, planned, tracker, cancel, converter, source, sidecars
            )

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
