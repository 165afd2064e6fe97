"""Live captions from a speech gate's windows: the live text is the offline text of the same audio.

A model whose speech gate decodes windows of the VAD's speech (the demo model; docs/models.md §4) transcribes a
file window by window: speech segments grouped across short gaps, each group decoded with some padding. A
:class:`SpeechWindowStream` runs the same Silero VAD on the same frames as that offline pass, plans the same
windows causally (``inference.audio.live_windows``) and decodes each one, once final, on exactly the samples
the offline pass decodes, so its committed text is the offline transcript, window for window. The open group is
shown as a snapshot (re-decoded about every ``snapshot_every_s`` of audio, less often when the model is slow).

The cost is latency: a group commits when the next speech has gone on long enough to count (0.25 s), or after
a silence long enough that no later speech can change it (about 2.5 s for the demo model); figures in
docs/models.md §4.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Mapping
from typing import Any, Protocol, runtime_checkable

import numpy as np

from inference.audio.live_windows import LiveSpeechWindows, SpeechWindowGate
from inference.audio.spans import Span, SpeechWindow
from inference.audio.speech_tracker import FRAME_SAMPLES, FrameSplitter
from inference.audio.vad import SileroVad
from inference.contract import (
    SAMPLE_RATE,
    Delta,
    ResumePoint,
    Segment,
    Snapshot,
    SpeechEnd,
    StreamEvent,
    Timing,
    Transcript,
    Word,
)
from inference.errors import UsageError


@runtime_checkable
class SpeechWindowEngine(Protocol):
    """An engine whose speech gate decodes windows, and can decode one window as its offline pass does."""

    def speech_window_gate(self) -> SpeechWindowGate | None:
        """The window plan of its speech gate (None: its gate, if any, does not decode windows)."""
        ...

    def transcribe_speech_window(
        self, audio: np.ndarray, window: SpeechWindow, **request_options: Any
    ) -> Transcript:
        """One window of the plan: ``audio`` holds exactly the samples of ``window.window``."""
        ...


class SpeechWindowStream:
    """A ``contract.Stream`` (``Flushable``, ``Resumable``) over a speech-window engine. Not thread-safe."""

    def __init__(
        self,
        engine: SpeechWindowEngine,
        gate: SpeechWindowGate,
        vad: SileroVad,
        request_options: dict[str, Any] | None = None,
        snapshot_every_s: float = 1.0,
        clock: Callable[[], float] = time.perf_counter,
    ) -> None:
        self.engine = engine
        self.vad = vad
        self.vad.reset()  # the offline pass starts Silero from a fresh state at the first sample
        self.options = dict(request_options or {})
        self.snapshot_every_s = snapshot_every_s
        self._clock = clock
        self._plan = LiveSpeechWindows(gate.plan)
        self._padding = gate.plan.padding_samples
        self._splitter = FrameSplitter()
        self._origin = 0  # the whole stream's sample at this stream's sample 0 (a resumed stream's start)
        self._audio = np.zeros(0, dtype=np.float32)  # samples from _audio_start on
        self._audio_start = 0
        # Before each frame since the earliest one a window still to come can need: where it starts, the VAD's
        # state and the plan's (a replacement stream takes over from the first).
        self._checkpoints: deque[tuple[int, str, dict[str, Any]]] = deque()
        self._segment_id = 0
        self._committed: list[str] = []
        self._segments: list[Segment] = []
        self._words: list[Word] = []
        self._language: str | None = None
        self._samples_seen = 0
        self._model_wall_s = 0.0
        self._snapshot_at = 0  # the stream position of the last snapshot
        self._snapshot_cost_s = 0.0
        self._flushed = False
        self._closed = False

    # ------------------------------------------------------------------ contract.Stream
    def push(self, pcm: np.ndarray) -> list[StreamEvent]:
        if self._closed or self._flushed:
            raise UsageError("push after finish or cancel", "open a new stream")
        samples = pcm  # checked where it entered, before the worker boundary (inference/audio/samples.py)
        self._samples_seen += samples.size
        self._audio = np.concatenate([self._audio, samples]) if self._audio.size else samples.copy()
        events: list[StreamEvent] = []
        committed = False
        for frame in self._splitter.frames(samples):
            self._checkpoints.append((self._plan.position, self.vad.snapshot(), self._plan.state()))
            for window in self._plan.step(self.vad.process(frame)):
                events += self._commit(window)
                committed = True
        events += self._snapshot(right_away=committed)
        self._forget_audio()
        return events

    def flush(self) -> list[StreamEvent]:
        """Plan the rest as the offline pass plans the whole stream, and commit it."""
        if self._closed:
            raise UsageError("the stream was already finished or cancelled", "open a new stream")
        if self._flushed:
            return []
        self._flushed = True
        tail = self._splitter.take_pending()
        tail_probability = None
        if tail.size:  # the offline pass zero-pads the last partial frame
            padded = np.zeros(FRAME_SAMPLES, dtype=np.float32)
            padded[: tail.size] = tail
            tail_probability = self.vad.process(padded)
        events: list[StreamEvent] = []
        for window in self._plan.finish(self._origin + self._samples_seen, tail_probability):
            events += self._commit(window)
        return events

    def finish(self) -> Transcript:
        self.flush()
        self._closed = True
        return Transcript(
            text="".join(self._committed).strip(),
            language=self._language,
            words=list(self._words),
            segments=list(self._segments),
            timing=Timing(self._samples_seen / SAMPLE_RATE, self._model_wall_s),
        )

    def cancel(self) -> None:
        self._closed = True
        self._audio = np.zeros(0, dtype=np.float32)
        self._checkpoints.clear()

    # ------------------------------------------------------------------ contract.Resumable
    def resume_point(self) -> ResumePoint:
        """The first frame a window still to come can need: every window before it is committed. The VAD's and
        the plan's state there, and how far windows were committed, let a replacement continue exactly."""
        if self._checkpoints:
            position, vad, plan = self._checkpoints[0]
        else:
            position, vad, plan = self._plan.position, self.vad.snapshot(), self._plan.state()
        given_until, given_window_end = self._plan.given()
        state = {"origin": position, "vad": vad, "plan": plan, "given": [given_until, given_window_end]}
        return ResumePoint(position - self._origin, state=state)

    def resume(self, context: np.ndarray, state: Mapping[str, Any]) -> None:
        """Continue from a dead stream's resume point (a frame boundary): the audio from there on follows."""
        if "plan" not in state:
            return
        self._origin = self._audio_start = int(state["origin"])
        self.vad.restore(str(state["vad"]))
        given_until, given_window_end = state["given"]
        self._plan.restore(dict(state["plan"]), given_until, int(given_window_end))
        self._snapshot_at = self._origin

    # ------------------------------------------------------------------ windows
    def _commit(self, window: SpeechWindow) -> list[StreamEvent]:
        started = self._clock()
        result = self.engine.transcribe_speech_window(self._samples(window.window), window, **self.options)
        self._model_wall_s += self._clock() - started
        text = result.text.strip()
        start_s, end_s = self._local_s(window.window.start), self._local_s(window.speech.end)
        speech_s = self._local_s(window.speech.start)
        segment_id = self._segment_id
        self._segment_id += 1
        if result.language:
            self._language = result.language
        if not text:
            return [SpeechEnd(segment_id, start_s, end_s, "", result.language, speech_s)]
        piece = (" " if self._committed else "") + text
        self._committed.append(piece)
        limit = self._local_s(window.window.end)  # as offline: no word reaches into the next window
        words = tuple(w.shifted(start_s, limit=limit) for w in result.words)
        self._words.extend(words)
        self._segments.append(Segment(text, start_s, end_s, words))
        return [
            Delta(piece, segment_id, start_s, end_s, result.language, speech_s),
            SpeechEnd(segment_id, start_s, end_s, text, result.language, speech_s),
        ]

    def _snapshot(self, right_away: bool) -> list[StreamEvent]:
        """The provisional text of the speech not committed yet, while it is heard (or at once when a commit
        left some behind)."""
        pending = self._plan.pending_speech()
        if self.snapshot_every_s <= 0 or pending is None:
            return []
        position = self._plan.position
        due = max(self.snapshot_every_s, 2 * self._snapshot_cost_s) * SAMPLE_RATE
        if not right_away and (not self._plan.hearing_speech() or position - self._snapshot_at < due):
            return []
        area = Span(self._plan.keep_from(), position)
        if area.length <= 0:
            return []
        started = self._clock()
        result = self.engine.transcribe_speech_window(
            self._samples(area), SpeechWindow(area, area, pending), **self.options
        )
        self._snapshot_cost_s = self._clock() - started
        self._model_wall_s += self._snapshot_cost_s
        self._snapshot_at = position
        text = result.text.strip()
        if not text:
            return []
        text = (" " if self._committed else "") + text
        start_s, end_s = self._local_s(area.start), self._local_s(pending.end)
        return [
            Snapshot(text, self._segment_id, start_s, end_s, result.language, self._local_s(pending.start))
        ]

    # ------------------------------------------------------------------ audio
    def _samples(self, span: Span) -> np.ndarray:
        start, end = span.start - self._audio_start, span.end - self._audio_start
        if start < 0 or end > self._audio.size:
            raise AssertionError(f"window {span} outside the audio kept ({self._audio_start}..)")
        return self._audio[start:end]

    def _forget_audio(self) -> None:
        keep_from = self._plan.keep_from()
        while len(self._checkpoints) > 1 and self._checkpoints[1][0] <= keep_from:
            self._checkpoints.popleft()
        drop = min(keep_from, self._checkpoints[0][0] if self._checkpoints else keep_from) - self._audio_start
        if drop > 0:
            self._audio = self._audio[drop:].copy()
            self._audio_start += drop

    def _local_s(self, sample: int) -> float:
        return (sample - self._origin) / SAMPLE_RATE
