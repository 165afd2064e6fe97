"""The only door into the inference worker: the CLI, the GUI and the server all use this client.

``WorkerClient`` starts the worker (a ``spawn`` child), loads models in it and hands out ``RemoteEngine`` and
``RemoteStream`` objects that look like a local ``contract.Engine`` / ``Stream``. A supervisor thread restarts a
dead or hung worker and resumes its streams by replaying audio since their last commit (``inference.replay``);
each stream's ``BacklogPolicy`` bounds the audio not yet processed (docs/architecture.md §2.2, §4). Messages go
out through a writer thread, so a frozen worker with a full pipe blocks no caller.

Callbacks (``on_events``, progress) run on the client's reader thread: hand events to your own thread and never
block in them.
"""

from __future__ import annotations

import itertools
import logging
import multiprocessing
import queue
import signal
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from inference import protocol as p
from inference.continuity import StreamContinuity
from inference.contract import (
    SAMPLE_RATE,
    CancelToken,
    Capabilities,
    ErrorEvent,
    Progress,
    ProgressCallback,
    Stats,
    StreamEvent,
    Timing,
    Transcript,
    event_from_json,
)
from inference.errors import CaptioneerError, UsageError, WorkerError, error_class
from inference.job_feed import JobFeed, run_job
from inference.replay import Replay, ReplayBuffer

log = logging.getLogger("captioneer.client")

EventsCallback = Callable[[list[StreamEvent]], None]
REPLAY_LIMIT_S = 150.0  # audio kept per live stream for a worker restart (an R2T2 window, a long last word)


@dataclass(frozen=True)
class WorkerPolicy:
    """Supervision limits. Times in seconds."""

    start_timeout_s: float = 60.0  # spawn + imports
    ping_interval_s: float = 1.0
    ping_timeout_s: float = 15.0  # no pong for this long: the process is frozen
    hang_timeout_s: float = 120.0  # one push/span busy this long without progress: hung
    load_timeout_s: float = 3600.0  # loads may convert gigabytes; they report progress when they can
    max_restarts: int = 3  # within restart_window_s; one more failure stops the client
    restart_window_s: float = 300.0
    backoff_s: tuple[float, ...] = (0.0, 1.0, 4.0)  # before the 1st, 2nd, 3rd... restart


@dataclass(frozen=True)
class BacklogPolicy:
    """What a stream does when audio arrives faster than the worker transcribes it."""

    mode: str = "coalesce"  # "coalesce" | "block" | "refuse"
    max_in_flight: int = 2  # pushes handed to the worker and not yet answered
    max_backlog_s: float = 30.0  # audio waiting (in flight + queued) beyond which the mode applies

    def __post_init__(self) -> None:
        if self.mode not in ("coalesce", "block", "refuse"):
            raise UsageError(f"unknown backlog policy {self.mode!r}", "use coalesce, block or refuse")
        if self.max_in_flight < 1 or self.max_backlog_s <= 0:
            raise UsageError("max_in_flight must be >= 1 and max_backlog_s > 0")


class BacklogFull(CaptioneerError):
    """A push was refused because the stream's backlog is at its limit; the chunk was not taken."""

    exit_code = 1


def error_from_failure(failed: p.Failed) -> CaptioneerError:
    if failed.kind == "out_of_memory":
        return WorkerError(f"out of memory: {failed.message}", failed.fix)
    return error_class(failed.kind)(failed.message, failed.fix)


# Deaths the worker brings on itself: what it was decoding may be the cause. SIGKILL, SIGTERM and a frozen
# process come from outside (the user, the OOM killer, a supervisor on a starved machine), never from audio.
_SELF_INFLICTED = {signal.SIGSEGV, signal.SIGBUS, signal.SIGILL, signal.SIGABRT, signal.SIGFPE, signal.SIGSYS}


def died_of_itself(exitcode: int | None) -> bool:
    """Whether a worker that ended with ``exitcode`` crashed (native fault, abort, error exit) rather than
    being stopped from outside."""
    if exitcode is None or exitcode == 0:
        return False
    if exitcode > 0:
        return True
    try:
        return signal.Signals(-exitcode) in _SELF_INFLICTED
    except ValueError:
        return False


def describe_exit(exitcode: int | None, rss_bytes: int = 0) -> str:
    """Plain words for how the worker process ended (``rss_bytes``: its memory when last heard of)."""
    if exitcode is None:
        return "the inference worker stopped answering"
    if exitcode < 0:
        try:
            name = signal.Signals(-exitcode).name
        except ValueError:
            name = f"signal {-exitcode}"
        meaning = {
            "SIGSEGV": "a crash in native model code",
            "SIGBUS": "a crash in native model code",
            "SIGILL": "the native library uses instructions this CPU lacks",
            "SIGABRT": "the native library aborted",
            "SIGKILL": "killed from outside: by the system's out-of-memory killer or by another program",
            "SIGTERM": "terminated from outside",
        }.get(name, "a signal")
        memory = f"; it was using {rss_bytes / 2**20:.0f} MB" if rss_bytes and name == "SIGKILL" else ""
        return f"the inference worker died ({name}: {meaning}{memory})"
    return f"the inference worker exited with code {exitcode}"


# ------------------------------------------------------------------------------------------ engines


@dataclass
class _EngineRecord:
    """What it takes to load an engine again after a restart."""

    message: p.LoadModel
    family: str = ""
    capabilities: Capabilities = field(default_factory=Capabilities)


class RemoteEngine:
    """A model loaded in the worker; the same calls as a local ``contract.Engine``."""

    def __init__(self, client: WorkerClient, engine_id: str, family: str, capabilities: Capabilities) -> None:
        self.client = client
        self.engine_id = engine_id
        self.family = family
        self.capabilities = capabilities

    def transcribe(
        self,
        audio: np.ndarray,
        *,
        progress: ProgressCallback | None = None,
        cancel: CancelToken | None = None,
        timeout: float | None = None,
        **request_options: Any,
    ) -> Transcript:
        pcm = p.audio_payload(audio)
        request_id = self.client.next_id()
        message = p.Transcribe(request_id, self.engine_id, dict(request_options), pcm)
        result = self.client.request(message, progress=progress, cancel=cancel, timeout=timeout)
        assert isinstance(result, p.Result)
        return result.as_transcript()

    def transcribe_blocks(
        self,
        blocks: Callable[[], Iterable[np.ndarray]],
        *,
        expected_samples: int | None = None,
        progress: ProgressCallback | None = None,
        cancel: CancelToken | None = None,
        timeout: float | None = None,
        **request_options: Any,
    ) -> Transcript:
        """``transcribe`` of a file's audio sent in blocks, so neither process holds the whole clip.
        ``blocks()`` yields the audio (mono float32 at 16 kHz) from its start each time it is called: the
        worker may ask for two passes (``protocol.OpenJob``). The transcript is ``transcribe``'s."""
        return run_job(
            self.client,
            self.engine_id,
            blocks,
            expected_samples,
            dict(request_options),
            progress,
            cancel,
            timeout,
        )

    def open_stream(
        self,
        *,
        on_events: EventsCallback | None = None,
        backlog: BacklogPolicy | None = None,
        segmenter: dict[str, Any] | None = None,
        mode: str = "auto",
        **request_options: Any,
    ) -> RemoteStream:
        """``mode``: "auto" (the engine's own live path when it has one), "native", or "segmented" (Silero VAD
        closes segments that the engine transcribes offline: final text per pause, with any model)."""
        stream = RemoteStream(
            self, dict(request_options), dict(segmenter or {}), on_events, backlog or BacklogPolicy(), mode
        )
        self.client.open_stream(stream)
        return stream

    def close(self) -> None:
        self.client.unload(self.engine_id)


# ------------------------------------------------------------------------------------------ streams


class RemoteStream:
    """A live stream in the worker. ``push`` never waits for inference (except with ``block``).

    Events arrive on the client's reader thread: through ``on_events`` if given, and always into
    ``take_events()``. ``committed_text`` is the concatenation of every delta received, and survives
    worker restarts.
    """

    def __init__(
        self,
        engine: RemoteEngine,
        options: dict[str, Any],
        segmenter: dict[str, Any],
        on_events: EventsCallback | None,
        backlog: BacklogPolicy,
        mode: str = "auto",
        replay_limit_s: float = REPLAY_LIMIT_S,
    ) -> None:
        self.engine = engine
        self.client = engine.client
        self.stream_id = f"s{self.client.next_id()}"
        self.options = options
        self.segmenter = segmenter
        self.mode = mode
        self.backlog = backlog
        self.kind = ""  # "native" or "segmented", once opened
        self._on_events = on_events
        self._lock = threading.Condition()
        self._events: deque[StreamEvent] = deque()
        self._queued: deque[np.ndarray] = deque()  # accepted, not yet sent
        self._in_flight: dict[int, _InFlight] = {}  # by push sequence number
        self._replay = ReplayBuffer(
            round(replay_limit_s * SAMPLE_RATE)
        )  # audio a new worker would need again
        self._decoding: int | None = None  # the push the worker said it began decoding (until answered)
        self._reopen: Replay | None = None  # how the next worker takes over (after a death)
        self._seq = 0
        self._queued_samples = 0
        self._pushed_samples = 0  # accepted from the caller
        self._worker_wall = 0.0
        self._timings: deque[tuple[float, float]] = deque(maxlen=500)  # (round trip, worker compute) per push
        self._continuity = StreamContinuity()  # committed text, times and ids across worker restarts
        self._open = False  # a worker stream exists (False while restarting)
        self._finishing = False  # finish() was called: no more pushes
        self._closed = False
        self._failure: CaptioneerError | None = None

    # ------------------------------------------------------------------ caller side
    def push(self, pcm: np.ndarray) -> list[StreamEvent]:
        """Hand audio over; returns the events that arrived since the last call."""
        samples = p.audio_payload(pcm)
        with self._lock:
            self._raise_if_unusable()
            limit = self.backlog.max_backlog_s * SAMPLE_RATE
            if self.backlog.mode == "block":
                while self._backlog_samples() + samples.size > limit and self._backlog_samples() > 0:
                    self._lock.wait(0.5)
                    self._raise_if_unusable()
            elif self._backlog_samples() + samples.size > limit:
                raise BacklogFull(
                    f"{self._backlog_samples() / SAMPLE_RATE:.1f} s of audio are waiting for the model "
                    f"(limit {self.backlog.max_backlog_s:g} s); this chunk was not taken",
                    "use a faster model or weight type (q8_0), more threads, or a larger backlog limit",
                )
            self._queued.append(samples)
            self._queued_samples += samples.size
            self._pushed_samples += samples.size
            self._pump()
            return self._drain_events()

    def take_events(self) -> list[StreamEvent]:
        with self._lock:
            return self._drain_events()

    def finish(self, timeout: float | None = None) -> Transcript:
        """Send everything queued, wait until the worker processed it, then return the final transcript.

        A worker that dies meanwhile is replaced and the stream replayed into the new one, then finished there."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._lock:
            self._raise_if_unusable()
            self._finishing = True
        try:
            while True:
                self._drain(deadline)
                generation = self.client.generation
                remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
                try:
                    result = self.client.request(
                        p.FinishStream(self.client.next_id(), self.stream_id), timeout=remaining
                    )
                    break
                except WorkerError:
                    if self.client.gave_up is not None or not self._worker_was_replaced(generation):
                        raise
                    log.info(
                        "the worker died while finishing stream %s; finishing in the new one", self.stream_id
                    )
        finally:
            with self._lock:
                self._closed = True
                self._lock.notify_all()
            self.client.forget_stream(self)
        assert isinstance(result, p.Result)
        with self._lock:
            final = self._continuity.final(result.as_transcript())
            tail = self._continuity.unannounced_tail(final)
        if tail is not None:  # every committed word reaches the caller as a delta, the last ones too
            self._deliver_raw([tail])
        return final

    def _drain(self, deadline: float | None) -> None:
        """Wait until a worker stream is open and has answered every push."""
        with self._lock:
            while self._queued or self._in_flight or not self._open:
                self._failure_or_none()
                self._pump()
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    raise WorkerError("the worker did not drain the stream in time", "try again or restart")
                self._lock.wait(0.5 if remaining is None else min(0.5, remaining))
            self._failure_or_none()

    def _worker_was_replaced(self, generation: int) -> bool:
        deadline = time.monotonic() + 3 * self.client.policy.ping_interval_s  # a death is noticed within one
        while time.monotonic() < deadline:
            if self.client.restarting or self.client.generation != generation:
                return True
            time.sleep(0.05)
        return False

    def cancel(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = self._finishing = True
            self._queued.clear()
            self._queued_samples = 0
            self._lock.notify_all()
        self.client.forget_stream(self)
        self.client.send_quietly(p.CancelStream(self.stream_id))

    @property
    def ready(self) -> bool:
        """Open in a running worker (False while the worker restarts and the stream is reopened)."""
        with self._lock:
            return self._open and not self._closed

    @property
    def committed_text(self) -> str:
        with self._lock:
            return self._continuity.text

    def heard(self) -> Transcript:
        """What the stream committed (gap markers included) over the audio it was given: its transcript for a
        caller that must end it after the client stopped restarting its worker (``finish`` then fails)."""
        with self._lock:
            return Transcript(
                text=self._continuity.text.strip(),
                timing=Timing(self._pushed_samples / SAMPLE_RATE, self._worker_wall),
            )

    def stats(self) -> Stats:
        with self._lock:
            latency = float(np.median([t[0] for t in self._timings])) if self._timings else None
            return Stats(
                self._replay.answered_end / SAMPLE_RATE,
                self._worker_wall,
                self._backlog_samples() / SAMPLE_RATE,
                latency,
            )

    def push_timings(self) -> list[tuple[float, float]]:
        """(round trip, worker compute) seconds of recent pushes, oldest first; their difference is the
        cost of the process boundary plus any wait behind other work in the worker."""
        with self._lock:
            return list(self._timings)

    # ------------------------------------------------------------------ internals (lock held unless noted)
    def _backlog_samples(self) -> int:
        return self._queued_samples + sum(f.chunk.size for f in self._in_flight.values())

    def _raise_if_unusable(self) -> None:
        self._failure_or_none()
        if self._closed or self._finishing:
            raise UsageError("the stream is finished or cancelled", "open a new stream")

    def _failure_or_none(self) -> None:
        if self._failure is not None:
            raise self._failure
        if self._closed:
            raise UsageError("the stream is finished or cancelled", "open a new stream")

    def _drain_events(self) -> list[StreamEvent]:
        events = list(self._events)
        self._events.clear()
        return events

    def _pump(self) -> None:
        """Send queued audio while the in-flight limit allows (coalesced into one push when allowed)."""
        while self._open and self._queued and len(self._in_flight) < self.backlog.max_in_flight:
            coalesce = self.backlog.mode == "coalesce"
            parts = list(self._queued) if coalesce else [self._queued[0]]
            if coalesce:
                self._queued.clear()
            else:
                self._queued.popleft()
            chunk = np.concatenate(parts) if len(parts) > 1 else parts[0]
            self._queued_samples -= chunk.size
            self._seq += 1
            self._in_flight[self._seq] = _InFlight(chunk, time.monotonic())
            self._replay.sent(chunk)
            if not self.client.send_quietly(p.PushAudio(self.stream_id, self._seq, chunk)):
                return  # the worker is gone; the supervisor re-sends in-flight audio to the next one

    def _deliver(self, events: list[StreamEvent]) -> None:
        """Reader thread: record and forward the worker stream's events (lock not held)."""
        if not events:
            return
        with self._lock:
            events = [self._continuity.adopt(event) for event in events]
        self._deliver_raw(events)

    def _deliver_raw(self, events: list[StreamEvent]) -> None:
        """Forward events already in this stream's terms (lock not held)."""
        with self._lock:
            self._events.extend(events)
        if self._on_events is not None:
            try:
                self._on_events(events)
            except Exception:  # a view's bug must not kill the client's reader thread
                log.exception("on_events callback failed")

    def on_pushed(self, message: p.Pushed) -> None:
        events = message.stream_events()
        with self._lock:
            sent = self._in_flight.pop(message.seq, None)
            if sent is None:  # an answer of a worker already given up for dead: its audio is being replayed
                return
            if self._decoding == message.seq:
                self._decoding = None
            self._timings.append((time.monotonic() - sent.sent_at, message.wall_s))
            self._replay.answered(message.samples, message.resume)
            self._worker_wall += message.wall_s
            self._pump()
            self._lock.notify_all()
        self._deliver(events)

    def on_decoding(self, seq: int) -> None:
        """The worker began decoding push ``seq`` (reader thread)."""
        with self._lock:
            if seq in self._in_flight:
                self._decoding = seq

    def on_failed(self, error: CaptioneerError, kind: str) -> None:
        with self._lock:
            self._failure = error
            self._lock.notify_all()
        self._deliver([ErrorEvent(kind, error.message, error.fix)])

    def on_opened(self, kind: str) -> None:
        with self._lock:
            self.kind = kind
            self._open = True
            self._pump()
            self._lock.notify_all()

    def on_worker_lost(self, reason: str, self_inflicted: bool = False) -> None:
        """The worker died. The audio since the stream's last resume point goes to the new worker ahead of the
        queue (its first part, the context, primes the new stream), so no word is lost or committed twice;
        audio that keeps killing workers, or that outgrew the replay bound, is given up with a visible gap.

        ``self_inflicted``: the worker crashed or hung (not killed or frozen from outside); only such a death
        while it was decoding this stream's audio counts against that audio."""
        with self._lock:
            died_on_audio = self_inflicted and self._decoding in self._in_flight
            self._in_flight.clear()
            self._decoding = None
            replay = self._replay.worker_died(died_on_audio)
            self._reopen = replay
            if replay.audio.size:
                self._queued.appendleft(replay.audio)
                self._queued_samples += replay.audio.size
            self._open = False
            gap = None
            if replay.lost is not None and replay.lost[1] > replay.lost[0]:
                gap = self._continuity.gap(replay.lost[0] / SAMPLE_RATE, replay.lost[1] / SAMPLE_RATE)
            self._continuity.worker_replaced(
                replay.start / SAMPLE_RATE, replay.continues_segment, replay.overlap_text
            )
            self._lock.notify_all()
        message = f"{reason}; restarting it, captions continue"
        if gap is not None:
            message += f" (audio from {gap.start_s:.1f} s to {gap.end_s:.1f} s could not be transcribed)"
        events: list[StreamEvent] = [
            ErrorEvent(
                "worker_restarted",
                message,
                "if it happens again, try another model or weight type",
                fatal=False,
            )
        ]
        self._deliver_raw(events + ([gap] if gap is not None else []))

    def on_given_up(self) -> None:
        """No worker will take the stream over: the audio since its last commit point is lost; mark the gap."""
        with self._lock:
            if self._closed:
                return
            start = self._reopen.start if self._reopen is not None else self._replay.answered_end
            end = self._pushed_samples
            gap = self._continuity.gap(start / SAMPLE_RATE, end / SAMPLE_RATE) if end > start else None
        if gap is not None:
            self._deliver_raw([gap])

    def on_worker_restored(self, took_s: float) -> None:
        """The new worker took the stream over: say so, with what it cost."""
        with self._lock:
            replay = self._reopen
            if self._closed or replay is None:
                return
        replayed = (replay.context.size + replay.audio.size) / SAMPLE_RATE
        message = f"the inference worker was restarted in {took_s:.1f} s; captions continue"
        if replayed:
            message += f" ({replayed:.1f} s of audio since the last committed words replayed)"
        self._deliver_raw([ErrorEvent("worker_resumed", message, None, fatal=False)])

    def reopen_request(self) -> tuple[dict[str, Any] | None, np.ndarray | None]:
        """The resume state and context audio for reopening this stream in a new worker (None, None: fresh)."""
        with self._lock:
            replay = self._reopen
        if replay is None or replay.resume is None:
            return None, None
        return replay.resume, replay.context


@dataclass
class _InFlight:
    chunk: np.ndarray
    sent_at: float


# ------------------------------------------------------------------------------------------ client


@dataclass
class _Pending:
    future: Future[p.Message]
    message: p.Message
    progress: ProgressCallback | None = None
    started: float = field(default_factory=time.monotonic)


class WorkerClient:
    """Starts and supervises one worker process. Use as a context manager or call ``close()``."""

    def __init__(
        self, policy: WorkerPolicy | None = None, on_status: Callable[[str], None] | None = None
    ) -> None:
        self.policy = policy or WorkerPolicy()
        self._on_status = on_status
        self._ids = itertools.count(1)
        self._lock = threading.RLock()
        self._outbox: queue.SimpleQueue[bytes | bytearray | None] | None = (
            None  # frames for the current worker's writer
        )
        self._pending: dict[int, _Pending] = {}
        self._engines: dict[str, _EngineRecord] = {}
        self._streams: dict[str, RemoteStream] = {}
        self._job_feeds: dict[int, JobFeed] = {}  # streamed offline jobs, by request id
        self._process: multiprocessing.process.BaseProcess | None = None
        self._conn: Any = None
        self._generation = 0
        self._crashes: deque[float] = deque()
        self._last_pong = time.monotonic()
        self._busy_s = 0.0
        self.worker_rss = 0
        self._dead: WorkerError | None = None  # set when the client gave up
        self._closing = False
        self._restarting = False
        self._starting = False
        self._supervisor: threading.Thread | None = None
        self._reader: threading.Thread | None = None  # the current worker's reader thread
        self._wake = threading.Event()

    # ------------------------------------------------------------------ lifetime
    def start(self) -> WorkerClient:
        with self._lock:
            if self._process is not None or self._starting:
                return self
            self._starting = True
        try:
            self._adopt(*self._spawn())
        finally:
            self._starting = False
        self._supervisor = threading.Thread(target=self._supervise, name="captioneer-supervisor", daemon=True)
        self._supervisor.start()
        return self

    def __enter__(self) -> WorkerClient:
        return self.start()

    def __exit__(self, *_exc: object) -> None:
        self.close()

    def close(self) -> None:
        with self._lock:
            if self._closing:
                return
            self._closing = True
            process, conn = self._process, self._conn
        self._wake.set()
        if conn is not None:
            self.send_quietly(p.Shutdown())
        if process is not None:
            process.join(timeout=5)
            if process.is_alive():
                process.kill()
                process.join(timeout=5)
        with self._lock:
            self._retire_worker()
        self._fail_all(WorkerError("the worker client was closed"))

    @property
    def pid(self) -> int | None:
        process = self._process
        return process.pid if process is not None else None

    @property
    def gave_up(self) -> WorkerError | None:
        """Why this client stopped restarting its worker (it failed too often), or None while it is alive."""
        return self._dead

    @property
    def restarting(self) -> bool:
        """A dead worker is being replaced (requests made meanwhile wait for it)."""
        return self._restarting

    @property
    def generation(self) -> int:
        """How many worker processes this client has started (1 + restarts)."""
        return self._generation

    def next_id(self) -> int:
        return next(self._ids)

    def _spawn(self) -> tuple[multiprocessing.process.BaseProcess, Any]:
        """Start a worker and wait for its hello. Runs without the lock: a handshake may take a minute, and
        closing the window or cancelling a stream meanwhile must not wait for it."""
        from inference.worker import worker_main

        context = multiprocessing.get_context("spawn")
        parent, child = context.Pipe(duplex=True)
        process = context.Process(
            target=worker_main, args=(child, logging.WARNING), name="captioneer-worker", daemon=True
        )
        process.start()
        child.close()
        deadline = time.monotonic() + self.policy.start_timeout_s
        while not parent.poll(0.1) and not self._closing and time.monotonic() < deadline:
            pass
        if self._closing:
            process.kill()
            process.join(5)
            raise WorkerError("the worker client was closed")
        if not parent.poll(0):
            process.kill()
            process.join(5)
            raise WorkerError(
                f"the inference worker did not start within {self.policy.start_timeout_s:g} s "
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

    def _adopt(self, process: multiprocessing.process.BaseProcess, conn: Any) -> None:
        """Publish a started worker (takes the lock only for that); a client closed meanwhile stops it."""
        outbox: queue.SimpleQueue[bytes | bytearray | None] = queue.SimpleQueue()
        with self._lock:
            if not self._closing:
                self._process, self._conn, self._outbox = process, conn, outbox
                self._generation += 1
                generation = self._generation
                self._last_pong = time.monotonic()
                self._busy_s = 0.0
        if self._closing:
            conn.close()
            process.kill()
            process.join(5)
            raise WorkerError("the worker client was closed")
        threading.Thread(
            target=self._write, args=(conn, outbox), name="captioneer-writer", daemon=True
        ).start()
        reader = threading.Thread(
            target=self._read, args=(conn, generation), name="captioneer-reader", daemon=True
        )
        self._reader = reader
        reader.start()

    # ------------------------------------------------------------------ sending
    def send_quietly(self, message: p.Message) -> bool:
        """Queue a message for the worker if one is up; False when none is (the supervisor handles the loss).

        Never blocks: a writer thread does the writing, so a frozen worker whose pipe is full stalls only that
        thread, never a request's timeout, a stream, or the supervisor's pings (which then go unanswered)."""
        outbox = self._outbox
        if outbox is None or self._conn is None:
            return False
        outbox.put(p.encode(message))
        return True

    def _write(self, conn: Any, outbox: queue.SimpleQueue[bytes | bytearray | None]) -> None:
        """Writer thread of one worker: sends queued frames in order until told to stop or the pipe breaks."""
        while True:
            frame = outbox.get()
            if frame is None:
                return
            try:
                conn.send_bytes(frame)
            except (OSError, ValueError, TypeError):  # TypeError: the pipe was closed under a long write
                self._wake.set()  # the supervisor finds out why
                return

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
                with self._lock:
                    self._pending.pop(request_id, None)
                raise WorkerError(f"the worker did not answer a {message.type} request within {timeout:g} s")

    def submit(self, message: p.Message, progress: ProgressCallback | None = None) -> _Pending:
        """Send a request with a ``request_id``; its answer (or failure) completes the returned future."""
        self._raise_if_dead()
        if self._restarting and threading.current_thread() is not self._supervisor:
            self._wait_for_worker()
        request_id = int(getattr(message, "request_id"))  # noqa: B009 - every request type has one
        pending = _Pending(Future(), message, progress)
        with self._lock:
            self._pending[request_id] = pending
        if not self.send_quietly(message):
            self._wait_for_worker()
            if not self.send_quietly(message):
                raise self._dead or WorkerError("the inference worker is not running", "restart Captioneer")
        return pending

    def forget_request(self, request_id: int) -> None:
        """Stop waiting for a request's answer (its caller gave up on it)."""
        with self._lock:
            self._pending.pop(request_id, None)

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
            if self._conn is not None and not self._restarting:
                return
            time.sleep(0.05)

    def _raise_if_dead(self) -> None:
        if self._dead is not None:
            raise self._dead
        if self._closing:
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
        record = _EngineRecord(message, loaded.family, loaded.caps)
        with self._lock:
            self._engines[engine_id] = record
        return RemoteEngine(self, engine_id, loaded.family, loaded.caps)

    def unload(self, engine_id: str) -> None:
        with self._lock:
            record = self._engines.pop(engine_id, None)
            streams = [s for s in self._streams.values() if s.engine.engine_id == engine_id]
        for stream in streams:
            stream.cancel()
        if record is not None and self._dead is None and not self._closing:
            self.request(p.UnloadModel(self.next_id(), engine_id))

    def open_stream(self, stream: RemoteStream) -> None:
        with self._lock:
            self._streams[stream.stream_id] = stream
        self._open_remote(stream)

    def _open_remote(self, stream: RemoteStream) -> None:
        resume, context = stream.reopen_request()
        message = p.OpenStream(
            self.next_id(),
            stream.engine.engine_id,
            stream.stream_id,
            stream.options,
            stream.segmenter,
            stream.mode,
            resume,
            context,
        )
        try:
            opened = self.request(message)
        except CaptioneerError:
            with self._lock:
                self._streams.pop(stream.stream_id, None)
            raise
        assert isinstance(opened, p.Opened)
        stream.on_opened(opened.kind)

    def forget_stream(self, stream: RemoteStream) -> None:
        with self._lock:
            self._streams.pop(stream.stream_id, None)

    # ------------------------------------------------------------------ reader thread
    def _read(self, conn: Any, generation: int) -> None:
        while True:
            try:
                frame = conn.recv_bytes()
            except (EOFError, OSError):
                break
            try:
                self._on_message(p.decode(frame))
            except Exception:
                log.exception("cannot handle a message from the worker")
        if generation == self._generation:
            if self._restarting:  # a worker died while being restored: unblock the restore
                with self._lock:
                    pending = list(self._pending.values())
                    self._pending.clear()
                for item in pending:
                    if not item.future.done():
                        item.future.set_exception(WorkerError("the restarted worker died as well"))
            self._wake.set()  # the supervisor finds out why and restarts

    def _on_message(self, message: p.Message) -> None:
        if isinstance(message, p.Pong):
            self._last_pong = time.monotonic()
            self._busy_s = message.busy_s
            self.worker_rss = message.rss_bytes
            return
        if isinstance(message, p.Pushed):
            stream = self._streams.get(message.stream_id)
            if stream is not None:
                stream.on_pushed(message)
            return
        if isinstance(message, p.JobOpened | p.JobTook):
            feed = self._job_feeds.get(message.job_id)
            if feed is not None:
                feed.on_message(message)
            return
        if isinstance(message, p.Decoding):
            stream = self._streams.get(message.stream_id)
            if stream is not None:
                stream.on_decoding(message.seq)
            return
        if isinstance(message, p.EventMessage):
            event = event_from_json(message.event)
            if message.request_id is not None:
                pending = self._pending.get(message.request_id)
                if pending is not None and pending.progress is not None and isinstance(event, Progress):
                    pending.progress(event)
            elif message.stream_id is not None and message.stream_id in self._streams:
                self._streams[message.stream_id]._deliver([event])
            return
        if isinstance(message, p.Failed) and message.request_id is None:
            stream = self._streams.get(message.stream_id or "")
            if stream is not None:
                stream.on_failed(error_from_failure(message), message.kind)
                self.forget_stream(stream)
            return
        request_id = getattr(message, "request_id", None)
        with self._lock:
            pending = self._pending.pop(request_id, None) if request_id is not None else None
        if pending is None:
            log.debug("unexpected %s message from the worker", message.type)
            return
        if isinstance(message, p.Failed):
            pending.future.set_exception(error_from_failure(message))
        else:
            pending.future.set_result(message)

    # ------------------------------------------------------------------ supervision
    def _supervise(self) -> None:
        nonce = 0
        while not self._closing:
            self._wake.wait(self.policy.ping_interval_s)
            self._wake.clear()
            if self._closing:
                return
            process = self._process
            if process is None:
                continue
            reason = None
            self_inflicted = False
            if not process.is_alive():
                process.join(1)
                reason = describe_exit(process.exitcode, self.worker_rss)
                self_inflicted = died_of_itself(process.exitcode)
            else:
                nonce += 1
                self.send_quietly(p.Ping(nonce))
                silent = time.monotonic() - self._last_pong
                limit = self._busy_limit()
                if silent > self.policy.ping_timeout_s:
                    reason = f"the inference worker stopped answering for {silent:.0f} s"
                elif self._busy_s > limit:
                    reason = f"the inference worker was stuck on one operation for {self._busy_s:.0f} s"
                    self_inflicted = True  # it answers pings, so the process runs: the operation hangs
                if reason is not None:
                    process.kill()
                    process.join(5)
            if reason is not None:
                self._recover(reason, self_inflicted)

    def _busy_limit(self) -> float:
        with self._lock:
            loading = any(isinstance(pending.message, p.LoadModel) for pending in self._pending.values())
        return self.policy.load_timeout_s if loading else self.policy.hang_timeout_s

    def _recover(self, reason: str, self_inflicted: bool = False) -> None:
        """Fail what was in flight, then restart (with backoff) and restore engines and streams."""
        log.warning("%s", reason)
        lost_at = time.monotonic()
        self._notify(reason)
        # What the dead worker said last (which push it was decoding, which it answered) is read before its
        # streams are judged; its pipe ends once the process is gone.
        reader = self._reader
        if reader is not None and reader is not threading.current_thread():
            reader.join(2.0)
        self._wake.clear()  # the reader's wake-up at the pipe's end is this recovery
        with self._lock:
            self._restarting = True
            self._retire_worker()
            pending = list(self._pending.values())
            self._pending.clear()
            streams = list(self._streams.values())
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
            while not self._closing:
                now = time.monotonic()
                self._crashes.append(now)
                while self._crashes and now - self._crashes[0] > self.policy.restart_window_s:
                    self._crashes.popleft()
                if len(self._crashes) > self.policy.max_restarts:
                    self._give_up(
                        WorkerError(
                            f"{reason}; the worker failed {len(self._crashes)} times in "
                            f"{self.policy.restart_window_s:.0f} s, so Captioneer stopped restarting it",
                            "check the log, then try another model, weight type or backend",
                        ),
                        pending,
                    )
                    return
                delay = self.policy.backoff_s[min(len(self._crashes) - 1, len(self.policy.backoff_s) - 1)]
                if delay and self._wake.wait(delay) and self._closing:
                    return
                self._wake.clear()
                try:
                    self._adopt(*self._spawn())
                    self._restore(pending)
                except CaptioneerError as exc:  # the new worker failed too: that counts as another failure
                    reason = str(exc)
                    log.warning("restarting the worker failed: %s", reason)
                    with self._lock:
                        if self._process is not None:
                            self._process.kill()
                        self._retire_worker()
                    continue
                took = time.monotonic() - lost_at
                # Nobody pinged during the restore: the silence since the spawn is not the worker's.
                self._last_pong = time.monotonic()
                self._notify(f"the inference worker was restarted in {took:.1f} s")
                for stream in streams:
                    stream.on_worker_restored(took)
                return
        finally:
            self._restarting = False

    def _retire_worker(self) -> None:
        """Forget the current worker's process and pipe (lock held); its writer thread ends."""
        if self._outbox is not None:
            self._outbox.put(None)
        if self._conn is not None:
            self._conn.close()
        self._conn, self._process, self._outbox = None, None, None

    def _restore(self, pending: list[_Pending]) -> None:
        with self._lock:
            engines = list(self._engines.values())
            streams = list(self._streams.values())
        for record in engines:
            loaded = self.request(record.message)
            assert isinstance(loaded, p.Loaded)
        # Only streams an earlier worker had opened: one whose first opening is under way is opened by its own
        # request (retried below when it was in flight), never twice.
        for stream in streams:
            if not stream._closed and stream.kind:
                self._open_remote(stream)
        for item in pending:  # loads/opens that were in flight when it died: retried once
            if isinstance(item.message, p.LoadModel | p.OpenStream) and not item.future.done():
                try:
                    item.future.set_result(self.request(item.message, progress=item.progress))
                except CaptioneerError as exc:
                    item.future.set_exception(exc)

    def _give_up(self, error: WorkerError, pending: list[_Pending]) -> None:
        self._dead = error
        self._notify(str(error))
        for item in pending:
            if not item.future.done():
                item.future.set_exception(error)
        with self._lock:
            streams = list(self._streams.values())
        for stream in streams:
            stream.on_given_up()
        self._fail_all(error)

    def _fail_all(self, error: CaptioneerError) -> None:
        with self._lock:
            pending = list(self._pending.values())
            self._pending.clear()
            streams = list(self._streams.values())
            self._streams.clear()
        for item in pending:
            if not item.future.done():
                item.future.set_exception(error)
        for stream in streams:
            if not stream._closed:
                stream.on_failed(error, "worker_crashed")

    def _notify(self, text: str) -> None:
        if self._on_status is not None:
            try:
                self._on_status(text)
            except Exception:
                log.exception("on_status callback failed")
