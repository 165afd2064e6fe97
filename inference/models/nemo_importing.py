"""Importing a NeMo ``.nemo`` Parakeet-TDT checkpoint (``nemo.py``): hashed, recognised against the catalog,
converted in a temporary package folder and swapped into place, so a refused or failed import installs nothing."""

from __future__ import annotations

import threading
from pathlib import Path

from inference.errors import UsageError
from inference.families.parakeet_tdt.phonon_source import parse_sha256
from inference.models import nemo
from inference.models.assembly import Assembler
from inference.models.hashing import sha256_file
from inference.models.maintenance import Maintenance
from inference.models.marker import INSTALL_MARKER
from inference.models.progress import ProgressCallback
from inference.models.spec import PackageSpec
from inference.models.store_context import StoreContext
from inference.models.store_layout import DISK_RESERVE_BYTES, PACKAGE_ID, slug

NEMO_FLOAT32_FACTOR = (
    2  # the dense float32 model can be up to twice a bf16/f16 .nemo; the weights are unpacked too
)


class NemoImporter:
    """Convert a NeMo ``.nemo`` checkpoint into an installed parakeet_tdt package."""

    def __init__(self, context: StoreContext, assembler: Assembler, maintenance: Maintenance) -> None:
        self.context = context
        self.assembler = assembler
        self.maintenance = maintenance

    def import_nemo(
        self,
        source: Path,
        package_id: str | None,
        sidecars: Path | None,
        sha256: str | None,
        license_text: str | None,
        progress: ProgressCallback | None,
        cancel: threading.Event | None,
    ) -> Path:
        """Convert ``source`` into a parakeet_tdt package; returns its model path.

        The file is hashed first: a catalog entry pinning that digest gives the id, name and licence; a file
        meant as a catalog entry (by ``--id`` or file name) with another digest is refused unless ``--sha256``
        names it. Sidecars: ``sidecars`` if given, else the archive's own, else an installed stock v3 package's.
        """
        override = parse_sha256(sha256) if sha256 is not None else None
        if sidecars is not None:
            sidecars = Path(sidecars).expanduser().resolve()
            if not sidecars.is_dir():
                raise UsageError(
                    f"--sidecars {sidecars} is not a folder",
                    "pass the folder holding config.json, tokenizer.json and processor_config.json",
                )
        packages = self.context.catalog.packages()
        tracker = self.context.tracker(package_id or source.stem, progress)
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
        if pid in known and self.context.catalog.installed_path(known[pid]) is not None:
            raise UsageError(f"{pid} is already installed", "remove it first or choose another id with --id")
        named = matched if matched is not None and matched.id == pid else None
        licence = (
            license_text
            or (named.license if named is not None else None)
            or "not given (see the .nemo's source)"
        )
        stock = None
        if sidecars is None:
            stock = nemo.installed_stock_sidecars(
                lambda i: self.context.catalog.installed_path(known[i]) if i in known else None
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
        self.context.root.mkdir(parents=True, exist_ok=True)
        with self.context.package_lock(pid, "import"):
            if (self.context.root / pid / INSTALL_MARKER).exists():
                raise UsageError(
                    f"{pid} is already installed", "remove it first or choose another id with --id"
                )
            self.maintenance.cleanup(keep=pid)  # what a killed import of this id left (we hold its lock now)
            self.context.require_space(
                NEMO_FLOAT32_FACTOR * total + total + DISK_RESERVE_BYTES, f"to import {source.name}"
            )
            converter = nemo.import_converter(source, sidecars, stock, provenance)
            return self.assembler.assemble_converted(pkg, [], tracker, cancel, converter, source, sidecars)
