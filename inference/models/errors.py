"""Failures of the model store, each with a ``kind`` the GUI can show as a plain-word headline.

All are runtime failures (CLI exit 1) except a corrupt installed package found by ``verify``,
which is a :class:`inference.errors.ModelError` like every other corrupt model (exit 2).
"""

from __future__ import annotations

import errno

from inference.errors import CaptioneerError, ModelError


class StoreError(CaptioneerError):
    """A download/install step failed; ``kind`` names the category for the user interface."""

    kind = "failed"


class NetworkError(StoreError):
    kind = "no network"


class HubRefusedError(StoreError):
    kind = "hub refused"


class ChecksumMismatchError(StoreError):
    kind = "checksum mismatch"


class DiskSpaceError(StoreError):
    kind = "disk full"


def disk_full_error(exc: OSError, message: str, fix: str) -> DiskSpaceError | None:
    """``exc`` as a DiskSpaceError when it says the disk (or the quota) is full, else None."""
    return DiskSpaceError(message, fix) if exc.errno in (errno.ENOSPC, errno.EDQUOT) else None


class InstallCancelled(StoreError):
    """The user cancelled; partial downloads are kept so the next install resumes them."""

    kind = "cancelled"
    exit_code = 130


class CorruptPackageError(ModelError):
    """``verify`` found files that differ from what was installed."""

    kind = "checksum mismatch"
