"""Error types shared by the CLI, the worker and the app.

Every error names the problem and, where one exists, the fix. ``exit_code`` follows the CLI
contract: 2 for usage/validation problems the user can correct, 1 for runtime failures.
"""

from __future__ import annotations


class CaptioneerError(Exception):
    """Base class: ``message`` says what is wrong, ``fix`` says what to do about it."""

    exit_code = 1

    def __init__(self, message: str, fix: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.fix = fix

    def __str__(self) -> str:
        return f"{self.message} ({self.fix})" if self.fix else self.message


class UsageError(CaptioneerError):
    """A bad option, value or combination of options."""

    exit_code = 2


class InputFileError(CaptioneerError):
    """A missing, unreadable, corrupt or unsupported input file."""

    exit_code = 2


class ModelError(CaptioneerError):
    """A missing, incompatible or corrupt model/checkpoint."""

    exit_code = 2


class BackendError(CaptioneerError):
    """The native backend is missing, mismatched, or lacks the requested device."""

    exit_code = 1


class NotImplementedFamilyError(CaptioneerError):
    """The requested capability is not available for this family in this build."""

    exit_code = 1


class Cancelled(CaptioneerError):
    """The user cancelled the operation; nothing is wrong."""

    exit_code = 130


class WorkerError(CaptioneerError):
    """The inference worker process crashed, hung or could not be started."""

    exit_code = 1


def error_kind(exc: BaseException) -> str:
    """The machine-readable kind (``contract.ERROR_KINDS``) of an exception, as events and the wire carry it."""
    for cls, kind in _KINDS:
        if isinstance(exc, cls):
            return kind
    return "out_of_memory" if isinstance(exc, MemoryError) else "internal"


def error_class(kind: str) -> type[CaptioneerError]:
    """The exception class that stands for ``kind`` on the receiving side (WorkerError for the rest)."""
    for cls, known in _KINDS:
        if known == kind:
            return cls
    return WorkerError


# Subclasses first: the first match wins.
_KINDS: tuple[tuple[type[CaptioneerError], str], ...] = (
    (Cancelled, "cancelled"),
    (UsageError, "usage"),
    (InputFileError, "input"),
    (ModelError, "model"),
    (NotImplementedFamilyError, "unsupported"),
    (BackendError, "backend"),
)
