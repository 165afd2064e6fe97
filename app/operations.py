"""Background operations: the one way a job leaves the GUI thread (in the way of Anki's ``aqt.operations``).

An :class:`Operation` runs a function on a thread of its own and hands the outcome back, on the thread that owns
it, to ``success`` (the function's result) or ``failure`` (its exception). The window hands outcomes to the GUI
thread (``GuiThread.post`` from ``app.gui_thread``), so the function never touches a widget and the callbacks may;
Qt-free callers and tests take them on the operation's own thread (:func:`on_the_worker`).

Every failure is reported here, in one place, before ``failure`` sees it: a ``CaptioneerError`` in words (it
names the problem and the fix), a cancellation quietly, anything else (a bug) with its traceback.

Long-lived services keep threads of their own (audio capture, the hotkey listeners, the session journal's
flusher, dictation's transcription queue): they are not jobs with an outcome (docs/architecture.md §1.1).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Generic, TypeVar

from inference.errors import Cancelled, CaptioneerError

log = logging.getLogger("captioneer.app.operations")
T = TypeVar("T")

#: Runs a callable on the thread that owns an operation's outcome.
Deliver = Callable[[Callable[[], None]], None]


def on_the_worker(call: Callable[[], None]) -> None:
    """Outcomes on the operation's own thread: for Qt-free callers and tests."""
    call()


def is_cancellation(exc: BaseException) -> bool:
    return isinstance(exc, Cancelled) or getattr(exc, "kind", "") == "cancelled"


def report_failure(name: str, exc: BaseException) -> None:
    """The one place a failed operation is reported (the log; the ``failure`` callback tells the user)."""
    if is_cancellation(exc):
        log.debug("%s was cancelled", name)
    elif isinstance(exc, CaptioneerError):
        log.warning("%s failed: %s", name, exc)
    else:
        log.error("%s failed", name, exc_info=exc)


class Operation(Generic[T]):
    """``Operation(op, name).success(...).failure(...).run_in_background(deliver)``.

    ``name`` names the thread (logs and debuggers show it). Without ``success`` the result is dropped; without
    ``failure`` the report is all that happens."""

    def __init__(self, op: Callable[[], T], name: str) -> None:
        self._op = op
        self.name = name
        self._on_success: Callable[[T], None] | None = None
        self._on_failure: Callable[[BaseException], None] | None = None

    def success(self, on_success: Callable[[T], None]) -> Operation[T]:
        self._on_success = on_success
        return self

    def failure(self, on_failure: Callable[[BaseException], None]) -> Operation[T]:
        self._on_failure = on_failure
        return self

    def run_in_background(self, deliver: Deliver, *, daemon: bool = True) -> threading.Thread:
        """Start the job and return its (started) thread. ``daemon=False`` for a job the interpreter must let
        finish at exit (closing the worker process)."""
        thread = threading.Thread(target=self._run, args=(deliver,), name=self.name, daemon=daemon)
        thread.start()
        return thread

    def _run(self, deliver: Deliver) -> None:
        try:
            result = self._op()
        except BaseException as exc:  # a job always reports back, whatever happened
            report_failure(self.name, exc)
            self._deliver_failure(deliver, exc)
            return
        on_success = self._on_success
        if on_success is not None:
            deliver(lambda: on_success(result))

    def _deliver_failure(self, deliver: Deliver, exc: BaseException) -> None:
        on_failure = self._on_failure
        if on_failure is not None:
            deliver(lambda: on_failure(exc))
