"""Importing a NeMo ``.nemo`` Parakeet-TDT checkpoint (``nemo_source.py``): hashed, recognised against the catalog,
converted in a temporary package folder and swapped into place by the store, so a refused or failed import
installs nothing."""

from __future__ import annotations

from pathlib import Path

from inference.errors import UsageError
from inference.families.parakeet_tdt import nemo_source as nemo
from inference.families.parakeet_tdt.phonon_source import parse_sha256
from inference.models.hashing import sha256_file
from inference.models.marker import INSTALL_MARKER
from inference.models.progress import ProgressTracker, ThrottledReporter
from inference.models.source_import import ConvertingStore, SourceImport
from inference.models.spec import PackageSpec
from inference.models.store_layout import DISK_RESERVE_BYTES, PACKAGE_ID, slug

NEMO_FLOAT32_FACTOR = (
    2  # the dense float32 model can be up to twice a bf16/f16 .nemo; the weights are unpacked too
)


def import_nemo(store: ConvertingStore, request: SourceImport) -> Path:
    """Convert ``request.source`` into a parakeet_tdt package; returns its model path.

    The file is hashed first: a catalog entry pinning that digest gives the id, name and licence; a file
    meant as a catalog entry (by ``--id`` or file name) with another digest is refused unless ``--sha256``
    names it. Sidecars: ``sidecars`` if given, else the archive's own, else an installed stock v3 package's.
    """
    source, package_id, sidecars = request.source, request.package_id, request.sidecars
    cancel = request.cancel
    override = parse_sha256(request.sha256) if request.sha256 is not None else None
    if sidecars is not None:
        sidecars = Path(sidecars).expanduser().resolve()
        if not sidecars.is_dir():
            raise UsageError(
                f"--sidecars {sidecars} is not a folder",
                "pass the folder holding config.json, tokenizer.json and processor_config.json",
            )
    packages = store.catalog.packages()
    tracker = ProgressTracker(package_id or source.stem, ThrottledReporter(request.progress))
    total = source.stat().st_size
    digest = sha256_file(source, lambda done: tracker.emit("verifying", done, total, source.name), cancel)
    matched = nemo.catalog_package(packages, source, digest, package_id)
    nemo.check_digest(source, digest, matched, override)
    pid = package_id or (matched.id if matched is not None else slug(source.stem))
    if not PACKAGE_ID.match(pid):
        raise UsageError(
            f"{pid!r} cannot be a package id", "use letters, digits, '_', '-' or '.', e.g. --id my_model"
        )
    known = {p.id: p for p in packages}
    if pid in known and known[pid].family != nemo.FAMILY:
        raise UsageError(
            f"{pid} is a {known[pid].family} package, but {source.name} is a Parakeet-TDT model",
            "choose another id with --id",
        )
    if pid in known and store.catalog.installed_path(known[pid]) is not None:
        raise UsageError(f"{pid} is already installed", "remove it first or choose another id with --id")
    named = matched if matched is not None and matched.id == pid else None
    licence = (
        request.license_text
        or (named.license if named is not None else None)
        or "not given (see the .nemo's source)"
    )
    stock = None
    if sidecars is None:
        stock = nemo.installed_stock_sidecars(
            lambda i: store.catalog.installed_path(known[i]) if i in known else None
        )
    pkg = PackageSpec(
        id=pid,
        family=nemo.FAMILY,
        name=named.name if named is not None else f"{source.name} (imported .nemo)",
        format=nemo.FORMAT,
        files=(),
        size_bytes=total,
        quantization="f32",
        languages=named.languages if named is not None else (),
        license=licence,
    )
    provenance = {
        "source_file": source.name,
        "origin": str(source),
        "sha256": digest,
        "license": licence,
        "catalog_package": named.id if named is not None else None,
    }
    store.root.mkdir(parents=True, exist_ok=True)
    with store.package_lock(pid, "import"):
        if (store.root / pid / INSTALL_MARKER).exists():
            raise UsageError(f"{pid} is already installed", "remove it first or choose another id with --id")
        store.cleanup(keep=pid)  # what a killed import of this id left (we hold its lock now)
        store.require_space(
            NEMO_FLOAT32_FACTOR * total + total + DISK_RESERVE_BYTES, f"to import {source.name}"
        )
        converter = nemo.import_converter(source, sidecars, stock, provenance)
        return store.assemble_converted(pkg, [], tracker, cancel, converter, source, sidecars)
