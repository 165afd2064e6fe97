"""The Phonon-2 ``.tar.zst`` archive read as untrusted input: wanted members out, every member checked, bounded.

* Every member is a directory or a regular file at a safe relative path (no absolute path, no ``..``, no
  backslash); a link, device, FIFO or sparse file is refused naming the member, not skipped.
* Each wanted member (matched by its base name) appears once; ``config.json`` is at most
  :data:`MAX_CONFIG_BYTES`.
* A pax or GNU long-name header extension is at most :data:`MAX_META_BYTES` (tarfile holds it in memory).
* Decompression is streamed and refused past a bound: the size the zstd frame declares, and never more than
  :data:`MAX_EXPANSION` times the archive plus :data:`EXPANSION_SLACK` (a weight container hardly compresses).
* Before a member is written, the free space is checked against the size its tar header gives; a full disk
  while writing is a :class:`DiskSpaceError`.
"""

from __future__ import annotations

import shutil
import tarfile
from pathlib import Path, PurePosixPath
from typing import IO

from inference.errors import ModelError
from inference.models.errors import DiskSpaceError, disk_full_error

MAX_CONFIG_BYTES = 16 << 20
MAX_META_BYTES = 1 << 20  # pax and GNU long-name headers: a few hundred bytes in a real archive
MAX_EXPANSION = 32
EXPANSION_SLACK = 16 << 20  # tar headers and padding of a tiny archive
DISK_RESERVE_BYTES = 32 << 20
_FIX = "download the Phonon-2 archive again from its repository"
_SPACE_FIX = "free some space (or choose another model folder) and import again"


class _TooLarge(Exception):
    pass


_META_TYPES = (
    tarfile.GNUTYPE_LONGNAME,
    tarfile.GNUTYPE_LONGLINK,
    tarfile.XHDTYPE,
    tarfile.XGLTYPE,
    tarfile.SOLARIS_XHDTYPE,
)


class _BoundedTarInfo(tarfile.TarInfo):
    """tarfile reads a pax or GNU long-name header's whole payload into memory: refuse one past
    :data:`MAX_META_BYTES` before it is read."""

    def _proc_member(self, tarfile_: tarfile.TarFile) -> tarfile.TarInfo:  # type: ignore[override]
        if self.type in _META_TYPES and self.size > MAX_META_BYTES:
            raise tarfile.HeaderError(f"a header extension of {self.size} bytes (at most {MAX_META_BYTES})")
        return super()._proc_member(tarfile_)  # type: ignore[misc]


class _BoundedReader:
    """A read-only stream that raises once more than ``limit`` bytes came out of ``inner``."""

    def __init__(self, inner: IO[bytes], limit: int) -> None:
        self._inner = inner
        self._left = limit

    def read(self, size: int = -1) -> bytes:
        chunk = self._inner.read(self._left + 1 if size is None or size < 0 else min(size, self._left + 1))
        self._left -= len(chunk)
        if self._left < 0:
            raise _TooLarge
        return chunk


def decompression_limit(archive: Path, declared: int | None) -> int:
    """The most bytes the archive may decompress to: what its frame declares, within the expansion bound."""
    bound = archive.stat().st_size * MAX_EXPANSION + EXPANSION_SLACK
    return bound if declared is None else min(declared, bound)


def extract_archive(archive: Path, into: Path, wanted: frozenset[str]) -> None:
    """The members of ``archive`` named in ``wanted`` (base names) into ``into``; refuses what breaks a rule."""
    try:
        import zstandard
    except ImportError:
        raise ModelError(
            f"reading {archive.name} needs the zstandard package",
            "install it (pip install zstandard), or extract model.fermion and config.json and import the folder",
        ) from None
    found: set[str] = set()
    try:
        with archive.open("rb") as raw:
            params = zstandard.get_frame_parameters(raw.read(18))
            raw.seek(0)
            declared = None if params.content_size == zstandard.CONTENTSIZE_UNKNOWN else params.content_size
            limit = decompression_limit(archive, declared)
            with zstandard.ZstdDecompressor().stream_reader(raw) as stream:
                bounded = _BoundedReader(stream, limit)
                with tarfile.open(fileobj=bounded, mode="r|", tarinfo=_BoundedTarInfo) as tar:  # type: ignore[call-overload]
                    for member in tar:
                        base = _checked_name(archive, member)
                        if base in wanted and member.isfile():
                            _extract(archive, tar, member, into / base, base in found)
                            found.add(base)
    except _TooLarge:
        raise ModelError(
            f"{archive.name} decompresses to more than {limit} bytes, more than a Phonon-2 archive holds",
            _FIX,
        ) from None
    except (tarfile.TarError, zstandard.ZstdError, EOFError) as exc:
        raise ModelError(
            f"{archive.name} is damaged or truncated: {exc}", "download the archive again"
        ) from None
    missing = sorted(wanted - found)
    if missing:
        raise ModelError(f"{archive.name} lacks {', '.join(missing)}", "download the Phonon-2 archive again")


def _checked_name(archive: Path, member: tarfile.TarInfo) -> str:
    """The member's base name once its path and type are known to be safe."""
    path = PurePosixPath(member.name)
    if not member.name or path.is_absolute() or ".." in path.parts or "\\" in member.name:
        raise ModelError(f"{archive.name} holds a member at an unsafe path {member.name!r}", _FIX)
    if not (member.isdir() or member.isfile()) or member.issparse():
        raise ModelError(
            f"{archive.name} holds {member.name!r}, a {_kind(member)}; a Phonon-2 archive holds only regular files",
            _FIX,
        )
    return path.name


def _kind(member: tarfile.TarInfo) -> str:
    if member.issym():
        return "symbolic link"
    if member.islnk():
        return "hard link"
    if member.ischr() or member.isblk():
        return "device"
    if member.isfifo():
        return "FIFO"
    return "sparse file" if member.issparse() else "special member"


def _extract(archive: Path, tar: tarfile.TarFile, member: tarfile.TarInfo, target: Path, twice: bool) -> None:
    if twice:
        raise ModelError(f"{archive.name} holds {target.name} twice (again at {member.name!r})", _FIX)
    if target.name == "config.json" and member.size > MAX_CONFIG_BYTES:
        raise ModelError(
            f"{archive.name}: member {member.name!r} claims {member.size} bytes for a config", _FIX
        )
    free = shutil.disk_usage(target.parent).free
    if member.size + DISK_RESERVE_BYTES > free:
        raise DiskSpaceError(
            f"unpacking {member.name!r} of {archive.name} needs {member.size} bytes, {free} are free",
            _SPACE_FIX,
        )
    source = tar.extractfile(member)
    if source is None:  # isfile() members always have a stream
        raise ModelError(f"{archive.name}: member {member.name!r} cannot be read", _FIX)
    try:
        with target.open("wb") as out:
            shutil.copyfileobj(source, out, 1 << 20)
    except OSError as exc:
        full = disk_full_error(
            exc, f"the disk filled up while unpacking {member.name!r} of {archive.name}", _SPACE_FIX
        )
        if full is not None:
            raise full from None
        raise
