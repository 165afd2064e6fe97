"""Runs live captioning for the window: model loading, the pipeline, the session model, autosave.

Heavy work (starting the worker, loading a model, draining on stop, closing the worker) runs as background
operations (``app.operations``), which report back on the GUI thread and never touch a widget. The session
model is updated on the GUI thread, in event order, and views redraw from it.
"""

from __future__ import annotations

import dataclasses
import logging
import statistics
import threading
import time
from collections.abc import Callable
from pathlib import Path

from PySide6.QtCore import QEventLoop, QObject, QTimer, Signal, Slot

from app.gui_thread import GuiThread
from app.live.journal import SessionJournal, sessions_dir
from app.live.meeting import MeetingInput, MeetingPipeline, live_pipeline
from app.live.pipeline import WORKER_DOWN_AT_END, LivePipeline
from app.live.session import SessionModel
from app.live.silence import SILENT_AFTER_S
from app.live.sources import AudioSource, DeviceSource
from app.live.speakers import SpeakerEvent
from app.model_choices import ModelChoice
from app.operations import Operation, on_the_worker
from inference.audio.devices import SoundServerCapture, fallback_for
from inference.client import BacklogPolicy, RemoteEngine, WorkerClient
from inference.contract import Delta, Done, ErrorEvent, SpeechEnd, StreamEvent
from inference.errors import CaptioneerError

log = logging.getLogger("captioneer.app.controller")


def default_reconnect(lost: AudioSource) -> AudioSource | None:
    """A lost input → the system's default of its kind: microphone for a microphone, what the computer plays
    for system audio, both for a meeting (a recording that ended is not replaced)."""
    if isinstance(lost, MeetingInput):
        return lost.reopened(default_reconnect)
    if isinstance(lost, SoundServerCapture):
        return SoundServerCapture(fallback_for(lost.input_id))
    return DeviceSource(None) if isinstance(lost, DeviceSource) else None


class LiveController(QObject):
    events_arrived = Signal(list)  # from the client's reader thread → applied on the GUI thread
    level_changed = Signal(float)
    state_changed = Signal(str, str)  # state (idle/loading/running/stopping/failed), message
    session_started = Signal()
    session_finished = Signal()
    _source_ended = Signal(object)
    _silence_changed = Signal(bool)
    _prepared = Signal(object, object)  # pipeline, journal: handed to the GUI thread before audio flows
    _state_request = Signal(str, str)

    def __init__(
        self,
        client_factory: Callable[[], WorkerClient],
        data_dir: Path,
        parent: QObject | None = None,
        clock: Callable[[], float] = time.monotonic,
        reconnect: Callable[[AudioSource], AudioSource | None] | None = None,
    ) -> None:
        """``reconnect(lost)``: the source to continue with when a device goes away mid-session (None: stop).
        By default a lost sound card is replaced by the system's default input."""
        super().__init__(parent)
        self._reconnect = reconnect or default_reconnect
        self._client_factory = client_factory
        self._client: WorkerClient | None = None
        self._engines: dict[tuple[object, ...], RemoteEngine] = {}
        self.data_dir = data_dir
        self.clock = clock
        self.session = SessionModel()
        self.pipeline: LivePipeline | MeetingPipeline | None = None
        self.journal: SessionJournal | None = None
        self.state = "idle"
        self.latencies: list[float] = []  # seconds from the end of speech to its text in the session model
        self.events_arrived.connect(self._apply_events)
        self._source_ended.connect(self._on_source_ended)
        self._silence_changed.connect(self._on_silence_changed)
        self._prepared.connect(self._on_prepared)
        self._state_request.connect(self._on_state_request)
        self._gui = GuiThread(self)
        self._busy = threading.Lock()

    # ------------------------------------------------------------------ control (GUI thread)
    def start(self, choice: ModelChoice, source: AudioSource) -> None:
        if self.state not in ("idle", "failed"):
            return
        self.session = SessionModel()
        self.latencies = []
        self.state = "loading"  # at once, so a second click does not start twice
        self._set_state("loading", f"loading {choice.label}…")
        Operation(lambda: self._start_in_background(choice, source), "captioneer-start").success(
            lambda _none: self._on_state_request("running", f"captioning {source.name} with {choice.label}")
        ).failure(self._start_failed).run_in_background(self._gui.post)

    def stop(self, timeout_s: float = 600.0) -> None:
        if self.state != "running" or self.pipeline is None:
            return
        self.state = "stopping"
        self._set_state("stopping", "finishing the transcript…")
        pipeline = self.pipeline
        Operation(lambda: pipeline.stop(timeout_s), "captioneer-stop").run_in_background(self._gui.post)

    def shutdown(self, drain_timeout_s: float = 3.0) -> None:
        """Window closing: drain like Stop for at most ``drain_timeout_s`` (the sentence in progress is committed
        and journaled), then cancel what is left and close the session file and the worker."""
        if self.pipeline is not None and self.state in ("running", "stopping"):
            self._drain(drain_timeout_s)
        if self.pipeline is not None and self.state in ("running", "stopping"):
            log.warning(
                "the transcript did not finish within %.0f s of quitting; the rest is cancelled",
                drain_timeout_s,
            )
            self.pipeline.cancel()
        self._close_journal()
        if self._client is not None:
            client, self._client = self._client, None
            # Stopping the worker process waits for it (up to its join timeout): never on the GUI thread. Not a
            # daemon, so the interpreter still lets it finish at exit; nothing is delivered to a closing window.
            Operation(client.close, "captioneer-worker-close").run_in_background(on_the_worker, daemon=False)

    def _drain(self, timeout_s: float) -> None:
        """Stop and wait (running the event loop, which applies the final events) until the session is done."""
        loop = QEventLoop()

        def settled(state: str, _message: str) -> None:
            if state in ("idle", "failed"):
                loop.quit()

        self.state_changed.connect(settled)
        QTimer.singleShot(int(timeout_s * 1000), loop.quit)
        try:
            self.stop(timeout_s)
            if self.state == "stopping":
                loop.exec()
        finally:
            self.state_changed.disconnect(settled)

    def latency_summary(self) -> tuple[float, float] | None:
        """(p50, p95) caption latency in seconds over this session, None before the first segment."""
        if not self.latencies:
            return None
        values = sorted(self.latencies)
        p95 = values[min(len(values) - 1, round(0.95 * (len(values) - 1)))]
        return statistics.median(values), p95

    # ------------------------------------------------------------------ background
    def _start_in_background(self, choice: ModelChoice, source: AudioSource) -> None:
        """The start operation: load the model (and the worker), then start the pipeline."""
        engine = self._engine(choice)
        # A recording played faster than real time waits for the model instead of having audio refused.
        backlog = (
            BacklogPolicy("block", max_in_flight=2, max_backlog_s=10.0)
            if getattr(source, "paced_by_model", False)
            else None
        )
        pipeline = live_pipeline(  # a meeting input runs two labelled streams on the engine
            engine,
            source,
            self.events_arrived.emit,
            on_level=self.level_changed.emit,
            on_source_end=self._source_ended.emit,
            on_silence=self._silence_changed.emit,
            request_options=dict(choice.request_options),
            clock=self.clock,
            stream_mode=choice.stream_mode,
            backlog=backlog,
        )
        journal = SessionJournal(sessions_dir(self.data_dir), choice.label, source.name)
        self._prepared.emit(pipeline, journal)  # queued ahead of any event of this pipeline
        pipeline.start()
        wait = getattr(source, "wait_until_delivering", None)  # a sound server's new stream starts late:
        if wait is not None:  # "running" (the status) comes once the input's audio flows
            wait()

    def _start_failed(self, exc: BaseException) -> None:
        """A model that cannot load says why in its words; anything else (a bug) says so and keeps the window."""
        if isinstance(exc, CaptioneerError):
            self._on_state_request("failed", str(exc))
        else:
            self._on_state_request("failed", f"could not start: {type(exc).__name__}: {exc}")

    @property
    def client(self) -> WorkerClient | None:
        """The shared worker client, once a model was loaded (its ``pid`` and ``generation`` say which process)."""
        return self._client

    def engine_for(self, choice: ModelChoice) -> RemoteEngine:
        """The loaded engine for ``choice`` in the shared worker (loading it on first use; call off the GUI thread)."""
        return self._engine(choice)

    def _engine(self, choice: ModelChoice) -> RemoteEngine:
        with self._busy:
            if self._client is None:
                self._client = self._client_factory().start()
            engine = self._engines.get(choice.load_key)
            if engine is None:
                engine = self._client.load(
                    choice.path, choice.family, dict(choice.session_options), choice.backend, choice.threads
                )
                self._engines[choice.load_key] = engine
            return engine

    # ------------------------------------------------------------------ GUI thread
    @Slot(object, object)
    def _on_prepared(self, pipeline: LivePipeline | MeetingPipeline, journal: SessionJournal) -> None:
        self.pipeline = pipeline
        self.journal = journal

    @Slot(str, str)
    def _on_state_request(self, state: str, message: str) -> None:
        if state == "failed" and self.state in ("loading",) and self.journal is not None:
            self._close_journal()
        previous, self.state = self.state, state
        if state == "running" and previous == "loading":
            self.session.set_status("running", message)
            self.session_started.emit()
        elif state in ("failed", "restarting", "idle"):
            self.session.set_status(state, message)
        self.state_changed.emit(state, message)

    @Slot(list)
    def _apply_events(self, events: list[StreamEvent]) -> None:
        now = self.clock()
        for event in events:
            if isinstance(event, Delta | SpeechEnd) and event.end_s is not None and self.pipeline is not None:
                captured = self.pipeline.capture_time(event.end_s)
                if captured is not None and isinstance(event, Delta):
                    self.latencies.append(max(0.0, now - captured))
                    self.session.status = dataclasses.replace(
                        self.session.status, latency_s=self.latencies[-1]
                    )
        committed_before = len(self.session.segments)
        self.session.apply(events)
        if self.journal is not None:
            self.journal.record(events)
            if any(
                isinstance(e.event if isinstance(e, SpeakerEvent) else e, Done) for e in events
            ):  # text the final transcript committed without a delta
                for segment in self.session.segments[committed_before:]:
                    self.journal.record_final_tail(segment.stream_id, segment.text, segment.speaker)
        for event in events:
            if isinstance(event, ErrorEvent):
                if event.fatal:
                    self._set_state("failed", event.message)
                else:  # a restarted worker or a backlog warning: captions go on, the status says what happened
                    self.state_changed.emit(self.state, event.message)
            elif isinstance(event, Done):
                down = self.pipeline is not None and self.pipeline.ended_while_down
                problems = self._input_problems()
                self._close_journal()
                self.pipeline = None
                ended = f"stopped: {WORKER_DOWN_AT_END}" if down else "stopped"
                self._set_state("idle", "; ".join([ended, *problems]))
                self.session_finished.emit()
        if self.pipeline is not None and self.pipeline.stream is not None:
            stats = self.pipeline.stream.stats()
            self.session.apply([stats])

    @Slot(object)
    def _on_source_ended(self, reason: object) -> None:
        pipeline = self.pipeline
        if reason and pipeline is not None and self.state == "running":
            # A device went away (unplugged, taken by another program): continue on another input if there is
            # one, in the same session and stream; the gap is silence, and nothing said before is lost.
            try:
                replacement = self._reconnect(pipeline.source)
                if replacement is not None:
                    pipeline.swap_source(replacement)
                    message = f"{reason}; now listening on {replacement.name}"
                    self.session.set_status("running", message)
                    self.state_changed.emit(self.state, message)
                    return
            except CaptioneerError as exc:
                reason = f"{reason}; no other input could be opened ({exc.message})"
        if reason:
            self.session.set_status("failed", str(reason))
            self._set_state("running", str(reason))
        self.stop()  # a recording that ended, or a device that is gone for good: finish what was said

    @Slot(bool)
    def _on_silence_changed(self, silent: bool) -> None:
        """Say so when the input delivers only silence: an empty caption window should not look like a hang."""
        pipeline = self.pipeline
        if pipeline is None or self.state != "running":
            return
        name = pipeline.source.name
        if silent:
            message = f"no sound from {name} for {SILENT_AFTER_S:g} s — is the microphone muted, or is nothing playing?"
        else:
            message = f"sound from {name} again"
        self.session.set_status("running", message)
        self.state_changed.emit(self.state, message)

    def _input_problems(self) -> list[str]:
        """What playing a recording found wrong with it (damage became silence): said with "stopped", since the
        captions of such a file have a hole the user should know about."""
        source = None if self.pipeline is None else self.pipeline.source
        return list(getattr(source, "problems", ()))

    def _close_journal(self) -> None:
        if self.journal is not None:
            self.journal.close()
            self.journal = None

    def _set_state(self, state: str, message: str) -> None:
        """Any thread: the state changes on the GUI thread, in order with the events."""
        self._state_request.emit(state, message)
