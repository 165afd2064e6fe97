"""File operations of the store: walking, deleting without following links, copying while hashing."""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import shutil
import threading
from collections.abc import Iterator
from pathlib import Path

from inference.models.errors import DiskSpaceError
from inference.models.progress import ProgressTracker, check_cancel

_COPY_BLOCK = 4 * 1024 * 1024


def walk_files(root: Path, skip_dirs: set[str] | frozenset[str] = frozenset()) -> Iterator[Path]:
    for dirpath, dirnames, filenames in os.walk(root, followlinks=True):
        dirnames[:] = sorted(d for d in dirnames if d not in skip_dirs)
        for name in sorted(filenames):
            yield Path(dirpath) / name


def is_linked(path: Path, root: Path) -> bool:
    return any(
        parent.is_symlink() for parent in [path, *path.parents] if parent != root and root in parent.parents
    )


def newest_mtime(path: Path) -> float:
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


def remove_tree(path: Path) -> None:
    """Delete a directory without following symlinks (a linked import's source must survive)."""
    if path.is_symlink() or path.is_file():
        path.unlink(missing_ok=True)
    elif path.exists():
        shutil.rmtree(path, ignore_errors=True)


def copy_hashing(
    source: Path,
    destination: Path,
    tracker: ProgressTracker,
    base: int,
    total: int,
    cancel: threading.Event | None,
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
            raise DiskSpaceError(
                f"the disk filled up while copying {source.name}", "free some space"
            ) from exc
        raise
    shutil.copystat(source, destination)
    return digest.hexdigest()
