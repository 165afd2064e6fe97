"""The store's side of Phonon-2 (docs/families/parakeet_tdt.md §7.2): what a local Phonon source is, what reading it needs, which
digest it must have, and the conversion step that turns it into an installed package.

The packed container and its converter are in :mod:`inference.families.parakeet_tdt.phonon_import`. Reading
the published ``.tar.zst`` archive needs the optional ``zstandard`` package (``pip install captioneer[phonon]``);
a folder holding ``model.fermion`` and ``config.json`` (the archive
unpacked) needs nothing extra.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable
from pathlib import Path

from inference.errors import ModelError, UsageError
from inference.families.parakeet_tdt.install import MODEL_DIR, SIDECAR_DIR
from inference.families.parakeet_tdt.phonon_import import (
    PUBLISHED_ARCHIVE_SHA256,
    PUBLISHED_CONTAINER_SHA256,
    convert_phonon2,
)
from inference.models.conversion import ConversionContext, ConversionResult, Converter
from inference.models.hashing import sha256_file
from inference.models.spec import PackageFile, PackageSpec

FORMAT = "phonon2-archive"
FAMILY = "parakeet_tdt"
ARCHIVE_SUFFIX = ".tar.zst"
CONTAINER = "model.fermion"
EXTRA = "phonon"
_SHA256 = re.compile(r"^[0-9a-f]{64}$")

Digest = str | tuple[str, str]  # a full sha256, or the (head, tail) fragments the public sources give


def is_phonon2_source(path: Path) -> bool:
    """A ``.tar.zst`` archive, or a folder holding a ``model.fermion`` container."""
    if path.is_file():
        return path.name.endswith(ARCHIVE_SUFFIX)
    return path.is_dir() and (path / CONTAINER).is_file()


def require_zstandard(what: str) -> None:
    """Refuse early, naming the extra, when the optional archive reader is missing."""
    try:
        import zstandard  # noqa: F401
    except ImportError:
        raise ModelError(
            f"{what} needs the optional zstandard package, which is not installed",
            f"run `pip install captioneer[{EXTRA}]` (or `pip install 'zstandard>=0.23'`), or unpack the archive "
            "and import the folder holding model.fermion and config.json",
        ) from None


def preflight(package: PackageSpec) -> None:
    """Checked before an install downloads anything: a Phonon archive is useless without its reader."""
    if package.format == FORMAT:
        require_zstandard(f"installing {package.name}")


def parse_sha256(text: str) -> str:
    digest = text.strip().lower()
    if not _SHA256.match(digest):
        raise UsageError(f"--sha256 must be 64 hexadecimal digits, got {text!r}")
    return digest


def expected_digest(source: Path, catalog_package: PackageSpec | None, override: str | None) -> Digest:
    """What the source must hash to: the one given, else a digest the catalog pins for the archive, else the
    published fragments of the archive (or of the container, for an unpacked folder)."""
    if override is not None:
        return parse_sha256(override)
    if source.is_dir():
        return PUBLISHED_CONTAINER_SHA256
    if catalog_package is not None:
        pinned = [f.sha256 for f in catalog_package.files if f.path.endswith(ARCHIVE_SUFFIX) and f.sha256]
        if pinned:
            return pinned[0]
    return PUBLISHED_ARCHIVE_SHA256


def check_digest(
    path: Path,
    expected: Digest,
    on_bytes: Callable[[int], None] | None = None,
    cancel: threading.Event | None = None,
) -> None:
    """Refuse a source that does not hash to ``expected``, saying what to do for a published or a given digest."""
    actual = sha256_file(path, on_bytes, cancel)
    if isinstance(expected, str):
        if actual == expected:
            return
        raise ModelError(
            f"{path.name} has sha256 {actual}, expected {expected}",
            "the file is damaged or incomplete (copy or download it again), or --sha256 is wrong",
        )
    head, tail = expected
    if actual.startswith(head) and actual.endswith(tail):
        return
    raise ModelError(
        f"{path.name} has sha256 {actual}, expected {head}…{tail} (the published Phonon-2 {path.name})",
        f"download the published file again if this copy is incomplete; to import another build on purpose, "
        f"pass --sha256 {actual}",
    )


def sidecar_files(package: PackageSpec, target_of: Callable[[PackageFile], str]) -> tuple[PackageFile, ...]:
    """The package's files that land in the sidecar folder (``target_of``: a file's place in the package)."""
    prefix = SIDECAR_DIR.strip("/") + "/"
    return tuple(f for f in package.files if target_of(f).startswith(prefix))


def import_converter(source: Path, sidecars: Path | None) -> Converter:
    """A conversion step for an import: ``source`` (its digest already checked, :func:`check_digest`) →
    ``<package>/phonon-2``, with the sidecars from ``sidecars`` or, when None, from the package's own sidecar
    folder (downloaded by the store)."""

    def convert(context: ConversionContext) -> ConversionResult:
        if source.is_file():
            require_zstandard(f"reading {source.name}")
        context.progress(0, None, f"converting {source.name} to the dense layout")
        convert_phonon2(
            source,
            sidecars if sidecars is not None else context.package_dir / SIDECAR_DIR,
            context.package_dir / MODEL_DIR,
            expected_sha256=None,
            progress=context.progress,
            cancel=context.cancel,
        )
        return ConversionResult(model_path=MODEL_DIR, notes=f"converted from {source}")

    return convert
