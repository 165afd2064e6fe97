"""The live CLI's stdin reader and Ctrl-C: a process-wide SIGINT may land on any thread."""

from __future__ import annotations

import io
import os
import signal
import threading
import time

import pytest

from inference.cli import _read_some

pytestmark = pytest.mark.skipif(os.name != "posix", reason="POSIX signals and select")


def test_ctrl_c_delivered_to_another_thread_still_interrupts_a_quiet_pipe() -> None:
    """The kernel hands a process-directed signal to any thread that does not block it. When that is not the
    main thread, a read() blocked in the main thread is not interrupted: the reader must wake up by itself to
    let Python raise KeyboardInterrupt (it used to wait for the next byte, forever on an open, quiet pipe)."""
    read_end, write_end = os.pipe()
    stdin = os.fdopen(read_end, "rb")
    interrupted = threading.Event()

    def other_thread() -> None:
        time.sleep(0.3)
        signal.pthread_kill(threading.get_ident(), signal.SIGINT)  # the C handler runs here, not in main
        if not interrupted.wait(4.0):
            os.write(write_end, b"late")  # unblocks a reader that missed the interrupt: the test cannot hang

    helper = threading.Thread(target=other_thread, daemon=True)
    # Python's own handler, whatever this process inherited (a background job starts with SIGINT ignored).
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    started = time.monotonic()
    helper.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            _read_some(stdin, 4096)
        interrupted.set()
        assert time.monotonic() - started < 2.0, "the interrupt waited for data"
    finally:
        helper.join()
        signal.signal(signal.SIGINT, previous)
        stdin.close()
        os.close(write_end)


def test_data_and_end_of_input_come_through() -> None:
    read_end, write_end = os.pipe()
    with os.fdopen(read_end, "rb") as stdin:
        os.write(write_end, b"abc")
        assert _read_some(stdin, 4096) == b"abc"  # returns early with what the pipe has
        os.close(write_end)
        assert _read_some(stdin, 4096) == b""
    assert _read_some(io.BytesIO(b"xyz"), 2) == b"xy"  # streams without a descriptor read as before
