"""Meeting mode's live path (Qt-free): the microphone captioned as "You", what the computer plays as "Others".

``MeetingInput`` (``inference.audio.meeting``, shared with the command line) holds the two captures, cleaned of
bleed; each of its sides is an ``AudioSource`` for a ``LivePipeline`` of its own, and the two pipelines open
their streams on the same engine (one model load in the one worker: a worker serves several streams per engine).

``MeetingPipeline`` has the interface the controller drives a ``LivePipeline`` by. Text events reach ``deliver``
wrapped in ``SpeakerEvent``; errors and figures unwrapped. Stopping drains both streams (at once), delivers each
speaker's final transcript, then the meeting's merged transcript as a plain ``Done``: the session is over.
"""

from __future__ import annotations

import functools
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from app.live.pipeline import Deliver, LivePipeline
from app.live.sources import AudioSource
from app.live.speakers import OTHERS, YOU, SpeakerEvent, merge_finals
from inference.audio.meeting import MeetingInput
from inference.client import BacklogPolicy, RemoteEngine, RemoteStream
from inference.contract import Delta, Done, Snapshot, SpeechEnd, StreamEvent, Transcript

MeetingDeliver = Callable[[Sequence[StreamEvent | SpeakerEvent]], None]

__all__ = ["MeetingDeliver", "MeetingInput", "MeetingPipeline", "live_pipeline"]


class MeetingPipeline:
    """Two live pipelines, "You" and "Others", on one engine; driven like a ``LivePipeline``."""

    def __init__(
        self,
        engine: RemoteEngine,
        source: MeetingInput,
        deliver: MeetingDeliver,
        *,
        on_level: Callable[[float], None] | None = None,
        on_source_end: Callable[[str | None], None] | None = None,
        on_silence: Callable[[bool], None] | None = None,
        request_options: dict[str, Any] | None = None,
        backlog: BacklogPolicy | None = None,
        clock: Callable[[], float] = time.monotonic,
        stream_mode: str = "auto",
    ) -> None:
        self.source = source
        self.deliver = deliver
        self.on_level = on_level
        self.on_silence = on_silence
        self._levels = {YOU: -100.0, OTHERS: -100.0}
        self._silent = {YOU: False, OTHERS: False}
        self._finals: dict[str, Transcript] = {}
        self._lock = threading.Lock()
        sides: tuple[tuple[str, AudioSource], ...] = ((YOU, source.you), (OTHERS, source.others))
        self.pipelines = {
            speaker: LivePipeline(
                engine,
                side,
                self._deliver_as(speaker),
                on_level=functools.partial(self._level, speaker),
                on_source_end=on_source_end,
                on_silence=functools.partial(self._silence, speaker),
                request_options=request_options,
                backlog=backlog,
                clock=clock,
                stream_mode=stream_mode,
            )
            for speaker, side in sides
        }

    # ------------------------------------------------------------------ control
    @property
    def running(self) -> bool:
        return any(pipeline.running for pipeline in self.pipelines.values())

    def start(self) -> None:
        started: list[LivePipeline] = []
        try:
            for pipeline in self.pipelines.values():
                pipeline.start()
                started.append(pipeline)
        except BaseException:
            for pipeline in started:
                pipeline.cancel()
            raise
        self.source.name_after_devices()

    def stop(self, timeout_s: float = 600.0) -> None:
        """Drain both streams at once (call off the GUI thread); then the merged transcript ends the session."""
        if self.pipelines[YOU].running:
            self.source.you.finish()
        threads = [
            threading.Thread(target=pipeline.stop, args=(timeout_s,), name=f"captioneer-stop-{speaker}")
            for speaker, pipeline in self.pipelines.items()
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        with self._lock:
            finished = len(self._finals) == len(self.pipelines)
            finals = dict(self._finals)
        if finished:  # a stream that failed has said so (a fatal error event); nothing is merged then
            self.deliver([Done(merge_finals(finals))])

    def swap_source(self, source: AudioSource) -> None:
        """Continue both streams on another meeting input (one of the devices went away)."""
        if not isinstance(source, MeetingInput):
            raise TypeError("a meeting continues on another meeting input")
        self.pipelines[YOU].swap_source(source.you)
        self.pipelines[OTHERS].swap_source(source.others)
        self.source = source
        source.name_after_devices()

    def cancel(self) -> None:
        for pipeline in self.pipelines.values():
            pipeline.cancel()

    @property
    def ended_while_down(self) -> bool:
        """Stopped while the model's worker was down: the merged transcript is what was heard."""
        return any(pipeline.ended_while_down for pipeline in self.pipelines.values())

    @property
    def stream(self) -> RemoteStream | None:
        """The "You" stream (its figures stand for the meeting's: both run on the same worker)."""
        return self.pipelines[YOU].stream

    def capture_time(self, stream_s: float) -> float | None:
        return self.pipelines[YOU].capture_time(stream_s)

    # ------------------------------------------------------------------ pipelines' threads
    def _deliver_as(self, speaker: str) -> Deliver:
        def deliver(events: list[StreamEvent]) -> None:
            out: list[StreamEvent | SpeakerEvent] = []
            for event in events:
                if isinstance(event, Done):
                    with self._lock:
                        self._finals[speaker] = event.transcript
                if isinstance(event, Delta | Snapshot | SpeechEnd | Done):
                    out.append(SpeakerEvent(speaker, event))
                else:
                    out.append(event)
            self.deliver(out)

        return deliver

    def _level(self, speaker: str, level: float) -> None:
        """The meter shows the louder of the two: either side speaking is something heard."""
        self._levels[speaker] = level
        if self.on_level is not None:
            self.on_level(max(self._levels.values()))

    def _silence(self, speaker: str, silent: bool) -> None:
        """Silent only when both are (a meeting where only one side speaks for a while is not a muted input)."""
        with self._lock:
            before = all(self._silent.values())
            self._silent[speaker] = silent
            after = all(self._silent.values())
        if before != after and self.on_silence is not None:
            self.on_silence(after)


def live_pipeline(
    engine: RemoteEngine,
    source: AudioSource,
    deliver: MeetingDeliver,
    *,
    on_level: Callable[[float], None],
    on_source_end: Callable[[str | None], None],
    on_silence: Callable[[bool], None],
    request_options: dict[str, Any],
    backlog: BacklogPolicy | None,
    clock: Callable[[], float],
    stream_mode: str,
) -> LivePipeline | MeetingPipeline:
    """The pipeline for ``source``: a meeting's two streams, or one."""
    if isinstance(source, MeetingInput):
        return MeetingPipeline(
            engine,
            source,
            deliver,
            on_level=on_level,
            on_source_end=on_source_end,
            on_silence=on_silence,
            request_options=request_options,
            backlog=backlog,
            clock=clock,
            stream_mode=stream_mode,
        )
    return LivePipeline(
        engine,
        source,
        deliver,
        on_level=on_level,
        on_source_end=on_source_end,
        on_silence=on_silence,
        request_options=request_options,
        backlog=backlog,
        clock=clock,
        stream_mode=stream_mode,
    )
