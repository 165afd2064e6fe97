"""Installing from the hub: verified downloads are moved into a temporary folder, converted if the family needs
it, given their install marker and swapped into place, so a half-done install never looks installed.

:class:`Installer` runs an install (catalog entry, lock, downloads, assembly); :class:`Assembler` is the
all-or-nothing last step it shares with the converting imports."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import threading
from dataclasses import replace
from pathlib import Path
from typing import Any

from inference.errors import ModelError, NotImplementedFamilyError, UsageError
from inference.models.conversion import FORMATS_NEEDING_CONVERSION, ConversionContext
from inference.models.downloads import Downloads, PlannedFile
from inference.models.maintenance import Maintenance
from inference.models.marker import InstallMarker, OtherSource, converted_import_fields, write_marker
from inference.models.progress import ProgressCallback, ProgressTracker, check_cancel
from inference.models.spec import PackageSpec
from inference.models.store_context import StoreContext
from inference.models.store_layout import PARTIAL_DIR, default_model_path


class Installer:
    """Install a catalog package: downloads, conversion, marker, swap into place."""

    def __init__(
        self, context: StoreContext, downloads: Downloads, assembler: Assembler, maintenance: Maintenance
    ) -> None:
        self.context = context
        self.downloads = downloads
        self.assembler = assembler
        self.maintenance = maintenance

    def install(
        self,
        package_id: str,
        progress: ProgressCallback | None = None,
        cancel: threading.Event | None = None,
        force: bool = False,
    ) -> Path:
        """Download, verify, convert and install a catalog package; returns its model path."""
        pkg = self.context.catalog.get(package_id)
        if pkg.format == "bundled":
            raise UsageError(f"{pkg.id} is bundled with Captioneer; there is nothing to download")
        if not pkg.hf_repo or not pkg.files:
            raise UsageError(
                f"{pkg.id} has no download source in the catalog", "import it from a local copy instead"
            )
        existing = self.context.catalog.installed_path(pkg)
        if existing is not None and not force:
            return existing
        converter = self.context.conversions.for_package(pkg)
        if pkg.format in FORMATS_NEEDING_CONVERSION and converter is None:
            raise NotImplementedFamilyError(
                f"{pkg.name} needs an install-time conversion that this build of Captioneer does not have yet",
                "install another package of the same family, or update Captioneer",
            )
        # e.g. an optional dependency the conversion needs: before any download
        self.context.conversions.preflight(pkg)
        self.context.root.mkdir(parents=True, exist_ok=True)
        with self.context.package_lock(pkg.id, "install"):
            # again: another process may have just finished it
            existing = self.context.catalog.installed_path(pkg)
            if existing is not None and not force:
                return existing
            self.maintenance.cleanup(keep=pkg.id)
            tracker = self.context.tracker(pkg.id, progress)
            tracker.emit(
                "checking", message=f"asking {self.context.hub.endpoint} about {pkg.hf_repo}", force=True
            )
            planned = self.downloads.plan(pkg, cancel)
            self.downloads.preflight(pkg, planned, self.context.conversions.extra_space(pkg))
            self.downloads.download_all(pkg, planned, tracker, cancel)
            self.downloads.verify_downloads(planned, tracker, cancel)
            path = self.assembler.assemble(pkg, planned, tracker, cancel, converter)
            tracker.emit("done", message=str(path), force=True)
            return path


class Assembler:
    """Move verified files into a temporary package folder, convert, record the marker, swap into place."""

    def __init__(self, context: StoreContext) -> None:
        self.context = context

    def assemble_converted(
        self,
        pkg: PackageSpec,
        planned: list[PlannedFile],
        tracker: ProgressTracker,
        cancel: threading.Event | None,
        converter: Any,
        source: Path,
        sidecars: Path | None,
    ) -> Path:
        """Assemble a package converted from a local file (a Phonon-2 source, a .nemo) and report it done."""
        fields = converted_import_fields(source, sidecars)
        path = self.assemble(pkg, planned, tracker, cancel, converter, marker_fields=fields)
        tracker.emit("done", message=str(path), force=True)
        return path

    def assemble(
        self,
        pkg: PackageSpec,
        planned: list[PlannedFile],
        tracker: ProgressTracker,
        cancel: threading.Event | None,
        converter: Any,
        marker_fields: dict[str, Any] | None = None,
    ) -> Path:
        tmp = self.context.new_tmp_dir(pkg.id)
        moved: list[PlannedFile] = []
        try:
            for item in planned:
                destination = tmp / item.target
                destination.parent.mkdir(parents=True, exist_ok=True)
                os.replace(item.partial, destination)
                moved.append(item)
            model_path = default_model_path(pkg, [item.target for item in planned])
            if converter is not None:
                tracker.emit("converting", message=pkg.name, force=True)
                context = ConversionContext(
                    pkg,
                    tmp,
                    lambda done, total, msg: tracker.emit("converting", done, total, message=msg),
                    cancel,
                )
                result = converter(context)
                if result is not None and result.model_path:
                    model_path = result.model_path
                check_cancel(cancel)
            if not (tmp / model_path).exists():
                raise ModelError(f"the installed {pkg.name} lacks its model at {model_path}")
            tracker.emit("finishing", message="recording checksums", force=True)
            known = {item.target: item.sha256 for item in planned}
            files = self.context.describe_files(tmp, known, tracker, cancel)
            own = [item for item in planned if not pkg.is_foreign(item.spec)]
            commit = next((item.remote.commit for item in own if item.remote.commit), None)
            others = tuple(
                OtherSource(item.target, item.remote.repo, item.remote.revision, item.remote.commit)
                for item in planned
                if pkg.is_foreign(item.spec)
            )
            marker = InstallMarker(
                id=pkg.id,
                family=pkg.family,
                format=pkg.format,
                name=pkg.name,
                quantization=pkg.quantization,
                model_path=model_path,
                source="hub",
                hf_repo=pkg.hf_repo,
                revision=pkg.revision,
                commit=commit,
                installed_at=self.context.clock(),
                files=files,
                other_sources=others,
            )
            write_marker(tmp, replace(marker, **(marker_fields or {})))
            final = self.context.swap_into_place(tmp, pkg.id)
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
            (self.context.root / PARTIAL_DIR / pkg.id).rmdir()
        return final / model_path
