"""The current worker process and its pipe: spawning it, a writer thread, and a reader thread that hands every
message it receives on. Each worker the client starts is a new generation."""

from __future__ import annotations

import logging
import multiprocessing
import os
import queue
import threading
import time
from collections.abc import Callable
from typing import Any

from inference import protocol as p
from inference.client.failures import describe_exit
from inference.client.policies import WorkerPolicy
from inference.errors import WorkerError
from inference.logsetup import WORKER_PROCESS_NAME

log = logging.getLogger("captioneer.client")

Process = multiprocessing.process.BaseProcess


# OpenBLAS's thread timeout as a power of two of CPU cycles (its default 28, ~0.1 s; 4 is its least).
OPENBLAS_THREAD_TIMEOUT = "4"


def prefer_sleeping_blas_threads() -> None:
    """Let numpy's OpenBLAS threads sleep as soon as a threaded call ends, in workers started from now on.

    By default they spin ~0.1 s after every call, on the cores the worker's ggml threads need right then: a
    Parakeet long-form window's encoder ran after the previous window's greedy loop, which keeps two BLAS
    threads (60 s of f32 long-form on 2 cores: 18.8 against 17.6 s; tests/bench/README.md, "Sleeping OpenBLAS
    threads in the worker"). OpenBLAS reads the variable when it loads, before the worker's first line runs
    (the spawn imports the main module first), so it goes in the environment the worker inherits; a user's own
    setting wins.
    """
    os.environ.setdefault("OPENBLAS_THREAD_TIMEOUT", OPENBLAS_THREAD_TIMEOUT)


class _PipeUsers:
    """A worker's pipe end, closed by whichever of its reader and writer threads is done with it last. Closing it
    under a writer blocked in a long write freed its descriptor for the next worker's pipe, and the rest of that
    write (``send_bytes`` loops over the descriptor's number) went into the new pipe: a truncated message that
    killed the new worker."""

    def __init__(self, conn: Any, users: int) -> None:
        self.conn = conn
        self._users = users
        self._lock = threading.Lock()

    def release(self) -> None:
        with self._lock:
            self._users -= 1
            last = self._users == 0
        if last:
            self.conn.close()


class WorkerConnection:
    """``on_message`` runs on the reader thread for every message; ``on_pipe_end`` when the current worker's
    pipe ends, ``on_write_error`` when writing to it fails (both: the supervisor finds out why)."""

    def __init__(
        self,
        policy: WorkerPolicy,
        closing: threading.Event,
        on_message: Callable[[p.Message], None],
        on_pipe_end: Callable[[], None],
        on_write_error: Callable[[], None],
    ) -> None:
        self._policy = policy
        self._closing = closing
        self._on_message = on_message
        self._on_pipe_end = on_pipe_end
        self._on_write_error = on_write_error
        self._lock = threading.Lock()
        self._process: Process | None = None
        self._conn: Any = None
        self._outbox: queue.SimpleQueue[bytes | bytearray | None] | None = (
            None  # frames for the current worker's writer
        )
        self._reader: threading.Thread | None = None
        self._generation = 0

    # ------------------------------------------------------------------ the current worker
    @property
    def process(self) -> Process | None:
        return self._process

    @property
    def pid(self) -> int | None:
        process = self._process
        return process.pid if process is not None else None

    @property
    def generation(self) -> int:
        """How many worker processes have been adopted (1 + restarts)."""
        return self._generation

    @property
    def up(self) -> bool:
        """A worker is adopted and its pipe open."""
        return self._conn is not None

    def join_reader(self, timeout: float) -> None:
        """Wait for the current reader to read what the worker said last (unless called on that thread)."""
        reader = self._reader
        if reader is not None and reader is not threading.current_thread():
            reader.join(timeout)

    # ------------------------------------------------------------------ starting and ending
    def spawn(self) -> tuple[Process, Any]:
        """Start a worker and wait for its hello. Takes no lock: a handshake may take a minute, and closing the
        window or cancelling a stream meanwhile must not wait for it."""
        from inference.worker import worker_main

        prefer_sleeping_blas_threads()
        context = multiprocessing.get_context("spawn")
        parent, child = context.Pipe(duplex=True)
        process = context.Process(
            target=worker_main, args=(child, logging.INFO), name=WORKER_PROCESS_NAME, daemon=True
        )
        process.start()
        child.close()
        deadline = time.monotonic() + self._policy.start_timeout_s
        while not parent.poll(0.1) and not self._closing.is_set() and time.monotonic() < deadline:
            pass
        if self._closing.is_set():
            process.kill()
            process.join(5)
            raise WorkerError("the worker client was closed")
        if not parent.poll(0):
            process.kill()
            process.join(5)
            raise WorkerError(
                f"the inference worker did not start within {self._policy.start_timeout_s:g} s "
                f"({describe_exit(process.exitcode)})",
                "check the log; reinstall Captioneer if it keeps failing",
            )
        try:
            p.check_version(p.decode(parent.recv_bytes()))
        except (EOFError, OSError) as exc:
            process.join(5)
            raise WorkerError(
                f"the inference worker failed to start ({describe_exit(process.exitcode)})",
                "run `captioneer transcribe --verbose` to see why",
            ) from exc
        return process, parent

    def adopt(self, process: Process, conn: Any) -> None:
        """Make a started worker the current one and start its threads; a client closed meanwhile stops it."""
        outbox: queue.SimpleQueue[bytes | bytearray | None] = queue.SimpleQueue()
        with self._lock:
            adopted = not self._closing.is_set()
            if adopted:
                self._process, self._conn, self._outbox = process, conn, outbox
                self._generation += 1
                generation = self._generation
        if not adopted:
            conn.close()
            process.kill()
            process.join(5)
            raise WorkerError("the worker client was closed")
        users = _PipeUsers(conn, 2)
        threading.Thread(
            target=self._write, args=(users, outbox), name="captioneer-writer", daemon=True
        ).start()
        reader = threading.Thread(
            target=self._read, args=(users, generation), name="captioneer-reader", daemon=True
        )
        self._reader = reader
        reader.start()

    def retire(self) -> None:
        """Forget the current worker's process (killed or ended by now) and pipe: its writer thread ends, and the
        last of its two threads to end closes the pipe."""
        with self._lock:
            if self._outbox is not None:
                self._outbox.put(None)
            self._conn, self._process, self._outbox = None, None, None

    def kill(self) -> None:
        """Kill the current worker process, if any (its pipe ends; retire it afterwards)."""
        process = self._process
        if process is not None:
            process.kill()

    def shut_down(self, timeout: float = 5.0) -> None:
        """Ask the worker to exit, kill it if it does not, then retire it."""
        process = self._process
        if self._conn is not None:
            self.send(p.Shutdown())
        if process is not None:
            process.join(timeout=timeout)
            if process.is_alive():
                process.kill()
                process.join(timeout=timeout)
        self.retire()

    # ------------------------------------------------------------------ sending and receiving
    def send(self, message: p.Message) -> bool:
        """Queue a message for the worker if one is up; False when none is. Never blocks: a frozen worker whose
        pipe is full stalls only the writer thread."""
        outbox = self._outbox
        if outbox is None or self._conn is None:
            return False
        outbox.put(p.encode(message))
        return True

    def _write(self, users: _PipeUsers, outbox: queue.SimpleQueue[bytes | bytearray | None]) -> None:
        """Writer thread of one worker: sends queued frames in order until told to stop or the pipe breaks."""
        try:
            while True:
                frame = outbox.get()
                if frame is None:
                    return
                try:
                    users.conn.send_bytes(frame)
                except (OSError, ValueError, TypeError):  # TypeError: the pipe was closed under a long write
                    self._on_write_error()
                    return
        finally:
            users.release()

    def _read(self, users: _PipeUsers, generation: int) -> None:
        """Reader thread of one worker: every message goes to ``on_message`` until the pipe ends."""
        try:
            while True:
                try:
                    frame = users.conn.recv_bytes()
                except (EOFError, OSError):
                    break
                try:
                    self._on_message(p.decode(frame))
                except Exception:
                    log.exception("cannot handle a message from the worker")
        finally:
            users.release()
        if generation == self._generation:
            self._on_pipe_end()
