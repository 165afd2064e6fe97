"""The Qt binding itself: PySide6 6.12.0 dropped a reference to ``True`` on every ``Signal.emit()``, so a
live session (hundreds of emits a minute) ended with "Fatal Python error: bool_dealloc" at exit. The
dependency excludes that release; this test fails on any release with the same fault."""

from __future__ import annotations

import sys

from PySide6.QtCore import QObject, Signal


class _Emitter(QObject):
    fired = Signal(str)


def test_signal_emit_keeps_reference_counts(qapp) -> None:  # type: ignore[no-untyped-def]
    emitter = _Emitter()
    received: list[str] = []
    emitter.fired.connect(received.append)
    before = (sys.getrefcount(True), sys.getrefcount(False), sys.getrefcount(None))
    for _ in range(2000):
        emitter.fired.emit("x")
    after = (sys.getrefcount(True), sys.getrefcount(False), sys.getrefcount(None))
    assert len(received) == 2000
    assert all(abs(a - b) < 50 for a, b in zip(after, before, strict=True)), (before, after)
