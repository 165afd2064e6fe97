"""Ctrl-C and ``kill PID`` end a live caption of the command line by setting an event, not by an exception.

Python raises KeyboardInterrupt wherever the main thread happens to be; inside a push that is halfway through
handing audio to the worker client (recorded as sent, not yet sent), the interrupted push was never answered and
the final ``finish`` waited for it forever. So while audio is fed, both signals only set an event that the feed
loops look at between pushes (they wake at least every 0.2 s); outside, the previous handlers are back, so a
second Ctrl-C while the transcript is finishing still stops the command.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator
from typing import Any

SIGNALS = (signal.SIGINT, signal.SIGTERM)  # Ctrl-C, and ``kill PID`` from a script or a background job


@contextlib.contextmanager
def finish_on_signals() -> Iterator[threading.Event]:
    """An event set by SIGINT or SIGTERM while the block runs, or by a KeyboardInterrupt that ends it (off the
    main thread, where Python cannot install handlers, the signals behave as before). An ignored SIGINT (a
    background job's) stays ignored, as Python itself leaves it."""
    stop = threading.Event()

    def request_stop(_signum: int, _frame: object) -> None:
        stop.set()

    previous: dict[signal.Signals, Any] = {}
    if threading.current_thread() is threading.main_thread():
        for number in SIGNALS:
            if not (number == signal.SIGINT and signal.getsignal(number) is signal.SIG_IGN):
                previous[number] = signal.signal(number, request_stop)
    try:
        yield stop
    except KeyboardInterrupt:
        stop.set()
    finally:
        for restored, handler in previous.items():
            signal.signal(restored, handler)
