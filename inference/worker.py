"""The inference worker: a spawned process that owns the engines, so a native crash never takes the app down.

The **reader** thread answers pings at once (with how long the current operation has been busy, so the client can
tell a hang from a long job) and sets cancel flags; the **executor** runs loads, jobs and stream pushes in arrival
order, so an engine never runs two operations at once. One engine serves up to
``Capabilities.streams_per_engine`` streams, each with its own state (docs/architecture.md §2). Started with
``spawn`` (Qt and fork do not mix) by :mod:`inference.client`.
"""

from __future__ import annotations

import contextlib
import logging
import os
import queue
import signal
import sys
import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import numpy as np

from inference import protocol as p
from inference.contract import (
    CancelToken,
    Engine,
    Flushable,
    JobControl,
    OfflineJob,
    Progress,
    Resumable,
    Stream,
    event_to_json,
)
from inference.errors import Cancelled, CaptioneerError, UsageError, error_kind
from inference.logsetup import WORKER_PROCESS_NAME

log = logging.getLogger("captioneer.worker")


def failure(exc: BaseException, request_id: int | None = None, stream_id: str | None = None) -> p.Failed:
    kind = error_kind(exc)
    if isinstance(exc, CaptioneerError):
        return p.Failed(kind, exc.message, exc.fix, request_id, stream_id, exc.exit_code)
    if kind == "out_of_memory":
        return p.Failed(
            kind,
            "the worker ran out of memory",
            "use a smaller model or weight type (q8_0, q4_k)",
            request_id,
            stream_id,
        )
    detail = "".join(traceback.format_exception_only(type(exc), exc)).strip()
    return p.Failed(
        kind,
        f"unexpected error in the worker: {detail}",
        "report this as a bug with the log",
        request_id,
        stream_id,
    )


def resident_bytes() -> int:
    try:
        pages = int(Path("/proc/self/statm").read_text().split()[1])
        return pages * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


@dataclass
class _StreamSlot:
    stream: Stream
    engine_id: str
    cancelled: bool = False


@dataclass
class _JobSlot:
    job: OfflineJob
    passes_left: int


class Worker:
    def __init__(self, conn: Connection) -> None:
        self.conn = conn
        self._send_lock = threading.Lock()
        self._queue: queue.Queue[p.Message | None] = queue.Queue()
        self.engines: dict[str, Engine] = {}
        self.streams: dict[str, _StreamSlot] = {}
        self._jobs: dict[int, CancelToken] = {}
        self.offline_jobs: dict[int, _JobSlot] = {}  # streamed offline jobs by request id
        self._busy_since: float | None = None  # reset by progress, so long jobs that advance are not hangs

    # ------------------------------------------------------------------ threads
    def run(self) -> None:
        self.send(p.Hello(pid=os.getpid()))
        executor = threading.Thread(target=self._execute, name="captioneer-executor", daemon=True)
        executor.start()
        try:
            while True:
                try:
                    message = p.decode(self.conn.recv_bytes())
                except (EOFError, OSError):
                    break  # the client is gone: nothing left to serve
                if not self._handle_now(message):
                    break
        finally:
            self._queue.put(None)
            executor.join(timeout=5)

    def _handle_now(self, message: p.Message) -> bool:
        """Reader-thread handling; returns False to stop."""
        if isinstance(message, p.Ping):
            busy = 0.0 if self._busy_since is None else time.monotonic() - self._busy_since
            self.send(p.Pong(message.nonce, busy, resident_bytes()))
        elif isinstance(message, p.CancelJob):
            token = self._jobs.get(message.request_id)
            if token is not None:
                token.cancel()
            if message.request_id in self.offline_jobs:
                self._queue.put(message)  # a job waiting for audio that will not come ends in order
        elif isinstance(message, p.CancelStream):
            slot = self.streams.get(message.stream_id)
            if slot is not None:
                slot.cancelled = True  # queued pushes are skipped; the executor closes it in order
            self._queue.put(message)
        elif isinstance(message, p.Shutdown):
            return False
        else:
            if isinstance(message, p.Transcribe | p.LoadModel | p.OpenJob):
                self._jobs[message.request_id] = CancelToken()
            self._queue.put(message)
        return True

    def _execute(self) -> None:
        while True:
            message = self._queue.get()
            if message is None:
                return
            self._busy_since = time.monotonic()
            try:
                self._dispatch(message)
            except BaseException as exc:  # noqa: BLE001 - every failure goes back to the client
                log.debug("request failed", exc_info=True)
                request_id = getattr(message, "request_id", getattr(message, "job_id", None))
                if isinstance(message, p.OpenJob | p.JobAudio | p.JobPassEnd):
                    self._end_job(message.request_id if isinstance(message, p.OpenJob) else message.job_id)
                self.send(failure(exc, request_id, getattr(message, "stream_id", None)))
            finally:
                self._busy_since = None

    def send(self, message: p.Message) -> None:
        frame = p.encode(message)
        # OSError/ValueError: the client went away; the reader thread notices and ends the process.
        with self._send_lock, contextlib.suppress(OSError, ValueError):
            self.conn.send_bytes(frame)

    def _progress(self, request_id: int) -> Any:
        def report(event: Progress) -> None:
            self._busy_since = time.monotonic()
            self.send(p.EventMessage.of(event, request_id=request_id))

        return report

    # ------------------------------------------------------------------ requests
    def _dispatch(self, message: p.Message) -> None:
        if isinstance(message, p.PushAudio):
            self._push(message)
        elif isinstance(message, p.LoadModel):
            self._load(message)
        elif isinstance(message, p.Transcribe):
            self._transcribe(message)
        elif isinstance(message, p.OpenJob):
            self._open_job(message)
        elif isinstance(message, p.JobAudio):
            self._job_audio(message)
        elif isinstance(message, p.JobPassEnd):
            self._job_pass_end(message)
        elif isinstance(message, p.CancelJob):
            if message.request_id in self.offline_jobs:
                self._end_job(message.request_id)
                raise Cancelled("the transcription was cancelled")
        elif isinstance(message, p.OpenStream):
            self._open_stream(message)
        elif isinstance(message, p.FinishStream):
            slot = self._slot(message.stream_id)
            started = time.perf_counter()
            del self.streams[message.stream_id]
            if isinstance(slot.stream, Flushable):  # the last segment's events, before the result
                for event in slot.stream.flush():
                    self.send(p.EventMessage.of(event, stream_id=message.stream_id))
            transcript = slot.stream.finish()
            self.send(p.Result(message.request_id, transcript.to_json(), time.perf_counter() - started))
        elif isinstance(message, p.CancelStream):
            cancelled = self.streams.pop(message.stream_id, None)
            if cancelled is not None:
                cancelled.stream.cancel()
        elif isinstance(message, p.UnloadModel):
            for stream_id in [s for s, slot in self.streams.items() if slot.engine_id == message.engine_id]:
                self.streams.pop(stream_id).stream.cancel()
            engine = self.engines.pop(message.engine_id, None)
            if engine is not None:
                engine.close()
            self.send(p.Result(message.request_id))
        else:
            raise UsageError(f"the worker does not accept {message.type!r} messages here")

    def _load(self, message: p.LoadModel) -> None:
        from inference.engine import EngineRequest, import_factory
        from inference.registry import FamilyRegistry

        started = time.perf_counter()
        report = self._progress(message.request_id)
        report(Progress("load", 0, None, f"loading {message.model_path}"))
        path = Path(message.model_path)
        if message.factory:
            family = message.family or "custom"
            factory = import_factory(message.factory, family)
        else:
            # Built here, in the worker: CAPTIONEER_FAMILY_PATH came with the environment of the spawn.
            families = FamilyRegistry.from_environment()
            family = message.family or families.detect_family(path)
            factory = import_factory(families.get(family).engine_factory, family)
        control = JobControl(report, self._jobs.get(message.request_id), stage="load")
        request = EngineRequest(
            path, family, dict(message.session_options), message.backend, message.threads, control
        )
        try:
            engine = factory(request)
        finally:
            self._jobs.pop(message.request_id, None)
        old = self.engines.pop(message.engine_id, None)
        if old is not None:
            old.close()
        self.engines[message.engine_id] = engine
        report(Progress("load", 1, 1, "loaded"))
        self.send(
            p.Loaded(
                message.request_id,
                message.engine_id,
                engine.family,
                engine.capabilities.to_json(),
                time.perf_counter() - started,
                native_build(),
            )
        )

    def _engine(self, engine_id: str) -> Engine:
        engine = self.engines.get(engine_id)
        if engine is None:
            raise UsageError(f"no model is loaded as {engine_id!r} in the worker", "load the model first")
        return engine

    def _slot(self, stream_id: str) -> _StreamSlot:
        slot = self.streams.get(stream_id)
        if slot is None:
            raise UsageError(f"stream {stream_id!r} is not open (finished, cancelled or never opened)")
        return slot

    def _transcribe(self, message: p.Transcribe) -> None:
        token = self._jobs.get(message.request_id) or CancelToken()
        try:
            engine = self._engine(message.engine_id)
            started = time.perf_counter()
            assert message.pcm is not None
            transcript = engine.transcribe(
                message.pcm, progress=self._progress(message.request_id), cancel=token, **message.options
            )
            self.send(p.Result(message.request_id, transcript.to_json(), time.perf_counter() - started))
        finally:
            self._jobs.pop(message.request_id, None)

    def _open_job(self, message: p.OpenJob) -> None:
        from inference.offline_jobs import open_offline_job

        engine = self._engine(message.engine_id)
        token = self._jobs.get(message.request_id) or CancelToken()
        self._jobs[message.request_id] = token
        job = open_offline_job(
            engine, progress=self._progress(message.request_id), cancel=token, **message.options
        )
        self.offline_jobs[message.request_id] = _JobSlot(job, job.passes)
        self.send(p.JobOpened(message.request_id, job.passes))

    def _job_audio(self, message: p.JobAudio) -> None:
        slot = self.offline_jobs.get(message.job_id)
        if slot is None:
            return  # a job that failed or was cancelled drops the blocks still on their way
        assert message.pcm is not None
        slot.job.feed(message.pcm)
        self.send(p.JobTook(message.job_id, message.seq))

    def _job_pass_end(self, message: p.JobPassEnd) -> None:
        slot = self.offline_jobs.get(message.job_id)
        if slot is None:
            return
        slot.job.end_pass()
        slot.passes_left -= 1
        if slot.passes_left > 0:
            return
        started = time.perf_counter()
        transcript = slot.job.finish()
        self._end_job(message.job_id)
        self.send(p.Result(message.job_id, transcript.to_json(), time.perf_counter() - started))

    def _end_job(self, job_id: int) -> None:
        self.offline_jobs.pop(job_id, None)
        self._jobs.pop(job_id, None)

    def _open_stream(self, message: p.OpenStream) -> None:
        engine = self._engine(message.engine_id)
        if message.stream_id in self.streams:
            raise UsageError(f"stream {message.stream_id!r} is already open")
        open_on_engine = sum(1 for slot in self.streams.values() if slot.engine_id == message.engine_id)
        if open_on_engine >= engine.capabilities.streams_per_engine:
            raise UsageError(
                f"{open_on_engine} streams are already open on this model (its limit)",
                "finish a stream first, or load the model a second time",
            )
        stream: Stream
        if message.mode not in ("auto", "native", "segmented"):
            raise UsageError(f"unknown stream mode {message.mode!r}", "use auto, native or segmented")
        if message.mode == "native" and not engine.capabilities.streaming:
            raise UsageError(
                f"the {engine.family} engine has no live path of its own",
                "use stream mode auto or segmented (VAD segments)",
            )
        gated = engine.capabilities.speech_gate and message.mode == "auto"
        native = engine.capabilities.streaming and message.mode != "segmented" and not gated
        if native:
            if message.segmenter:
                raise UsageError("segmenter options apply to VAD-segmented streams", "add mode=segmented")
            stream, kind = engine.open_stream(**message.options), "native"
        else:
            from inference.streaming import open_vad_stream

            stream = open_vad_stream(engine, gated, dict(message.options), dict(message.segmenter))
            kind = "segmented"
        if message.resume is not None:
            if not isinstance(stream, Resumable):
                raise UsageError(
                    f"a {kind} {engine.family} stream cannot continue another one", "open a new stream"
                )
            context = message.pcm if message.pcm is not None else np.zeros(0, np.float32)
            stream.resume(context, message.resume)
        self.streams[message.stream_id] = _StreamSlot(stream, message.engine_id)
        self.send(p.Opened(message.request_id, message.stream_id, kind))

    def _push(self, message: p.PushAudio) -> None:
        slot = self.streams.get(message.stream_id)
        assert message.pcm is not None
        if slot is None or slot.cancelled:
            return  # cancelled or failed streams drop their queued audio without noise
        self.send(p.Decoding(message.stream_id, message.seq))
        started = time.perf_counter()
        try:
            events = slot.stream.push(message.pcm)
        except BaseException:
            self.streams.pop(message.stream_id, None)  # a stream that failed once is not trusted again
            raise
        resume = slot.stream.resume_point().to_json() if isinstance(slot.stream, Resumable) else None
        self.send(
            p.Pushed(
                message.stream_id,
                message.seq,
                int(message.pcm.size),
                time.perf_counter() - started,
                [event_to_json(e) for e in events],
                resume,
            )
        )


def native_build() -> str:
    """ggml's version and CPU backend variant when this process loaded ggml (not for engines that do not)."""
    if "inference.native.lib" not in sys.modules:
        return ""
    from inference.native.lib import load_ggml_libraries  # already loaded: cached

    try:
        libs = load_ggml_libraries()
    except CaptioneerError:
        return ""
    variant = "libggml-cpu (a single build)" if libs.cpu_variant == "single" else libs.cpu_variant
    return f"ggml {libs.ggml_version}, CPU backend {variant}"


WORKER_STDERR_FORMAT = f"{WORKER_PROCESS_NAME} %(levelname)s %(name)s: %(message)s"


class PipeLogHandler(logging.Handler):
    """Sends the worker's log records to the client, which writes them to the user's log with its own."""

    def __init__(self, send: Callable[[p.Message], None], level: int) -> None:
        super().__init__(level)
        self._send = send

    def emit(self, record: logging.LogRecord) -> None:
        try:
            line = p.LogLine(record.levelno, record.name, self.format(record), record.created, os.getpid())
            self._send(line)
        except Exception:  # noqa: BLE001 - logging must never take the worker down
            self.handleError(record)


def worker_main(conn: Connection, log_level: int = logging.INFO) -> None:
    """Entry point of the spawned process."""
    # Ctrl-C in a terminal reaches the whole process group: the client decides what it means (finish a
    # stream, cancel a job), so the worker must not die of it halfway.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    worker = Worker(conn)
    root = logging.getLogger()
    root.setLevel(log_level)
    # Warnings still go to the worker's stderr, a terminal user's as before; every record from log_level up goes
    # to the client's log too (nothing logs before run() says hello).
    terminal = logging.StreamHandler()
    terminal.setLevel(logging.WARNING)
    terminal.setFormatter(logging.Formatter(WORKER_STDERR_FORMAT))
    root.addHandler(terminal)
    root.addHandler(PipeLogHandler(worker.send, log_level))
    try:
        worker.run()
    finally:
        conn.close()
