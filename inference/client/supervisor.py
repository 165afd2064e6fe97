"""The supervisor thread: notices a dead, frozen or hung worker, fails what it was doing, starts a new one and
has it restored. Past ``WorkerPolicy.max_restarts`` failures within ``restart_window_s`` it gives up: the client
is *down* (requests fail at once, streams hold their audio) until a *revival* — a fresh worker started after
each of ``revive_after_s``'s waits, that loads every model again — succeeds; then the restart count starts
afresh and the open streams are reopened (docs/architecture.md §2.2)."""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any

from inference import protocol as p
from inference.client.connection import Process, WorkerConnection
from inference.client.failures import describe_exit, died_of_itself
from inference.client.health import WorkerHealth
from inference.client.interfaces import StreamDirectory, WorkerRestorer
from inference.client.policies import WorkerPolicy
from inference.client.requests import PendingRequest, PendingRequests
from inference.errors import CaptioneerError, WorkerError

log = logging.getLogger("captioneer.client")


class Supervisor:
    def __init__(
        self,
        policy: WorkerPolicy,
        connection: WorkerConnection,
        health: WorkerHealth,
        pending: PendingRequests,
        streams: StreamDirectory,
        restorer: WorkerRestorer,
        spawn: Callable[[], tuple[Process, Any]],
        notify: Callable[[str], None],
        closing: threading.Event,
    ) -> None:
        """``spawn`` starts a worker and waits for its hello; ``restorer`` brings a new one up to date."""
        self._policy = policy
        self._connection = connection
        self._health = health
        self._pending = pending
        self._streams = streams
        self._restorer = restorer
        self._spawn = spawn
        self._notify = notify
        self._closing = closing
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None
        self._crashes: deque[float] = deque()
        self._restarting = False
        self._gave_up: WorkerError | None = None
        self._down_since = 0.0
        self._failed_revivals = 0
        self._next_revival: float | None = None  # monotonic time of the next attempt while down
        self._revival_wanted = False  # someone asked for an attempt now (``revive_now``)
        self._revival_error: CaptioneerError | None = None  # why the last attempt failed
        self._attempts = threading.Condition()
        self._attempts_done = 0

    # ------------------------------------------------------------------ state
    @property
    def restarting(self) -> bool:
        """A dead worker is being replaced."""
        return self._restarting

    @property
    def gave_up(self) -> WorkerError | None:
        """Why the supervisor stopped restarting the worker, or None."""
        return self._gave_up

    def on_this_thread(self) -> bool:
        return threading.current_thread() is self._thread

    # ------------------------------------------------------------------ lifetime
    def start_worker(self) -> None:
        """Spawn a worker and make it the current one."""
        process, conn = self._spawn()
        self._health.reset()
        self._connection.adopt(process, conn)

    def start(self) -> None:
        self._thread = threading.Thread(target=self._watch, name="captioneer-supervisor", daemon=True)
        self._thread.start()

    def wake(self) -> None:
        """Look at the worker now (its pipe ended or broke, or the client is closing)."""
        self._wake.set()

    def worker_pipe_ended(self) -> None:
        """The current worker's pipe ended (reader thread)."""
        if self._restarting:  # a worker died while being restored: unblock the restore
            for item in self._pending.take_all():
                if not item.future.done():
                    item.future.set_exception(WorkerError("the restarted worker died as well"))
        self._wake.set()  # the supervisor finds out why and restarts

    def fail_all(self, error: CaptioneerError) -> None:
        """Fail every request in flight and every open stream (the client closes or gave up)."""
        pending = self._pending.take_all()
        streams = self._streams.take_all()
        for item in pending:
            if not item.future.done():
                item.future.set_exception(error)
        for stream in streams:
            if not stream.closed:
                stream.on_failed(error, "worker_crashed")

    # ------------------------------------------------------------------ watching
    def _watch(self) -> None:
        nonce = 0
        while not self._closing.is_set():
            self._wake.wait(self._policy.ping_interval_s)
            self._wake.clear()
            if self._closing.is_set():
                return
            if self._gave_up is not None:
                if self._revival_wanted or (
                    self._next_revival is not None and time.monotonic() >= self._next_revival
                ):
                    self._revive()
                continue
            process = self._connection.process
            if process is None:
                continue
            reason = None
            self_inflicted = False
            if not process.is_alive():
                process.join(1)
                reason = describe_exit(process.exitcode, self._health.rss_bytes)
                self_inflicted = died_of_itself(process.exitcode)
            else:
                nonce += 1
                self._connection.send(p.Ping(nonce))
                silent = self._health.silent_s
                busy = self._health.busy_s
                if silent > self._policy.ping_timeout_s:
                    reason = f"the inference worker stopped answering for {silent:.0f} s"
                elif busy > self._busy_limit():
                    reason = f"the inference worker was stuck on one operation for {busy:.0f} s"
                    self_inflicted = True  # it answers pings, so the process runs: the operation hangs
                if reason is not None:
                    process.kill()
                    process.join(5)
            if reason is not None:
                self._recover(reason, self_inflicted)

    def _busy_limit(self) -> float:
        return self._policy.load_timeout_s if self._pending.loading() else self._policy.hang_timeout_s

    # ------------------------------------------------------------------ recovering
    def _recover(self, reason: str, self_inflicted: bool = False) -> None:
        """Fail what was in flight, then restart (with backoff) and restore engines and streams."""
        log.warning("%s", reason)
        lost_at = time.monotonic()
        self._notify(reason)
        # What the dead worker said last (which push it was decoding, which it answered) is read before its
        # streams are judged; its pipe ends once the process is gone.
        self._connection.join_reader(2.0)
        self._wake.clear()  # the reader's wake-up at the pipe's end is this recovery
        self._restarting = True
        self._connection.retire()
        pending = self._pending.take_all()
        streams = self._streams.all()
        for item in pending:
            if not isinstance(item.message, p.LoadModel | p.OpenStream):
                item.future.set_exception(
                    WorkerError(
                        f"{reason}; the request was lost",
                        "run it again; if it keeps failing, try another model",
                    )
                )
        for stream in streams:
            stream.on_worker_lost(reason, self_inflicted)
        try:
            while not self._closing.is_set():
                now = time.monotonic()
                self._crashes.append(now)
                while self._crashes and now - self._crashes[0] > self._policy.restart_window_s:
                    self._crashes.popleft()
                if len(self._crashes) > self._policy.max_restarts:
                    self._give_up(
                        WorkerError(
                            f"{reason}; the worker failed {len(self._crashes)} times in "
                            f"{self._policy.restart_window_s:.0f} s, so Captioneer stopped restarting it",
                            "check the log, then try another model, weight type or backend",
                        ),
                        pending,
                    )
                    return
                backoff = self._policy.backoff_s
                delay = backoff[min(len(self._crashes) - 1, len(backoff) - 1)]
                if delay and self._wake.wait(delay) and self._closing.is_set():
                    return
                self._wake.clear()
                try:
                    self.start_worker()
                    self._restorer.reload_models()
                    self._restorer.reopen_streams()
                    self._restorer.retry_in_flight(pending)
                except CaptioneerError as exc:  # the new worker failed too: that counts as another failure
                    reason = str(exc)
                    log.warning("restarting the worker failed: %s", reason)
                    self._connection.kill()
                    self._connection.retire()
                    continue
                took = time.monotonic() - lost_at
                # Nobody pinged during the restore: the silence since the spawn is not the worker's.
                self._health.reset(busy=False)
                self._notify(f"the inference worker was restarted in {took:.1f} s")
                for stream in streams:
                    stream.on_worker_restored(took)
                return
        finally:
            self._restarting = False

    def _give_up(self, error: WorkerError, pending: list[PendingRequest]) -> None:
        """Stop restarting: fail every request, keep the streams open (holding audio) and schedule a revival."""
        self._gave_up = error
        self._down_since = time.monotonic()
        self._failed_revivals = 0
        self._revival_error = None
        revive_in = self._revival_wait()
        self._next_revival = None if revive_in is None else self._down_since + revive_in
        self._notify(str(error))
        for item in pending + self._pending.take_all():
            if not item.future.done():
                item.future.set_exception(error)
        for stream in self._streams.all():
            stream.on_given_up(error, revive_in)

    # ------------------------------------------------------------------ reviving
    def _revival_wait(self) -> float | None:
        waits = self._policy.revive_after_s
        return waits[min(self._failed_revivals, len(waits) - 1)] if waits else None

    def revive_now(self, timeout: float | None = None) -> None:
        """Ask for a revival attempt now (or wait for the one under way); raise the give-up error if the client
        is still down afterwards."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._attempts:
            if self._gave_up is None:
                return
            seen = self._attempts_done
            self._revival_wanted = True
            self._wake.set()
            while self._attempts_done == seen and not self._closing.is_set():
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    raise WorkerError(
                        "a fresh inference worker did not start in time", "try again in a moment"
                    )
                self._attempts.wait(0.5 if remaining is None else min(0.5, remaining))
        if self._closing.is_set():
            raise WorkerError("the worker client was closed")
        gave_up, failed = self._gave_up, self._revival_error
        if gave_up is not None:
            if failed is None:
                raise gave_up
            raise WorkerError(f"{gave_up.message}; a fresh worker failed as well: {failed}", gave_up.fix)

    def _revive(self) -> None:
        """One revival attempt: a fresh worker that loads every model. On success the client runs again with a
        fresh restart count and reopens the open streams (a failure there is an ordinary death); on failure it
        stays down until the next, longer wait."""
        self._revival_wanted = False
        self._restarting = True
        try:
            try:
                self.start_worker()
                self._restorer.reload_models()
            except CaptioneerError as exc:
                self._connection.kill()
                self._connection.retire()
                self._revival_error = exc
                self._failed_revivals += 1
                wait = self._revival_wait()
                self._next_revival = None if wait is None else time.monotonic() + wait
                log.warning("reviving the worker failed: %s", exc)
                later = f"; the next try is in {wait:g} s" if wait is not None else ""
                self._notify(f"a fresh inference worker failed as well ({exc}){later}")
                return
            down_s = time.monotonic() - self._down_since
            self._crashes.clear()
            self._gave_up = self._revival_error = None
            self._next_revival = None
            # Nobody pinged during the load: the silence since the spawn is not the worker's.
            self._health.reset(busy=False)
            self._notify(f"the inference worker was restarted: revived after {down_s:.1f} s without one")
            for stream in self._streams.all():
                stream.on_worker_revived(down_s)
            try:
                self._restorer.reopen_streams()
            except CaptioneerError as exc:  # counted as any death: the watch finds the process gone
                log.warning("the revived worker could not reopen the streams: %s", exc)
                self._connection.kill()
        finally:
            self._restarting = False
            with self._attempts:
                self._attempts_done += 1
                self._attempts.notify_all()
