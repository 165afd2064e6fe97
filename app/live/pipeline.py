"""The live path on the app side (Qt-free): source → 320 ms chunks → worker stream → events out.

``LivePipeline`` cuts the source's blocks into pushes, measures the input level, remembers when each
stretch of audio was captured (to measure caption latency: speech end → committed text) and hands the
stream's events to ``deliver`` — on the client's reader thread; the caller hops to its own thread.
Stopping drains: the source stops, the last partial chunk is sent, the worker processes everything
queued, and the final transcript arrives as a ``Done`` event. Stopped while the model's worker is down (past its
restart limit, before a revival), the stream marks the audio it held as a gap and the ``Done`` carries what was
heard, after a non-fatal ``worker_failed`` note (docs/architecture.md §4.2).

When the input goes away and another takes over (``swap_source``), the span no input delivered is sent as
silence, so stream time stays wall time, and marked in the transcript by a committed gap segment (a ``Delta``
with a negative segment id: the stream's own ids are never negative) placed before the first event about audio
after it.
"""

from __future__ import annotations

import bisect
import logging
import math
import threading
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from app.live.silence import SilenceWatch
from app.live.sources import AudioSource
from inference.audio.devices.gaps import comes_after, gap_text
from inference.client import BacklogFull, BacklogPolicy, RemoteEngine, RemoteStream
from inference.contract import SAMPLE_RATE, Delta, Done, ErrorEvent, StreamEvent
from inference.errors import CaptioneerError

log = logging.getLogger("captioneer.app.pipeline")
CHUNK_S = 0.32
MAX_GAP_FILL_S = (
    60.0  # a longer span without input is marked but not sent as silence (the model has no use for it)
)
Deliver = Callable[[list[StreamEvent]], None]
WORKER_DOWN_AT_END = "the model's worker is down; the transcript keeps what was heard"


def level_dbfs(block: np.ndarray) -> float:
    """RMS level in dB relative to full scale (-100 for silence)."""
    if block.size == 0:
        return -100.0
    rms = float(np.sqrt(np.mean(np.square(block, dtype=np.float64))))
    return max(-100.0, 20.0 * math.log10(rms)) if rms > 0 else -100.0


class LivePipeline:
    def __init__(
        self,
        engine: RemoteEngine,
        source: AudioSource,
        deliver: Deliver,
        *,
        on_level: Callable[[float], None] | None = None,
        on_source_end: Callable[[str | None], None] | None = None,
        on_silence: Callable[[bool], None] | None = None,
        request_options: dict[str, Any] | None = None,
        backlog: BacklogPolicy | None = None,
        clock: Callable[[], float] = time.monotonic,
        stream_mode: str = "auto",
    ) -> None:
        self.engine = engine
        self.source = source
        self.deliver = deliver
        self.on_level = on_level
        self.on_source_end = on_source_end
        self.on_silence = on_silence  # True: the input went silent for a few seconds; False: sound is back
        self._silence = SilenceWatch()
        self.clock = clock
        self.request_options = dict(request_options or {})
        self.stream_mode = stream_mode
        # Live audio never blocks the sound card: queue and coalesce, and say so when the model falls behind.
        self.backlog = backlog or BacklogPolicy("coalesce", max_in_flight=2, max_backlog_s=30.0)
        self._lock = threading.Lock()
        self._pending: list[np.ndarray] = []
        self._pending_samples = 0
        self._sent_samples = 0
        self._capture_marks: list[tuple[int, float]] = []  # (stream sample index, monotonic time captured)
        self._stream: RemoteStream | None = None
        self._refused_s = 0.0
        self._last_audio_at: float | None = None  # when the latest block ended (monotonic)
        self._lost: tuple[float, str] | None = None  # (when the input stopped, why), until a new one delivers
        self._gaps: list[Delta] = []  # gap markers waiting for the stream's events to pass them
        self._gap_ids = 0
        self.running = False
        self.ended_while_down = False  # stopped while the client had no worker: the Done is what was heard

    # ------------------------------------------------------------------ control
    def start(self) -> None:
        self._stream = self.engine.open_stream(
            on_events=self._deliver_in_order,
            backlog=self.backlog,
            mode=self.stream_mode,
            **self.request_options,
        )
        self.running = True
        try:
            self.source.start(self._on_audio, self._on_end)
        except BaseException:
            self.running = False
            self._stream.cancel()
            raise

    def stop(self, timeout_s: float = 600.0) -> None:
        """Stop the source and drain: blocks until the worker has processed everything or ``timeout_s`` passed
        (call off the GUI thread)."""
        if not self.running:
            return
        self.running = False
        self.source.stop()
        stream = self._stream
        assert stream is not None
        with self._lock:
            tail = self._take_pending()
        try:
            if tail is not None:
                stream.push(tail)
            final = stream.finish(timeout=timeout_s)
        except CaptioneerError as exc:
            if stream.client.gave_up is None:
                self.deliver([ErrorEvent("worker_crashed", exc.message, exc.fix)])
                return
            # No worker runs and none was revived yet: the session ends in good order with what was heard (the
            # audio held since the failure is marked as a gap by ``finish``).
            self.ended_while_down = True
            note = ErrorEvent(
                "worker_failed",
                f"{WORKER_DOWN_AT_END} ({exc.message})",
                "start again in a moment: a new session starts a fresh worker",
                fatal=False,
            )
            self._deliver_in_order([note, Done(stream.heard())])
            return
        self._deliver_in_order([Done(final)])

    def swap_source(self, source: AudioSource) -> None:
        """Continue the same stream from another input (the old one is gone); raises if it cannot start."""
        self.source.stop()
        source.start(self._on_audio, self._on_end)
        self.source = source
        self._silence = SilenceWatch()

    def cancel(self) -> None:
        self.running = False
        self.source.stop()
        if self._stream is not None:
            self._stream.cancel()

    @property
    def stream(self) -> RemoteStream | None:
        return self._stream

    def capture_time(self, stream_s: float) -> float | None:
        """When (monotonic clock) the audio at ``stream_s`` seconds into the stream was captured."""
        sample = int(stream_s * SAMPLE_RATE)
        with self._lock:
            index = bisect.bisect_right(self._capture_marks, (sample, math.inf)) - 1
            if index < 0:
                return None
            start, at = self._capture_marks[index]
        return at + (sample - start) / SAMPLE_RATE

    # ------------------------------------------------------------------ source thread
    def _on_audio(self, block: np.ndarray) -> None:
        if not self.running or block.size == 0:
            return
        now = self.clock()
        if self._lost is not None:
            self._mark_gap(now - block.size / SAMPLE_RATE)
        self._last_audio_at = now
        level = level_dbfs(block)
        if self.on_level is not None:
            self.on_level(level)
        silence = self._silence.feed(level, block.size)
        if silence is not None and self.on_silence is not None:
            self.on_silence(silence)
        with self._lock:
            # The block's last sample was captured now; its first one block-length earlier.
            first = self._sent_samples + self._pending_samples
            self._capture_marks.append((first, now - block.size / SAMPLE_RATE))
            if len(self._capture_marks) > 20000:  # about an hour of 20-30 ms blocks
                del self._capture_marks[:10000]
            self._pending.append(block)
            self._pending_samples += block.size
            chunk = self._take_pending() if self._pending_samples >= CHUNK_S * SAMPLE_RATE else None
        if chunk is not None:
            self._push(chunk)

    def _take_pending(self) -> np.ndarray | None:
        if not self._pending:
            return None
        chunk = np.concatenate(self._pending) if len(self._pending) > 1 else self._pending[0]
        self._pending, self._pending_samples = [], 0
        self._sent_samples += chunk.size
        return chunk

    def _push(self, chunk: np.ndarray) -> None:
        stream = self._stream
        if stream is None:
            return
        try:
            stream.push(chunk)
        except BacklogFull as exc:
            # Nothing is dropped silently: the gap is reported where the user sees it. The stream never saw
            # this audio, so later audio takes its place in stream time.
            with self._lock:
                first = self._sent_samples - chunk.size
                self._capture_marks = [mark for mark in self._capture_marks if mark[0] < first]
                self._sent_samples = first
            self._refused_s += chunk.size / SAMPLE_RATE
            self.deliver([ErrorEvent("backlog", exc.message, exc.fix, fatal=False)])
        except CaptioneerError as exc:
            self.running = False
            self.deliver([ErrorEvent("worker_crashed", exc.message, exc.fix)])

    def _on_end(self, reason: str | None) -> None:
        if reason and self._last_audio_at is not None:
            self._lost = (self._last_audio_at, reason)
        if self.on_source_end is not None:
            self.on_source_end(reason)

    def _mark_gap(self, resumed_at: float) -> None:
        """The new input's first block (captured from ``resumed_at``): the span since the old input's last one
        is sent as silence (up to MAX_GAP_FILL_S) and a gap marker is queued for it."""
        assert self._lost is not None
        lost_at, reason = self._lost
        self._lost = None
        missing_s = max(0.0, resumed_at - lost_at)
        fill = np.zeros(round(min(missing_s, MAX_GAP_FILL_S) * SAMPLE_RATE), np.float32)
        with self._lock:
            start_s = (self._sent_samples + self._pending_samples) / SAMPLE_RATE
            self._gap_ids -= 1
            text = gap_text(start_s, missing_s, reason)
            self._gaps.append(Delta(" " + text, self._gap_ids, start_s, start_s + fill.size / SAMPLE_RATE))
            if fill.size:
                self._capture_marks.append((self._sent_samples + self._pending_samples, lost_at))
                self._pending.append(fill)
                self._pending_samples += fill.size

    def _deliver_in_order(self, events: list[StreamEvent]) -> None:
        """The stream's events, with each waiting gap marker put before the first event about audio after it
        (or before the end): text said before the input went away stays before the marker."""
        with self._lock:
            if not self._gaps:
                gaps: list[Delta] = []
            else:
                gaps, self._gaps = self._gaps, []
        if not gaps:
            self.deliver(events)
            return
        ordered: list[StreamEvent] = []
        for event in events:
            while gaps and comes_after(event, gaps[0]):
                ordered.append(gaps.pop(0))
            ordered.append(event)
        if gaps:
            with self._lock:
                self._gaps[:0] = gaps
        self.deliver(ordered)
