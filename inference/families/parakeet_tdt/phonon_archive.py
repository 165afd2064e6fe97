"""The Phonon-2 ``.tar.zst`` archive read as untrusted input: wanted members out, every member checked, bounded.

The tar rules are :mod:`inference.models.tar_members`' (the ``.nemo`` reader's too): every member is a directory
or a regular file at a safe relative path, else it is refused naming the member (a link, device, FIFO or sparse
file is not skipped); no single tar header may make tarfile hold more than
:data:`~inference.models.tar_members.MAX_HEADER_READ`; before a member is written the free space is checked
against the size its header gives, and a full disk while writing is a :class:`DiskSpaceError`. What this archive
adds around them:

* decompression is streamed and refused past a bound: the size the zstd frame declares, and never more than
  :data:`MAX_EXPANSION` times the archive plus :data:`EXPANSION_SLACK` (a weight container hardly compresses);
* each wanted member (matched by its base name) appears once; ``config.json`` is at most :data:`MAX_CONFIG_BYTES`.
"""

from __future__ import annotations

import io
from pathlib import Path, PurePosixPath

from inference.errors import ModelError
from inference.models import tar_members

MAX_CONFIG_BYTES = 16 << 20
MAX_EXPANSION = 32
EXPANSION_SLACK = 16 << 20  # tar headers and padding of a tiny archive
_SKIP_BYTES = 1 << 20  # what a forward seek decompresses at a time
_FIX = "download the Phonon-2 archive again from its repository"


class _TooLarge(Exception):
    pass


class _BoundedReader:
    """A read-only stream that raises once more than ``limit`` bytes came out of ``inner``. It seeks forward
    only, by reading, so skipped members count against the bound too."""

    def __init__(self, inner: tar_members.Readable, limit: int) -> None:
        self._inner = inner
        self._left = limit

    def read(self, size: int = -1) -> bytes:
        chunk = self._inner.read(self._left + 1 if size is None or size < 0 else min(size, self._left + 1))
        self._left -= len(chunk)
        if self._left < 0:
            raise _TooLarge
        return chunk

    def tell(self) -> int:
        return self._inner.tell()

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        target = offset if whence == io.SEEK_SET else self.tell() + offset
        if whence not in (io.SEEK_SET, io.SEEK_CUR) or target < self.tell():
            raise io.UnsupportedOperation("a zstd stream seeks forward only")
        while (position := self.tell()) < target:
            if not self.read(min(target - position, _SKIP_BYTES)):
                return position  # it ended first: tarfile reports the truncation
        return position


def decompression_limit(archive: Path, declared: int | None) -> int:
    """The most bytes the archive may decompress to: what its frame declares, within the expansion bound."""
    bound = archive.stat().st_size * MAX_EXPANSION + EXPANSION_SLACK
    return bound if declared is None else min(declared, bound)


def extract_archive(
    archive: Path, into: Path, wanted: frozenset[str], free: tar_members.FreeBytes = tar_members.free_bytes
) -> None:
    """The members of ``archive`` named in ``wanted`` (base names) into ``into``; refuses what breaks a rule.
    ``free`` tells the free bytes of a folder's disk."""
    try:
        import zstandard
    except ImportError:
        raise ModelError(
            f"reading {archive.name} needs the zstandard package",
            "install it (pip install zstandard), or extract model.fermion and config.json and import the folder",
        ) from None
    source = archive.name
    damage: tuple[type[BaseException], ...] = (*tar_members.DAMAGE, zstandard.ZstdError)
    found: set[str] = set()
    try:
        with archive.open("rb") as raw:
            params = zstandard.get_frame_parameters(raw.read(18))
            raw.seek(0)
            declared = None if params.content_size == zstandard.CONTENTSIZE_UNKNOWN else params.content_size
            limit = decompression_limit(archive, declared)
            with (
                zstandard.ZstdDecompressor().stream_reader(raw) as stream,
                tar_members.read_tar(_BoundedReader(stream, limit), source) as tar,
            ):
                for member in tar:
                    path = tar_members.member_path(member, source)
                    base = PurePosixPath(path).name if path is not None else None
                    if base is None or base not in wanted:
                        continue
                    if base in found:
                        raise ModelError(f"{source} holds {base} twice (again at {member.name!r})", _FIX)
                    config_limit = MAX_CONFIG_BYTES if base == "config.json" else None
                    tar_members.check_size(member, source, True, 0, config_limit)
                    tar_members.copy_member(tar, member, into / base, source, free)
                    found.add(base)
    except _TooLarge:
        raise ModelError(
            f"{source} decompresses to more than {limit} bytes, more than a Phonon-2 archive holds", _FIX
        ) from None
    except damage as exc:
        error = tar_members.damage_error(source, exc)
        if error is None:
            raise
        raise error from None
    missing = sorted(wanted - found)
    if missing:
        raise ModelError(f"{source} lacks {', '.join(missing)}", _FIX)
