"""The store's folder layout and names: what lies where under the models directory, and where a
catalog file goes inside its package. Pure functions over names; nothing here touches the disk."""

from __future__ import annotations

import re
from pathlib import Path

from inference.errors import ModelError, UsageError
from inference.models.marker import INSTALL_MARKER
from inference.models.spec import PackageFile, PackageSpec

DERIVED_DIR = ".captioneer"  # per-package caches written by conversions, not downloads
PARTIAL_DIR = ".partial"
TMP_PREFIX = ".tmp-"
LOCK_DIR = ".locks"
TMP_NAME = re.compile(r"^\.tmp-(?P<id>.+?)(?:-old|-removing)?-[0-9a-f]{8}$")
DAY_S = 24 * 3600
PARTIAL_MAX_AGE_S = 7 * DAY_S
DISK_RESERVE_BYTES = 32 * 1024 * 1024  # never fill the disk to the last byte
PACKAGE_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,79}$")
SKIP_IMPORT_DIRS = {".git", ".cache", "__pycache__"}


def owner_id(path: Path) -> str:
    """The package a leftover belongs to: ``.partial/<id>`` or ``.tmp-<id>[-old|-removing]-<hex>``."""
    match = TMP_NAME.match(path.name)
    return match.group("id") if match else path.name


def check_id(package_id: str) -> None:
    if not PACKAGE_ID.match(package_id):
        raise UsageError(f"{package_id!r} is not a package id", "see `captioneer models list`")


def slug(name: str) -> str:
    slug = re.sub(r"[^A-Za-z0-9_.-]+", "_", name).strip("._-")
    return slug[:80] or "imported_model"


def target_path(pkg: PackageSpec, repo_path: str) -> str:
    """Where a repository file goes inside the package directory (``strip_prefix``, ``target_dir``)."""
    rel = repo_path.removeprefix(pkg.strip_prefix) if pkg.strip_prefix else repo_path
    if pkg.target_dir:
        rel = f"{pkg.target_dir.strip('/')}/{rel}"
    return safe_relative(pkg, rel, repo_path)


def safe_relative(pkg: PackageSpec, rel: str, repo_path: str) -> str:
    parts = Path(rel).parts
    if not parts or Path(rel).is_absolute() or ".." in parts or rel == INSTALL_MARKER:
        raise ModelError(f"catalog entry {pkg.id} has an unsafe file path {repo_path!r}")
    return Path(rel).as_posix()


def file_target(pkg: PackageSpec, file: PackageFile) -> str:
    """Where a catalog file goes inside the package directory: its own ``target_dir`` when it names one."""
    if file.target_dir is None:
        return target_path(pkg, file.path)
    rel = f"{file.target_dir.strip('/')}/{file.path}" if file.target_dir.strip("/") else file.path
    return safe_relative(pkg, rel, file.path)


def default_model_path(pkg: PackageSpec, targets: list[str]) -> str:
    if pkg.format == "gguf":
        ggufs = [t for t in targets if t.endswith(".gguf")]
        if len(ggufs) == 1:
            return ggufs[0]
    return pkg.target_dir.strip("/") if pkg.target_dir else "."
