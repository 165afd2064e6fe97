"""Reading a tar archive from outside (a ``.nemo``, the Phonon-2 ``.tar.zst``) as hostile input: streamed, every
member checked.

Each member must be a regular file or a directory at a safe relative path (no absolute path, no ``..``, no
backslash or drive letter, no NUL), and each path may appear once; links, devices, FIFOs and sparse files are
refused by name (:func:`member_path`). A member's size is checked against the bytes the archive has left when it
is uncompressed, and against free disk space before it is written (:func:`copy_member`). Compressed archives
(gzip, bzip2, xz) are decompressed here, streamed (:func:`open_archive`; a caller with another decompressor hands
its stream to :func:`read_tar`), and tarfile reads every archive through :class:`BoundedReads`, so no single
header (a pax or GNU long-name record claiming gigabytes) can make it hold more than a bounded amount.
"""

from __future__ import annotations

import bz2
import errno
import gzip
import lzma
import shutil
import tarfile
import threading
import zlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path, PurePosixPath
from typing import Any, Protocol

from inference.errors import Cancelled, ModelError
from inference.models.errors import DiskSpaceError

MAX_HEADER_READ = 16 << 20  # the largest single read tarfile may make (a pax record, a long name)
DISK_MARGIN = 32 << 20  # never fill the disk to the last byte
FreeBytes = Callable[[Path], int]
_BLOCK = 1 << 20
_DAMAGE: tuple[type[BaseException], ...] = (
    tarfile.TarError,
    EOFError,
    OSError,
    zlib.error,
    lzma.LZMAError,
    ValueError,
    OverflowError,
    UnicodeError,
)


class Readable(Protocol):
    """What tarfile needs of the stream under :class:`BoundedReads`: reads, and seeks that may go forward only."""

    def read(self, size: int = -1, /) -> bytes: ...

    def seek(self, offset: int, whence: int = 0, /) -> int: ...

    def tell(self) -> int: ...


def free_bytes(path: Path) -> int:
    return int(shutil.disk_usage(path).free)


class BoundedReads:
    """A read-only stream that refuses any single read larger than ``limit`` bytes (members are read in
    small blocks; only a header can ask for more). Seeks go forward through a decompressor, so they cost
    time, never memory."""

    def __init__(self, stream: Readable, limit: int, source: str) -> None:
        self._stream = stream
        self._limit = limit
        self._source = source

    def read(self, size: int = -1) -> bytes:
        if size is None or size < 0 or size > self._limit:
            raise ModelError(
                f"{self._source}: a tar header asks to read {size} bytes at once, more than any real one",
                "check the archive; it is damaged or was made to exhaust memory",
            )
        return self._stream.read(size)

    def seek(self, offset: int, whence: int = 0) -> int:
        return self._stream.seek(offset, whence)

    def tell(self) -> int:
        return self._stream.tell()


@contextmanager
def open_archive(path: Path, source: str) -> Iterator[tuple[tarfile.TarFile, bool]]:
    """The archive at ``path`` as a tarfile read front to back, and whether it is compressed (sizes can then
    not be checked against the file's length)."""
    with path.open("rb") as raw:
        magic = raw.read(6)
        raw.seek(0)
        opener: Any = None
        if magic.startswith(b"\x1f\x8b"):
            opener = gzip.GzipFile
        elif magic.startswith(b"BZh"):
            opener = bz2.BZ2File
        elif magic.startswith(b"\xfd7zXZ\x00"):
            opener = lzma.LZMAFile
        stream: Any = opener(fileobj=raw) if opener is gzip.GzipFile else opener(raw) if opener else raw
        try:
            with read_tar(stream, source) as tar:
                yield tar, opener is not None
        finally:
            if stream is not raw:
                stream.close()


@contextmanager
def read_tar(stream: Readable, source: str) -> Iterator[tarfile.TarFile]:
    """The tar in ``stream`` (a file, or a decompressor that seeks forward), read front to back through
    :class:`BoundedReads`; ``source`` names the user's file in refusals."""
    bounded: Any = BoundedReads(stream, MAX_HEADER_READ, source)
    with tarfile.open(fileobj=bounded, mode="r:") as tar:
        yield tar


def member_path(member: tarfile.TarInfo, source: str) -> str | None:
    """The member's normalised relative path when it is a regular file, None for a directory; a refusal naming
    the member for every other kind and for an unsafe path."""
    shown = repr(member.name[:200])
    if member.isdir():
        kind = None
    elif member.isreg() and not member.issparse():
        kind = "file"
    else:
        what = (
            "a symbolic link"
            if member.issym()
            else "a hard link"
            if member.islnk()
            else "a device"
            if member.isdev() and not member.isfifo()
            else "a FIFO"
            if member.isfifo()
            else "a sparse file"
            if member.issparse()
            else f"of tar type {member.type!r}"
        )
        raise ModelError(
            f"{source}: its member {shown} is {what}, not a regular file",
            "use the archive as it was published",
        )
    name = member.name
    parts = [p for p in PurePosixPath(name).parts if p not in (".", "")]
    if (
        name.startswith("/")
        or "\\" in name
        or "\0" in name
        or ".." in parts
        or (parts and ":" in parts[0])
        or (kind is not None and not parts)
    ):
        raise ModelError(
            f"{source}: its member {shown} has an unsafe path (absolute, with '..' or a drive)",
            "use the archive as it was published",
        )
    return "/".join(parts) if kind is not None else None


def check_size(
    member: tarfile.TarInfo, source: str, compressed: bool, archive_bytes: int, limit: int | None = None
) -> None:
    """Refuse a member larger than ``limit`` or (uncompressed) than the bytes the archive has after its header."""
    if limit is not None and member.size > limit:
        raise ModelError(
            f"{source}: its member {member.name[:200]!r} is {member.size} bytes, too large for what it should be",
            "check the archive",
        )
    if not compressed and member.offset_data + member.size > archive_bytes:
        raise ModelError(
            f"{source} is damaged or truncated: its member {member.name[:200]!r} claims {member.size} bytes, "
            f"but only {max(0, archive_bytes - member.offset_data)} follow its header",
            "copy or download the archive again",
        )


def copy_member(
    tar: tarfile.TarFile,
    member: tarfile.TarInfo,
    target: Path,
    source: str,
    free: FreeBytes = free_bytes,
    cancel: threading.Event | None = None,
) -> None:
    """Write the member's bytes to ``target`` after checking the disk has room for all of them; refuse an
    archive that ends inside it."""
    room = free(target.parent) - DISK_MARGIN
    if member.size > room:
        raise DiskSpaceError(
            f"{source}: its member {member.name[:200]!r} unpacks to {member.size} bytes, but the model folder's "
            f"disk has only {max(0, room)} bytes to spare",
            "free some space (a real archive unpacks to about its own size; a much larger claim means a damaged "
            "or hostile file)",
        )
    stream = tar.extractfile(member)
    assert stream is not None  # a regular file, checked by member_path
    written = 0
    try:
        with target.open("wb") as out:
            while block := stream.read(_BLOCK):
                if cancel is not None and cancel.is_set():
                    raise Cancelled("the import was cancelled")
                out.write(block)
                written += len(block)
    except OSError as exc:
        if exc.errno in (errno.ENOSPC, errno.EDQUOT):
            raise DiskSpaceError(f"the disk filled up while unpacking {source}", "free some space") from None
        raise
    if written != member.size:
        raise ModelError(
            f"{source} is truncated inside its member {member.name[:200]!r}", "copy or download it again"
        )


def damage_error(source: str, exc: BaseException) -> ModelError | None:
    """The refusal for what tarfile or a decompressor raised on a damaged archive; None for a disk error."""
    if isinstance(exc, OSError) and exc.errno is not None and not isinstance(exc, tarfile.TarError):
        return None  # the disk, not the archive (decompressors raise OSError without an errno)
    text = " ".join(str(exc).split())[:200] or type(exc).__name__
    return ModelError(
        f"{source} is damaged or truncated, or not a tar archive: {text}", "copy or download it again"
    )


DAMAGE = _DAMAGE
