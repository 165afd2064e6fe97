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

SIGNALS = (signal.SIGINT, signal.SIGTERM)  # Ctrl-C, and ``kill PID`` from a script or a background job


@contextlib.contextmanager
def finish_on_signals() -> Iterator[threading.Event]:
    """An event set by SIGINT or SIGTERM while the block runs. Off the main thread (where Python cannot install
    handlers) the event is never set and the signals behave as before; an ignored SIGINT stays ignored."""
    stop = threading.Event()
    if threading.current_thread() is not threading.main_thread():
        yield stop
        return

    def request_stop(_signum: int, _frame: object) -> None:
        stop.set()

    # A SIGINT ignored from the start (a background job's) stays ignored, as Python itself leaves it.
    numbers = [n for n in SIGNALS if not (n == signal.SIGINT and signal.getsignal(n) is signal.SIG_IGN)]
    previous = {number: signal.signal(number, request_stop) for number in numbers}
    try:
        yield stop
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)
