"""``WorkerClient``: starts one worker process, loads models in it and hands out engines and streams. It composes
the parts of this package: the connection (process, pipe, reader and writer threads), the message router, the
supervisor, and the tables of requests, engines and streams."""

from __future__ import annotations

import itertools
import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from pathlib import Path
from typing import Any

from inference import protocol as p
from inference.client.connection import Process, WorkerConnection
from inference.client.dispatch import MessageRouter
from inference.client.engines import EngineRecord, RemoteEngine
from inference.client.health import WorkerHealth
from inference.client.interfaces import SupervisedStream
from inference.client.jobs import JobFeed
from inference.client.policies import WorkerPolicy
from inference.client.requests import PendingRequest, PendingRequests
from inference.client.streams import StreamTable
from inference.client.supervisor import Supervisor
from inference.contract import CancelToken, ProgressCallback
from inference.errors import CaptioneerError, WorkerError

log = logging.getLogger("captioneer.client")


class WorkerClient:
    """Starts and supervises one worker process. Use as a context manager or call ``close()``."""

    def __init__(
        self, policy: WorkerPolicy | None = None, on_status: Callable[[str], None] | None = None
    ) -> None:
        self._policy = policy or WorkerPolicy()
        self._on_status = on_status
        self._ids = itertools.count(1)
        self._lock = threading.Lock()
        self._closing = threading.Event()
        self._starting = False
        self._pending = PendingRequests()
        self._engines: dict[str, EngineRecord] = {}
        self._streams = StreamTable()
        self._health = WorkerHealth()
        self._job_feeds: dict[int, JobFeed] = {}  # streamed offline jobs, by request id
        router = MessageRouter(self._pending, self._streams, self._health, self._job_feeds)
        self._connection = WorkerConnection(
            self._policy, self._closing, router.route, self._pipe_ended, self._write_failed
        )
        self._supervisor = Supervisor(
            self._policy,
            self._connection,
            self._health,
            self._pending,
            self._streams,
            self,
            self._spawn,
            self._notify,
            self._closing,
        )

    # ------------------------------------------------------------------ lifetime
    def start(self) -> WorkerClient:
        with self._lock:
            if self._connection.process is not None or self._starting:
                return self
            self._starting = True
        try:
            self._supervisor.start_worker()
        finally:
            self._starting = False
        self._supervisor.start()
        return self

    def __enter__(self) -> WorkerClient:
        return self.start()

    def __exit__(self, *_exc: object) -> None:
        self.close()

    def close(self) -> None:
        with self._lock:
            if self._closing.is_set():
                return
            self._closing.set()
        self._supervisor.wake()
        self._connection.shut_down()
        self._supervisor.fail_all(WorkerError("the worker client was closed"))

    @property
    def policy(self) -> WorkerPolicy:
        return self._policy

    @property
    def pid(self) -> int | None:
        return self._connection.pid

    @property
    def worker_rss(self) -> int:
        """The worker's memory when it last answered a ping (bytes)."""
        return self._health.rss_bytes

    @property
    def gave_up(self) -> WorkerError | None:
        """Why this client stopped restarting its worker (it failed too often), or None while it is alive."""
        return self._supervisor.gave_up

    def revive(self, timeout: float | None = None) -> None:
        """After the restart limit tripped: try a fresh worker now instead of at the next scheduled revival (or
        wait for the attempt under way). Returns once a worker runs again; raises the give-up error when the
        attempt failed. Does nothing while the client has a worker."""
        self._supervisor.revive_now(timeout)

    @property
    def restarting(self) -> bool:
        """A dead worker is being replaced (requests made meanwhile wait for it)."""
        return self._supervisor.restarting

    @property
    def generation(self) -> int:
        """How many worker processes this client has started (1 + restarts)."""
        return self._connection.generation

    def next_id(self) -> int:
        return next(self._ids)

    def _spawn(self) -> tuple[Process, Any]:
        """Start a worker process and wait for its hello (the supervisor's way to get a new worker)."""
        return self._connection.spawn()

    # ------------------------------------------------------------------ sending
    def send_quietly(self, message: p.Message) -> bool:
        """Queue a message for the worker if one is up; False when none is (the supervisor handles the loss).

        Never blocks: a writer thread does the writing, so a frozen worker whose pipe is full stalls only that
        thread, never a request's timeout, a stream, or the supervisor's pings (which then go unanswered)."""
        return self._connection.send(message)

    def request(
        self,
        message: p.Message,
        *,
        progress: ProgressCallback | None = None,
        cancel: CancelToken | None = None,
        timeout: float | None = None,
    ) -> p.Message:
        """Send a request with a ``request_id`` and wait for its answer (raising its failure).

        While a restarted worker is being restored (models reloaded, streams reopened), callers wait: a
        request sent earlier would reach a worker that does not have its model yet.
        """
        request_id = int(getattr(message, "request_id"))  # noqa: B009 - every request type has one
        pending = self.submit(message, progress)
        deadline = None if timeout is None else time.monotonic() + timeout
        cancel_sent = False
        while True:
            try:
                return pending.future.result(timeout=0.1)
            except FutureTimeout:
                pass
            if cancel is not None and cancel.cancelled and not cancel_sent:
                self.send_quietly(p.CancelJob(request_id))
                cancel_sent = True
            if deadline is not None and time.monotonic() > deadline:
                self._pending.pop(request_id)
                raise WorkerError(f"the worker did not answer a {message.type} request within {timeout:g} s")

    def submit(self, message: p.Message, progress: ProgressCallback | None = None) -> PendingRequest:
        """Send a request with a ``request_id``; its answer (or failure) completes the returned future."""
        self._raise_if_dead()
        if self._supervisor.restarting and not self._supervisor.on_this_thread():
            self._wait_for_worker()
        request_id = int(getattr(message, "request_id"))  # noqa: B009 - every request type has one
        pending = PendingRequest(Future(), message, progress)
        self._pending.add(request_id, pending)
        if not self.send_quietly(message):
            self._wait_for_worker()
            if not self.send_quietly(message):
                raise self._supervisor.gave_up or WorkerError(
                    "the inference worker is not running", "restart Captioneer"
                )
        return pending

    def forget_request(self, request_id: int) -> None:
        """Stop waiting for a request's answer (its caller gave up on it)."""
        self._pending.pop(request_id)

    def open_job_feed(self, job_id: int) -> JobFeed:
        feed = JobFeed(job_id)
        with self._lock:
            self._job_feeds[job_id] = feed
        return feed

    def close_job_feed(self, job_id: int) -> None:
        with self._lock:
            self._job_feeds.pop(job_id, None)

    def _wait_for_worker(self, timeout: float = 120.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self._raise_if_dead()
            if self._connection.up and not self._supervisor.restarting:
                return
            time.sleep(0.05)

    def _raise_if_dead(self) -> None:
        # The supervisor's own requests load models and reopen streams in a worker it is reviving.
        if self._supervisor.gave_up is not None and not self._supervisor.on_this_thread():
            raise self._supervisor.gave_up
        if self._closing.is_set():
            raise WorkerError("the worker client was closed")

    # ------------------------------------------------------------------ models and streams
    def load(
        self,
        model_path: str | Path,
        family: str | None = None,
        session_options: dict[str, Any] | None = None,
        backend: str = "auto",
        threads: int | None = None,
        *,
        factory: str | None = None,
        progress: ProgressCallback | None = None,
        cancel: CancelToken | None = None,
        timeout: float | None = None,
    ) -> RemoteEngine:
        """Load a model in the worker (``factory``: "module:function" of a custom/test engine)."""
        engine_id = f"e{self.next_id()}"
        message = p.LoadModel(
            self.next_id(),
            engine_id,
            str(model_path),
            family,
            dict(session_options or {}),
            backend,
            threads,
            factory,
        )
        loaded = self.request(message, progress=progress, cancel=cancel, timeout=timeout)
        assert isinstance(loaded, p.Loaded)
        log.info(
            "loaded %s (%s) in %.1f s%s",
            model_path,
            loaded.family,
            loaded.load_s,
            f" on {loaded.native}" if loaded.native else "",
        )
        record = EngineRecord(message, loaded.family, loaded.caps)
        with self._lock:
            self._engines[engine_id] = record
        return RemoteEngine(self, engine_id, loaded.family, loaded.caps)

    def unload(self, engine_id: str) -> None:
        with self._lock:
            record = self._engines.pop(engine_id, None)
        for stream in self._streams.of_engine(engine_id):
            stream.cancel()
        if record is not None and self._supervisor.gave_up is None and not self._closing.is_set():
            self.request(p.UnloadModel(self.next_id(), engine_id))

    def open_stream(self, stream: SupervisedStream) -> None:
        self._streams.add(stream)
        self._open_remote(stream)

    def _open_remote(self, stream: SupervisedStream) -> None:
        try:
            opened = self.request(stream.open_message(self.next_id()))
        except CaptioneerError:
            self._streams.forget(stream.stream_id)
            raise
        assert isinstance(opened, p.Opened)
        stream.on_opened(opened.kind)

    def forget_stream(self, stream: SupervisedStream) -> None:
        self._streams.forget(stream.stream_id)

    # ------------------------------------------------------------------ restoring a new worker (supervisor thread)
    def reload_models(self) -> None:
        with self._lock:
            engines = list(self._engines.values())
        for record in engines:
            loaded = self.request(record.message)
            assert isinstance(loaded, p.Loaded)

    def reopen_streams(self) -> None:
        # Only streams an earlier worker had opened: one whose first opening is under way is opened by its own
        # request (retried by retry_in_flight when it was in flight), never twice.
        for stream in self._streams.all():
            if not stream.closed and stream.was_opened:
                self._open_remote(stream)

    def retry_in_flight(self, in_flight: list[PendingRequest]) -> None:
        for item in in_flight:
            if isinstance(item.message, p.LoadModel | p.OpenStream) and not item.future.done():
                try:
                    item.future.set_result(self.request(item.message, progress=item.progress))
                except CaptioneerError as exc:
                    item.future.set_exception(exc)

    # ------------------------------------------------------------------ the connection's calls
    def _pipe_ended(self) -> None:
        self._supervisor.worker_pipe_ended()

    def _write_failed(self) -> None:
        self._supervisor.wake()

    def _notify(self, text: str) -> None:
        if self._on_status is not None:
            try:
                self._on_status(text)
            except Exception:
                log.exception("on_status callback failed")
