"""Hands calls from any thread to the GUI thread: how background operations (``app.operations``) deliver their
outcomes to the window."""

from __future__ import annotations

import logging
from collections.abc import Callable

from PySide6.QtCore import QObject, Signal, Slot

log = logging.getLogger("captioneer.app.operations")


class GuiThread(QObject):
    """Create it on the GUI thread, as the child of the widget whose jobs it serves: a call posted from another
    thread is queued to this object's thread, and one posted after the owner was deleted is dropped."""

    _posted = Signal(object)

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._posted.connect(self._run)

    def post(self, call: Callable[[], None]) -> None:
        try:
            self._posted.emit(call)
        except RuntimeError:  # the owner (a closed dialog) was deleted while the job wound down
            log.debug("a background job finished after its window closed; its outcome is dropped")

    @Slot(object)
    def _run(self, call: Callable[[], None]) -> None:
        call()
