"""Live captions for any engine: Silero VAD closes a speech segment, the engine transcribes it, its text commits.

Engines with their own live path (``Capabilities.streaming``) stream natively; every other engine is
wrapped in a :class:`SegmentedStream`, so any installed model captions live (a model whose speech gate decodes
speech windows, the bundled demo model, gets a ``streaming_windows.SpeechWindowStream`` instead:
:func:`open_vad_stream`). A segment commits when speech is followed by ``end_silence_s`` of non-speech (by
``split_silence_s`` once it has run ``split_after_s``) or reaches ``max_segment_s``; the transcript of a segment is
final. While it grows, the open segment is re-decoded about
every ``snapshot_every_s`` of audio and shown as a revisable snapshot (less often when the model is slow).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from inference.audio.speech_tracker import (
    FRAME_SAMPLES,
    FrameSplitter,
    SpeechEnded,
    SpeechStarted,
    SpeechTracker,
    TrackerRules,
)
from inference.audio.vad import SileroVad
from inference.contract import (
    SAMPLE_RATE,
    Delta,
    Engine,
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
from inference.streaming_windows import SpeechWindowEngine, SpeechWindowStream


@dataclass(frozen=True)
class SegmenterSettings:
    threshold: float = 0.5  # speech starts at this Silero probability ...
    release: float = 0.35  # ... and counts as ended below this one (hysteresis against flicker)
    end_silence_s: float = 0.5
    max_segment_s: float = 20.0
    pre_roll_s: float = 0.5  # audio kept before the detected start, so a soft first word is not cut
    min_speech_s: float = 0.1  # shorter blips (clicks, breaths) are dropped without a model call
    snapshot_every_s: float = 1.0  # provisional text of the open segment; 0 = final text only
    # Once a segment has run split_after_s, split_silence_s of non-speech ends it (0: never): talk without
    # end_silence_s pauses would otherwise be cut mid-word at max_segment_s (tests/bench/README.md, "Long
    # unbroken speech").
    split_after_s: float = 8.0
    split_silence_s: float = 0.096

    @classmethod
    def from_options(cls, options: dict[str, Any]) -> SegmenterSettings:
        known = set(cls.__dataclass_fields__)
        unknown = sorted(set(options) - known)
        if unknown:
            raise UsageError(f"unknown segmenter option(s) {unknown}", f"use {', '.join(sorted(known))}")
        settings = cls(**{k: float(v) for k, v in options.items()})
        if not 0 < settings.release <= settings.threshold < 1:
            raise UsageError("segmenter thresholds must satisfy 0 < release <= threshold < 1")
        if (
            settings.end_silence_s <= 0
            or settings.max_segment_s < 1
            or settings.pre_roll_s < 0
            or settings.snapshot_every_s < 0
            or settings.split_after_s < 0
            or settings.split_silence_s <= 0
        ):
            raise UsageError(
                "segmenter times out of range",
                "end_silence_s > 0, max_segment_s >= 1, pre_roll_s >= 0, snapshot_every_s >= 0, "
                "split_after_s >= 0, split_silence_s > 0",
            )
        return settings

    def tracker_rules(self) -> TrackerRules:
        """A plain hysteresis: a frame at ``release`` or above is speech; ``end_silence_s`` of frames below it,
        the last one included, end the segment."""
        end_silence = self.end_silence_s * SAMPLE_RATE - FRAME_SAMPLES
        return TrackerRules(self.threshold, self.release, end_silence, self.release, end_below=self.release)

    def split_silence(self) -> float:
        """The tracker's ``min_silence`` once a segment has run ``split_after_s`` (counted as end_silence_s)."""
        return min(self.split_silence_s, self.end_silence_s) * SAMPLE_RATE - FRAME_SAMPLES


class SegmentedStream:
    """A ``contract.Stream`` over an offline engine. Not thread-safe; one stream per VAD instance."""

    def __init__(
        self,
        engine: Engine,
        vad: SileroVad,
        request_options: dict[str, Any] | None = None,
        settings: SegmenterSettings | None = None,
        clock: Callable[[], float] = time.perf_counter,
    ) -> None:
        self.engine = engine
        self._clock = clock
        self.vad = vad
        self.vad.reset()
        self.options = dict(request_options or {})
        if engine.capabilities.speech_gate:
            # This VAD has found the segment's speech already: the engine's gate need not run Silero again.
            self.options.setdefault("speech_checked", True)
        self.settings = settings or SegmenterSettings()
        self._frames_seen = 0  # VAD frames consumed since the start of the stream
        self._splitter = FrameSplitter()
        self._tracker = SpeechTracker(self.settings.tracker_rules())
        self._pre_roll: list[np.ndarray] = []
        self._pre_roll_vad: list[str] = []  # the VAD's state before each pre-roll frame
        self._segment_vad = self.vad.snapshot()  # the VAD's state before the open segment's first frame
        self._segment: list[np.ndarray] | None = None  # frames of the open segment
        self._segment_start = 0  # sample index of the open segment's first sample
        self._speech_start = 0  # sample index of its first voiced frame (after the pre-roll)
        self._snapshot_at_s = 0.0  # the open segment's length at its last snapshot
        self._snapshot_cost_s = 0.0  # what the last snapshot decode took
        self._segment_id = 0
        self._committed: list[str] = []
        self._segments: list[Segment] = []
        self._words: list[Word] = []
        self._language: str | None = None
        self._samples_seen = 0
        self._model_wall_s = 0.0
        self._closed = False

    # ------------------------------------------------------------------ contract.Stream
    def push(self, pcm: np.ndarray) -> list[StreamEvent]:
        if self._closed:
            raise UsageError("push after finish or cancel", "open a new stream")
        samples = pcm  # checked where it entered, before the worker boundary (inference/audio/samples.py)
        self._samples_seen += samples.size
        events: list[StreamEvent] = []
        for frame in self._splitter.frames(samples):
            state = self.vad.snapshot()  # before this frame: where a replacement would pick the VAD up
            events.extend(self._frame(frame, self.vad.process(frame), state))
        return events

    def flush(self) -> list[StreamEvent]:
        """Close the open segment (with the samples short of a VAD frame) and return its delta and speech end;
        ``finish`` then only builds the transcript."""
        if self._closed:
            raise UsageError("the stream was already finished or cancelled", "open a new stream")
        events: list[StreamEvent] = []
        if self._segment is not None:
            pending = self._splitter.take_pending()
            if pending.size:
                self._segment.append(pending)
            self._tracker.close()
            events = self._close_segment()
        return events

    def finish(self) -> Transcript:
        self.flush()  # a caller that wanted the last segment's events called flush() first
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
        self._segment = None
        self._pre_roll, self._pre_roll_vad = [], []

    # ------------------------------------------------------------------ contract.Resumable
    def resume_point(self) -> ResumePoint:
        """The open segment's first sample (with its pre-roll), else the pre-roll before the next one: every
        segment before it is closed and committed."""
        if self._segment is not None:
            return ResumePoint(self._segment_start, state={"vad": self._segment_vad})
        start = self._frames_seen * FRAME_SAMPLES - sum(frame.size for frame in self._pre_roll)
        return ResumePoint(
            start, state={"vad": self._pre_roll_vad[0] if self._pre_roll else self.vad.snapshot()}
        )

    def resume(self, context: np.ndarray, state: Mapping[str, Any]) -> None:
        """Segments are independent: a replacement needs no context, only the VAD's state at its start (so it
        hears the replayed audio exactly as this stream did)."""
        if "vad" in state:
            self.vad.restore(str(state["vad"]))
            self._segment_vad = str(state["vad"])

    # ------------------------------------------------------------------ segmentation
    def _frame(self, frame: np.ndarray, probability: float, vad_before: str) -> list[StreamEvent]:
        s = self.settings
        self._frames_seen += 1
        frame_start = (self._frames_seen - 1) * FRAME_SAMPLES
        open_s = len(self._segment) * FRAME_SAMPLES / SAMPLE_RATE if self._segment is not None else 0.0
        split = s.split_after_s > 0 and open_s >= s.split_after_s
        event = self._tracker.step(probability, frame_start, s.split_silence() if split else None)
        if self._segment is None:
            if isinstance(event, SpeechStarted):
                pre_roll = self._pre_roll
                self._segment = [*pre_roll, frame]
                self._segment_start = frame_start - len(pre_roll) * FRAME_SAMPLES
                self._speech_start = frame_start
                self._segment_vad = self._pre_roll_vad[0] if pre_roll else vad_before
                self._snapshot_at_s = 0.0
                self._pre_roll, self._pre_roll_vad = [], []
            else:
                self._pre_roll.append(frame)
                self._pre_roll_vad.append(vad_before)
                keep = int(round(s.pre_roll_s * SAMPLE_RATE / FRAME_SAMPLES))
                if len(self._pre_roll) > keep:
                    del self._pre_roll[: len(self._pre_roll) - keep]
                    del self._pre_roll_vad[: len(self._pre_roll_vad) - keep]
            return []
        self._segment.append(frame)
        length_s = len(self._segment) * FRAME_SAMPLES / SAMPLE_RATE
        if isinstance(event, SpeechEnded) or length_s >= s.max_segment_s:
            self._tracker.close()
            return self._close_segment()
        # A slow model snapshots less often: re-decoding never takes more than half of the audio's time.
        due = max(s.snapshot_every_s, 2 * self._snapshot_cost_s)
        in_dip = self._tracker.dip_from is not None
        if s.snapshot_every_s > 0 and not in_dip and length_s - self._snapshot_at_s >= due:
            return self._snapshot(length_s)
        return []

    def _snapshot(self, length_s: float) -> list[StreamEvent]:
        assert self._segment is not None
        started = self._clock()
        result = self.engine.transcribe(np.concatenate(self._segment), **self.options)
        self._snapshot_cost_s = self._clock() - started
        self._model_wall_s += self._snapshot_cost_s
        self._snapshot_at_s = length_s
        text = result.text.strip()
        if not text:
            return []
        start_s, speech_s = self._segment_start / SAMPLE_RATE, self._speech_start / SAMPLE_RATE
        end_s = self._tracker.voiced_end / SAMPLE_RATE
        # Like the delta it becomes, it follows the committed text after a space (committed + snapshot reads).
        text = (" " if self._committed else "") + text
        return [Snapshot(text, self._segment_id, start_s, end_s, result.language, speech_s)]

    def _close_segment(self) -> list[StreamEvent]:
        assert self._segment is not None
        audio = np.concatenate(self._segment)
        start = self._segment_start
        voiced_s = self._tracker.voiced_frames * FRAME_SAMPLES / SAMPLE_RATE
        self._segment = None
        if voiced_s < self.settings.min_speech_s:
            return []
        started = self._clock()
        result = self.engine.transcribe(audio, **self.options)
        self._model_wall_s += self._clock() - started
        text = result.text.strip()
        # The segment's audio runs on through the closing silence; its speech ends with the last voiced frame.
        start_s, end_s = start / SAMPLE_RATE, min(self._tracker.voiced_end, start + audio.size) / SAMPLE_RATE
        speech_s = self._speech_start / SAMPLE_RATE
        segment_id = self._segment_id
        self._segment_id += 1
        if result.language:
            self._language = result.language
        if not text:
            return [SpeechEnd(segment_id, start_s, end_s, "", result.language, speech_s)]
        piece = (" " if self._committed else "") + text
        self._committed.append(piece)
        words = tuple(w.shifted(start_s) for w in result.words)
        self._words.extend(words)
        self._segments.append(Segment(text, start_s, end_s, words))
        return [
            Delta(piece, segment_id, start_s, end_s, result.language, speech_s),
            SpeechEnd(segment_id, start_s, end_s, text, result.language, speech_s),
        ]


def open_vad_stream(
    engine: Engine, gated: bool, request_options: dict[str, Any], segmenter_options: dict[str, Any]
) -> SegmentedStream | SpeechWindowStream:
    """The VAD-driven live stream of an engine: for a speech-gated model asked for "auto" whose gate decodes
    speech windows, the stream that decodes the offline pass's windows (its text is the offline text; of the
    segmenter options only ``snapshot_every_s`` applies there); else VAD segments one by one."""
    settings = SegmenterSettings.from_options(segmenter_options)
    if gated and isinstance(engine, SpeechWindowEngine) and set(segmenter_options) <= {"snapshot_every_s"}:
        gate = engine.speech_window_gate()
        if gate is not None:
            vad = SileroVad(gate.vad_model)
            return SpeechWindowStream(engine, gate, vad, request_options, settings.snapshot_every_s)
    return SegmentedStream(engine, SileroVad(), request_options, settings)
