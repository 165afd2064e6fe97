"""Install-time step of the ``phonon2_source`` package: convert the downloaded archive to the dense layout.

A ``inference.models.conversion`` hook for the parakeet_tdt family. It acts on ``phonon2-archive`` packages
only (the other parakeet_tdt packages load as downloaded) and expects, inside the temporary install
directory, the archive and the nvidia v3 sidecars (``config.json``, ``tokenizer.json``,
``processor_config.json``) under :data:`SIDECAR_DIR`. The dense model is written to :data:`MODEL_DIR`, which
becomes the package's model path; a failure or a cancel leaves no partial model behind
(``convert_phonon2`` renames it into place only when complete).
"""

from __future__ import annotations

from pathlib import Path

from inference.errors import ModelError
from inference.families.parakeet_tdt.phonon_import import PUBLISHED_ARCHIVE_SHA256, convert_phonon2
from inference.models.conversion import ConversionContext, ConversionResult
from inference.models.progress import check_cancel
from inference.models.spec import PackageSpec

SIDECAR_DIR = "nvidia-parakeet-tdt-0.6b-v3"
MODEL_DIR = "phonon-2"
ARCHIVE_SUFFIX = ".tar.zst"
DENSE_BYTES = 2_508_229_144  # 699 F32 tensors (docs/families/parakeet_tdt.md §7.2)


def build_phonon2(context: ConversionContext) -> ConversionResult | None:
    package = context.package
    if package.format != "phonon2-archive":
        return None
    check_cancel(context.cancel)
    archives = sorted(p for p in context.package_dir.rglob(f"*{ARCHIVE_SUFFIX}") if p.is_file())
    if len(archives) != 1:
        raise ModelError(
            f"{package.name} should hold one {ARCHIVE_SUFFIX} archive, found {len(archives)}",
            "check the package's file list in the catalog",
        )
    # A digest pinned in the catalog was checked by the download; otherwise the published fragments are.
    pinned = any(f.sha256 for f in package.files if f.path.endswith(ARCHIVE_SUFFIX))
    context.progress(0, None, "converting Phonon-2 to the dense layout")
    convert_phonon2(
        archives[0],
        context.package_dir / SIDECAR_DIR,
        context.package_dir / MODEL_DIR,
        expected_sha256=None if pinned else PUBLISHED_ARCHIVE_SHA256,
        progress=lambda done, total, message: context.progress(done, total, message),
        cancel=context.cancel,
    )
    return ConversionResult(model_path=MODEL_DIR, notes="converted from the packed Phonon-2 container")


def extra_space(package: PackageSpec) -> int:
    """The dense F32 model next to the archive (which stays: the store verifies downloads by checksum), plus
    the container unpacked while converting (about the archive's size: packed codes barely compress)."""
    return DENSE_BYTES + int(package.size_bytes) if package.format == "phonon2-archive" else 0


def model_location(package_dir: Path) -> Path:
    return package_dir / MODEL_DIR
