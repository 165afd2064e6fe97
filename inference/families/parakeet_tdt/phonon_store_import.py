"""Importing a local Phonon-2 source (``phonon_source.py``): verified, its sidecars fetched, converted in a
temporary package folder and swapped into place by the store, so a refused or failed import installs nothing."""

from __future__ import annotations

from pathlib import Path

from inference.errors import UsageError
from inference.families.parakeet_tdt import phonon_source as phonon
from inference.families.parakeet_tdt.install import extra_space as phonon_extra_space
from inference.models.downloads import PlannedFile
from inference.models.fsops import walk_files
from inference.models.marker import INSTALL_MARKER
from inference.models.progress import ProgressTracker, ThrottledReporter
from inference.models.source_import import ConvertingStore, SourceImport
from inference.models.spec import PackageFile, PackageSpec
from inference.models.store_layout import DISK_RESERVE_BYTES, PACKAGE_ID, file_target


def import_phonon2(store: ConvertingStore, request: SourceImport) -> Path:
    """Convert a local Phonon-2 source into a package (default id: the catalog's Phonon-2 package).

    The sidecars (nvidia v3 ``config.json``, ``tokenizer.json``, ``processor_config.json``) come from the
    folder ``sidecars`` or, without it, from the hub as the catalog's Phonon-2 package lists them. The
    source must hash to ``sha256``, else to the digest the catalog pins or the published one. Everything
    is assembled in a temporary directory, so a refused or failed import leaves nothing installed.
    """
    source, package_id, sidecars, cancel = (
        request.source,
        request.package_id,
        request.sidecars,
        request.cancel,
    )
    known = {p.id: p for p in store.catalog.packages()}
    catalog_pkg = next(
        (p for p in known.values() if p.format == phonon.FORMAT and p.family == phonon.FAMILY and p.files),
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
    if pid in known and store.catalog.installed_path(known[pid]) is not None:
        raise UsageError(f"{pid} is already installed", "remove it first or choose another id with --id")
    expected = phonon.expected_digest(source, catalog_pkg, request.sha256)
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
    size = source.stat().st_size if source.is_file() else sum(p.stat().st_size for p in walk_files(source))
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
    store.root.mkdir(parents=True, exist_ok=True)
    with store.package_lock(pid, "import"):
        if (store.root / pid / INSTALL_MARKER).exists():
            raise UsageError(f"{pid} is already installed", "remove it first or choose another id with --id")
        store.cleanup(keep=pid)  # what a killed import of this id left (we hold its lock now)
        tracker = ProgressTracker(pid, ThrottledReporter(request.progress))
        checked = source if source.is_file() else source / phonon.CONTAINER
        total = checked.stat().st_size
        phonon.check_digest(
            checked, expected, lambda done: tracker.emit("verifying", done, total, checked.name), cancel
        )
        planned: list[PlannedFile] = []
        if side_files:
            tracker.emit("checking", message=f"asking {store.hub.endpoint} for the sidecars", force=True)
            planned = store.plan(pkg, cancel)
        needed = store.remaining(planned) + phonon_extra_space(pkg) + DISK_RESERVE_BYTES
        store.require_space(needed, f"to import {source.name}")
        if planned:
            store.download_all(pkg, planned, tracker, cancel)
            store.verify_downloads(planned, tracker, cancel)
        converter = phonon.import_converter(source, sidecars)
        return store.assemble_converted(pkg, planned, tracker, cancel, converter, source, sidecars)
