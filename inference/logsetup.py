"""Logging: a rotating file under the logs directory plus optional stderr detail."""

from __future__ import annotations

import logging
import logging.handlers
from collections.abc import Callable

from inference.paths import AppPaths

LOG_FORMAT = "%(asctime)s %(process)d %(name)s %(levelname)s %(message)s"
# The inference worker's process name, and the processName the client gives the records the worker sends
# (inference/client/dispatch.py): they belong in the log file; the console leaves them out, as the worker prints
# its warnings to stderr itself.
WORKER_PROCESS_NAME = "captioneer-worker"


# ``extra=`` for a warning about something the user gave (a damaged or truncated audio file, NaN samples): the
# CLI prints it on stderr even without --verbose, since the result it goes with is not what the file promised.
FOR_THE_USER = {"for_the_user": True}


def _not_from_the_worker(record: logging.LogRecord) -> bool:
    return record.processName != WORKER_PROCESS_NAME


def _for_the_user(record: logging.LogRecord) -> bool:
    return bool(getattr(record, "for_the_user", False)) and _not_from_the_worker(record)


def _console(level: int, form: str, keep: Callable[[logging.LogRecord], bool]) -> logging.Handler:
    console = logging.StreamHandler()
    console.setLevel(level)
    console.setFormatter(logging.Formatter(form))
    console.addFilter(keep)
    console._captioneer = True  # type: ignore[attr-defined]
    return console


def configure_logging(
    paths: AppPaths, verbose: bool = False, stderr: bool = True, user_warnings: bool = False
) -> logging.Logger:
    """The log file, and on stderr: everything with ``verbose``, else (``user_warnings``, the CLI) the warnings
    logged ``FOR_THE_USER`` as ``captioneer: warning: ...`` lines."""
    root = logging.getLogger()
    for handler in list(root.handlers):
        if getattr(handler, "_captioneer", False):
            root.removeHandler(handler)
            handler.close()
    root.setLevel(logging.DEBUG)
    try:
        paths.logs.mkdir(parents=True, exist_ok=True)
        file_handler = logging.handlers.RotatingFileHandler(
            paths.logs / "captioneer.log", maxBytes=2_000_000, backupCount=3, encoding="utf-8"
        )
        file_handler.setLevel(logging.DEBUG)
        file_handler.setFormatter(logging.Formatter(LOG_FORMAT))
        file_handler._captioneer = True  # type: ignore[attr-defined]
        root.addHandler(file_handler)
    except OSError:
        pass  # a read-only log location must not stop transcription
    if stderr and verbose:
        root.addHandler(_console(logging.DEBUG, "%(levelname)s %(name)s: %(message)s", _not_from_the_worker))
    elif stderr and user_warnings:
        root.addHandler(_console(logging.WARNING, "captioneer: warning: %(message)s", _for_the_user))
    return logging.getLogger("captioneer")
