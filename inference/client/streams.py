"""A live stream in the worker, as the caller sees it: backpressure, replay after a worker death, one continuous
text across workers, and the audio held while no worker runs (docs/architecture.md §2.2, §4)."""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from inference import protocol as p
from inference.client.failures import BacklogFull
from inference.client.interfaces import StreamHost, SupervisedStream
from inference.client.policies import REPLAY_LIMIT_S, BacklogPolicy
from inference.continuity import StreamContinuity
from inference.contract import SAMPLE_RATE, ErrorEvent, Stats, StreamEvent, Timing, Transcript
from inference.errors import CaptioneerError, UsageError, WorkerError
from inference.replay import Replay, ReplayBuffer

log = logging.getLogger("captioneer.client")

EventsCallback = Callable[[list[StreamEvent]], None]


class RemoteStream:
    """A live stream in the worker. ``push`` never waits for inference (except with ``block``).

    Events arrive on the client's reader thread: through ``on_events`` if given, and always into
    ``take_events()``. ``committed_text`` is the concatenation of every delta received, and survives
    worker restarts.
    """

    def __init__(
        self,
        host: StreamHost,
        engine_id: str,
        options: dict[str, Any],
        segmenter: dict[str, Any],
        on_events: EventsCallback | None,
        backlog: BacklogPolicy,
        mode: str = "auto",
        replay_limit_s: float = REPLAY_LIMIT_S,
    ) -> None:
        self.client = host
        self.engine_id = engine_id
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
        # The client stopped restarting its worker: audio is held in _queued (the newest max_backlog_s) until a
        # revived worker takes the stream over; audio from _unmarked_from to the held audio was dropped.
        self._down = False
        self._unmarked_from = 0

    # ------------------------------------------------------------------ caller side
    def push(self, pcm: np.ndarray) -> list[StreamEvent]:
        """Hand audio over; returns the events that arrived since the last call. While the client has no worker
        (its restart limit tripped) the audio is held, never refused and never waited on."""
        samples = p.audio_payload(pcm)
        with self._lock:
            self._raise_if_unusable()
            limit = self.backlog.max_backlog_s * SAMPLE_RATE
            if self._down:
                self._hold(samples)
                return self._drain_events()
            if self.backlog.mode == "block":
                while (
                    not self._down
                    and self._backlog_samples() + samples.size > limit
                    and self._backlog_samples() > 0
                ):
                    self._lock.wait(0.5)
                    self._raise_if_unusable()
            elif self._backlog_samples() + samples.size > limit:
                raise BacklogFull(
                    f"{self._backlog_samples() / SAMPLE_RATE:.1f} s of audio are waiting for the model "
                    f"(limit {self.backlog.max_backlog_s:g} s); this chunk was not taken",
                    "use a faster model or weight type (q8_0), more threads, or a larger backlog limit",
                )
            if self._down:  # the client gave up while this push waited
                self._hold(samples)
                return self._drain_events()
            self._queued.append(samples)
            self._queued_samples += samples.size
            self._pushed_samples += samples.size
            self._pump()
            return self._drain_events()

    def _hold(self, samples: np.ndarray) -> None:
        """No worker runs: keep the newest ``max_backlog_s`` of audio for the one a revival brings (lock held);
        older audio is dropped, and marked as a gap when the stream resumes or ends."""
        self._queued.append(samples)
        self._queued_samples += samples.size
        self._pushed_samples += samples.size
        excess = self._queued_samples - round(self.backlog.max_backlog_s * SAMPLE_RATE)
        while excess > 0 and self._queued:
            head = self._queued[0]
            if head.size <= excess:
                self._queued.popleft()
                cut = head.size
            else:
                self._queued[0] = head[excess:]
                cut = excess
            self._queued_samples -= cut
            excess -= cut

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
        except WorkerError:
            self._mark_held_as_lost()  # ended while no worker runs: what it holds is never transcribed
            raise
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
        """Wait until a worker stream is open and has answered every push; raise the client's give-up error
        when it has no worker (the caller ends the stream now rather than wait for a revival)."""
        with self._lock:
            while self._queued or self._in_flight or not self._open:
                self._failure_or_none()
                if self._down:
                    raise self.client.gave_up or WorkerError("no inference worker is running")
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
        caller that ended it while the client had no worker (``finish`` then raises the give-up error)."""
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

    def on_worker_events(self, events: list[StreamEvent]) -> None:
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
        self.on_worker_events(events)

    def on_decoding(self, seq: int) -> None:
        """The worker began decoding push ``seq`` (reader thread)."""
        with self._lock:
            if seq in self._in_flight:
                self._decoding = seq

    def on_failed(self, error: CaptioneerError, kind: str) -> None:
        with self._lock:
            self._failure = error
            self._lock.notify_all()
        self.on_worker_events([ErrorEvent(kind, error.message, error.fix)])

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

    def on_given_up(self, error: WorkerError, revive_in_s: float | None) -> None:
        """The client stopped restarting its worker: the audio no worker answered is lost (a gap marker); the
        stream stays open and holds what comes next until a revived worker takes it over in ``revive_in_s``."""
        with self._lock:
            if self._closed:
                return
            start = self._reopen.start if self._reopen is not None else self._replay.answered_end
            end = self._pushed_samples
            gap = self._continuity.gap(start / SAMPLE_RATE, end / SAMPLE_RATE) if end > start else None
            self._queued.clear()
            self._queued_samples = 0
            self._in_flight.clear()
            self._decoding = None
            self._open = False
            self._reopen = None
            self._down = True
            self._unmarked_from = end
            self._lock.notify_all()
        when = (
            "no fresh one is tried" if revive_in_s is None else f"a fresh one is tried in {revive_in_s:g} s"
        )
        note = ErrorEvent(
            "worker_failed",
            f"{error.message}; the stream stays open and holds its newest "
            f"{self.backlog.max_backlog_s:g} s of audio until a worker takes it over ({when})",
            error.fix,
            fatal=False,
        )
        events: list[StreamEvent] = [gap] if gap is not None else []
        self._deliver_raw([*events, note])

    def on_worker_revived(self, down_s: float) -> None:
        """A fresh worker runs again after the client had none: the held audio becomes the start of the stream
        it is about to open (the audio dropped before it is marked as a gap)."""
        with self._lock:
            if self._closed or not self._down:
                return
            held_start = self._pushed_samples - self._queued_samples
            gap = None
            if held_start > self._unmarked_from:
                gap = self._continuity.gap(self._unmarked_from / SAMPLE_RATE, held_start / SAMPLE_RATE)
            self._continuity.worker_replaced(held_start / SAMPLE_RATE)
            self._replay.restart_at(held_start)
            self._down = False
            held_s = self._queued_samples / SAMPLE_RATE
        message = f"a fresh inference worker took over after {down_s:.1f} s without one; captions continue"
        if held_s:
            message += f" ({held_s:.1f} s of audio held meanwhile are transcribed now)"
        notice = ErrorEvent("worker_resumed", message, None, fatal=False)
        events: list[StreamEvent] = [gap] if gap is not None else []
        self._deliver_raw([*events, notice])

    def _mark_held_as_lost(self) -> None:
        """Ended with no worker: the audio held (and dropped) since the client gave up is marked as a gap."""
        with self._lock:
            if not self._down or self._pushed_samples <= self._unmarked_from:
                return
            start, end = self._unmarked_from, self._pushed_samples
            gap = self._continuity.gap(start / SAMPLE_RATE, end / SAMPLE_RATE)
            self._queued.clear()
            self._queued_samples = 0
            self._unmarked_from = end
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

    def open_message(self, request_id: int) -> p.OpenStream:
        """The request that opens this stream in a worker: fresh, or (after a death) resuming with the stream's
        resume state and context audio."""
        with self._lock:
            replay = self._reopen
        resume, context = (
            (None, None) if replay is None or replay.resume is None else (replay.resume, replay.context)
        )
        return p.OpenStream(
            request_id,
            self.engine_id,
            self.stream_id,
            self.options,
            self.segmenter,
            self.mode,
            resume,
            context,
        )

    @property
    def closed(self) -> bool:
        with self._lock:
            return self._closed

    @property
    def was_opened(self) -> bool:
        with self._lock:
            return bool(self.kind)


@dataclass
class _InFlight:
    chunk: np.ndarray
    sent_at: float


class StreamTable:
    """The client's open streams, by id (thread-safe)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._streams: dict[str, SupervisedStream] = {}

    def add(self, stream: SupervisedStream) -> None:
        with self._lock:
            self._streams[stream.stream_id] = stream

    def get(self, stream_id: str) -> SupervisedStream | None:
        with self._lock:
            return self._streams.get(stream_id)

    def forget(self, stream_id: str) -> None:
        with self._lock:
            self._streams.pop(stream_id, None)

    def all(self) -> list[SupervisedStream]:
        with self._lock:
            return list(self._streams.values())

    def of_engine(self, engine_id: str) -> list[SupervisedStream]:
        with self._lock:
            return [s for s in self._streams.values() if s.engine_id == engine_id]

    def take_all(self) -> list[SupervisedStream]:
        with self._lock:
            streams = list(self._streams.values())
            self._streams.clear()
            return streams
