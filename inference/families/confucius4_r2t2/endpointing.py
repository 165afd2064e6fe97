"""Endpointed R2T2 streams: Silero VAD closes a segment, its text is kept and a fresh LSP state starts.

docs/families/confucius4_r2t2.md §7.5: stream-aligned 32 ms VAD frames drive a start/end detector whose state
carries across segments; a seed of recent non-speech is prepended when speech starts. A speech end (or a segment
reaching ``max_segment_seconds``) flushes the segment: a final decode whose delta *is* published, a
:class:`SpeechEnd` with the segment's text (when it has text), then a reset. The final text joins the non-empty
segment texts with single spaces. A segment's first decode reads its lead-in and a whole chunk past it (and
waits until two chunks past the previous segment's end); after that the open segment decodes whenever a whole
chunk is buffered, except in a push longer than a chunk (a backlog): that decodes once, at its end, over every
whole chunk (catch-up).

A push that has already decoded leaves the flush of a segment that ends in it to the next push (or to ``flush``
at the end). The decodes and the events stay in the same order (the waiting flush runs before anything else
decodes); only the ended segment's last words and its speech end come one push later. With the first decode's
wait, pushes of one chunk run one decode each across speech ends, quick restarts and ``max_segment_seconds``
cuts: two decodes in one push were the slowest pushes of a live stream.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any, Protocol

import numpy as np

from inference.audio.speech_tracker import (
    FRAME_SAMPLES,
    FrameSplitter,
    SpeechEnded,
    SpeechStarted,
    SpeechTracker,
    TrackerRules,
)
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
)
from inference.errors import UsageError
from inference.families.confucius4_r2t2.lsp import ChunkDecoder, LspRecognizer, StreamOptions
from inference.families.confucius4_r2t2.postprocess import ASR_TEXT_TAG
from inference.families.confucius4_r2t2.streaming import _checked, provisional_tail

FRAME = FRAME_SAMPLES  # Silero frame at 16 kHz
NEG_OFFSET = 0.15  # speech continues until the probability drops below threshold - 0.15


@dataclass(frozen=True)
class EndpointOptions:
    threshold: float = 0.4
    min_speech_ms: int = 100
    min_silence_ms: int = 200
    speech_pad_ms: int = 50
    gap_keep_ms: int = 2000
    max_segment_seconds: float = 20.0
    # Once a segment is this long, a shorter pause ends it (0: never): see SpeechDetector.
    split_after_seconds: float = 8.0
    split_silence_ms: int = 64

    @classmethod
    def from_options(cls, values: dict[str, Any]) -> EndpointOptions:
        """From the session's resolved options (``FamilySpec.resolved_options``: validated, every option present)."""
        return cls(
            threshold=float(values["vad_threshold"]),
            min_speech_ms=int(values["vad_min_speech_ms"]),
            min_silence_ms=int(values["vad_min_silence_ms"]),
            speech_pad_ms=int(values["vad_speech_pad_ms"]),
            gap_keep_ms=int(values["vad_gap_keep_ms"]),
            max_segment_seconds=float(values["max_segment_seconds"]),
            split_after_seconds=float(values["segment_split_seconds"]),
            split_silence_ms=int(values["vad_split_silence_ms"]),
        )


@dataclass
class EndedSegment:
    """A segment the VAD closed whose final decode has not run yet: its recognizer, all its audio (stream
    samples from ``start``) and its id."""

    recognizer: LspRecognizer
    audio: np.ndarray
    start: int
    segment_id: int
    # Whole chunks no decode has read (more than one only when a backlog's push closed it).
    new_chunks: int = 1


class FrameVad(Protocol):
    """A streaming VAD whose state a replacement stream in another process can pick up."""

    def process(self, frame: np.ndarray) -> float: ...

    def snapshot(self) -> str: ...

    def restore(self, snapshot: str) -> None: ...


def _within(value: int, limit: int, what: str) -> int:
    """A size from a resume point, checked against the context it describes."""
    if not 0 <= value <= limit:
        raise UsageError(
            f"a resume point's {what} ({value} samples) does not fit its context ({limit})",
            "resume from the point the stream gave for this audio",
        )
    return value


class SpeechDetector:
    """Speech start/end from per-frame probabilities, in stream samples: the shared tracker under Silero's
    streaming iterator rules (except that any frame under the threshold may end a dip that is old enough),
    its spans padded on both sides.

    A segment that has run ``split_after_seconds`` ends at a pause of ``split_silence_ms``: someone who talks on
    without a pause of ``min_silence_ms`` would otherwise fill a segment up to ``max_segment_seconds``, be cut
    there mid-word, and every chunk on the way re-decodes the segment's whole text (tests/bench/README.md, "Long
    unbroken speech")."""

    def __init__(self, options: EndpointOptions) -> None:
        self.pad = options.speech_pad_ms * SAMPLE_RATE // 1000
        min_silence = options.min_silence_ms * SAMPLE_RATE // 1000
        self.split_silence = min(options.split_silence_ms * SAMPLE_RATE // 1000, min_silence)
        threshold = options.threshold
        rules = TrackerRules(threshold, threshold - NEG_OFFSET, min_silence, threshold, end_below=threshold)
        self._tracker = SpeechTracker(rules)

    @property
    def in_speech(self) -> bool:
        return self._tracker.in_speech

    def state(self, origin: int) -> list[Any]:
        """The tracker's state, its positions counted from stream sample ``origin``: a resumed stream's clock
        starts at its resume point. A replacement that knew only whether speech was going on would start a dip
        already under way afresh, and end (or split) the segment later than this stream would."""
        in_speech, start, dip_from, voiced_frames, voiced_end = self._tracker.state()
        dip = None if dip_from is None else dip_from - origin
        return [in_speech, start - origin, dip, voiced_frames, voiced_end - origin]

    def restore(self, state: list[Any]) -> None:
        self._tracker.restore(state)

    def frame(
        self, probability: float, frame_start: int, split: bool = False
    ) -> tuple[bool, tuple[int, int] | None]:
        """(speech started at this frame, (start, end) span of speech that ended here); ``split``: the segment is
        long enough to end at a pause of ``split_silence_ms``."""
        event = self._tracker.step(probability, frame_start, self.split_silence if split else None)
        if isinstance(event, SpeechStarted):
            return True, None
        if isinstance(event, SpeechEnded):
            # From the padded start to the padded end of the closing dip's first frame.
            return False, (max(0, event.start - self.pad), event.end + FRAME + self.pad)
        return False, None


class EndpointedStream:
    """A ``contract.Stream`` (``Flushable``, ``Resumable``) of LSP segments split by voice activity. Not
    thread-safe."""

    def __init__(
        self,
        decoder_factory: Callable[[], ChunkDecoder],
        options: StreamOptions,
        endpoints: EndpointOptions,
        vad: FrameVad,
        forced_language: str = "",
    ) -> None:
        self.options = options
        self.endpoints = endpoints
        self.vad = vad
        self._decoder_factory = decoder_factory
        self.recognizer = LspRecognizer(decoder_factory(), options, forced_language)
        self.detector = SpeechDetector(endpoints)
        self._chunk = options.chunk_samples
        self._max_segment = max(1, int(endpoints.max_segment_seconds * SAMPLE_RATE))
        split_after = int(endpoints.split_after_seconds * SAMPLE_RATE)
        self._split_after = split_after if split_after > 0 else None
        self._seed_limit = min(self._max_segment - 1, endpoints.gap_keep_ms * SAMPLE_RATE // 1000)
        self._min_speech = endpoints.min_speech_ms * SAMPLE_RATE // 1000
        self._frames = FrameSplitter()  # stream-aligned VAD frames
        self._seed = np.zeros(0, dtype=np.float32)
        self._buffer = np.zeros(0, dtype=np.float32)  # segment audio no decode has read yet
        self._lead_in = 0  # of it, the seed the open segment started with (until its first decode)
        self._previous_end: int | None = None  # where the last closed segment ended (stream samples)
        self._accum = np.zeros(0, dtype=np.float32)  # the open segment's decoded audio
        self._segment_audio = False
        self._segment_samples = 0
        self._segment_start = 0
        self._segment_id = 0
        self._consumed = 0  # stream samples through the VAD
        self._texts: list[str] = []
        self._segments: list[Segment] = []
        self._committed_any = False  # some delta went out (the next segment's first one needs a space)
        self._segment_committed = False
        self._snapshot = ""
        self._language = forced_language
        self._closed = False
        self._model_wall_s = 0.0
        self.decode_calls = 0
        self._ended: EndedSegment | None = None  # closed, its flush running or waiting for the next push
        self._decoded_in_push = False
        self._resumed_lead = ""  # the separator a continued segment's text needs after the dead stream's text

    # ------------------------------------------------------------------ contract.Stream
    def push(self, pcm: np.ndarray) -> list[StreamEvent]:
        if self._closed:
            raise UsageError("push after finish or cancel", "open a new stream")
        samples = _checked(pcm)
        # Catch-up: a push longer than a chunk is a backlog (the client coalesced what queued while the worker was
        # busy). Its open segment decodes once, at the end of the push, over every whole chunk (flushes inside it
        # still decode their segments). A push of at most a chunk decodes as its frames complete chunks, exactly
        # as if the audio came frame by frame.
        catch_up = samples.size > self._chunk
        self._decoded_in_push = False
        events = self._flush_ended()
        for frame in self._frames.frames(samples):
            events += self._frame(frame, decode=not catch_up)
        return events + self._decode_ready_chunks(catch_up)

    def flush(self) -> list[StreamEvent]:
        """The events of a segment that ended in the last push and waits for its flush (``contract.Flushable``;
        the worker sends them before the result). An open segment is still closed by ``finish``."""
        if self._closed:
            raise UsageError("flush after finish or cancel", "open a new stream")
        return self._flush_ended()

    def finish(self) -> Transcript:
        if self._closed:
            raise UsageError("the stream was already finished or cancelled", "open a new stream")
        self._flush_ended()
        self._closed = True
        tail = self._frames.take_pending()
        if tail.size:  # less than a VAD frame: it joins whatever is open
            if self.detector.in_speech or self._segment_audio:
                self._add_segment_audio(tail)
            else:
                self._keep_seed(tail)
            self._consumed += tail.size
        if not self.detector.in_speech and not self._segment_audio and self._seed.size:
            # Quiet speech the VAD ended on would otherwise be lost: the lead-in window gets one decode.
            self._buffer, self._seed = self._seed, np.zeros(0, dtype=np.float32)
            self._segment_audio = True
            self._segment_samples = self._buffer.size
            self._segment_start = self._consumed - self._segment_samples
        if self.detector.in_speech or self._segment_audio:
            self._ended = self._close_segment()
            self._flush_ended()
        total_s = self._consumed / SAMPLE_RATE
        return Transcript(
            text=" ".join(self._texts),
            language=self._language or None,
            segments=list(self._segments),
            timing=Timing(total_s, self._model_wall_s),
        )

    def cancel(self) -> None:
        self._closed = True
        self._buffer = self._accum = self._seed = np.zeros(0, dtype=np.float32)
        self._frames = FrameSplitter()
        self._ended = None

    # ------------------------------------------------------------------ contract.Resumable
    def resume_point(self) -> ResumePoint:
        """The replacement takes over on the last VAD frame this stream heard, in the state it left everything:
        the VAD's recurrent state, the speech tracker and the frame grid, so it ends and splits segments on the
        same frames. Its context is the audio from the earliest part it still needs up to there: a segment whose
        flush waits (with its recognizer), else the open segment (decoded and not yet decoded, with its
        recognizer), else the seed that would lead the next one."""
        ended = self._ended
        if ended is not None:
            start = ended.start
        elif self._segment_audio:
            start = self._segment_start
        else:
            start = self._consumed - self._seed.size
        state: dict[str, Any] = {
            "committed_any": self._committed_any,
            "vad": self.vad.snapshot(),
            "tracker": self.detector.state(start),
            "previous_end": None if self._previous_end is None else self._previous_end - start,
            "snapshot": self._snapshot,
        }
        if ended is not None:
            state["ended"] = {
                **ended.recognizer.checkpoint(),
                "samples": int(ended.audio.size),
                "new_chunks": ended.new_chunks,
            }
        if self._segment_audio:
            state["segment"] = {
                **self.recognizer.checkpoint(),
                "start": self._segment_start - start,
                "decoded": int(self._accum.size),
                "lead_in": self._lead_in,
            }
        else:
            state["seed"] = int(self._seed.size)
        continued = ended.recognizer if ended is not None else self.recognizer
        continues = ended is not None or self._segment_audio
        return ResumePoint(
            start, self._consumed - start, state, continues, continued.committed if continues else ""
        )

    def resume(self, context: np.ndarray, state: Mapping[str, Any]) -> None:
        self._committed_any = bool(state.get("committed_any", False))
        if "vad" not in state:
            return  # a point from before any audio
        audio = _checked(context).copy()
        self.vad.restore(str(state["vad"]))
        self.detector.restore(list(state["tracker"]))
        self._consumed = audio.size
        previous = state.get("previous_end")
        self._previous_end = None if previous is None else int(previous)
        self._snapshot = str(state.get("snapshot", ""))
        ended, segment = state.get("ended"), state.get("segment")
        if ended is not None:
            self.recognizer.resume_from(dict(ended))
            samples = _within(int(ended["samples"]), audio.size, "ended segment")
            self._ended = EndedSegment(self.recognizer, audio[:samples], 0, 0, int(ended["new_chunks"]))
            self._segment_committed = bool(self.recognizer.committed)
            self._segment_id = 1
            self.recognizer = LspRecognizer(
                self._decoder_factory(), self.options, self.recognizer.forced_language
            )
        if segment is not None:
            start = _within(int(segment["start"]), audio.size, "open segment")
            decoded = _within(int(segment["decoded"]), audio.size - start, "decoded audio")
            self.recognizer.resume_from(dict(segment))
            self._segment_audio = True
            self._segment_start = start
            self._segment_samples = audio.size - start
            self._accum = audio[start : start + decoded]
            self._buffer = audio[start + decoded :]
            self._lead_in = int(segment["lead_in"])
            if ended is None:
                self._segment_committed = bool(self.recognizer.committed)
        else:
            self._seed = audio[audio.size - _within(int(state["seed"]), audio.size, "seed") :]
        continued = ended if ended is not None else segment
        if continued is not None:
            self._resumed_lead = " " if self._committed_any and not self._segment_committed else ""

    # ------------------------------------------------------------------ frames
    def _frame(self, frame: np.ndarray, decode: bool) -> list[StreamEvent]:
        split = self._split_after is not None and self._segment_samples >= self._split_after
        started, ended = self.detector.frame(self.vad.process(frame), self._consumed, split)
        end_requested = ended is not None and ended[1] - ended[0] >= self._min_speech
        # Shorter bursts (clicks, coughs) stay absorbed in the open segment.
        if started and not self._segment_audio:
            self._segment_audio = True
            self._buffer = np.concatenate([self._buffer, self._seed])
            self._segment_samples += self._seed.size
            self._lead_in = self._seed.size
            self._seed = np.zeros(0, dtype=np.float32)
            self._segment_start = self._consumed - self._segment_samples
        events: list[StreamEvent] = []
        if self.detector.in_speech or self._segment_audio or end_requested:
            offset = 0
            while offset < frame.size:
                if not self._segment_audio:
                    self._segment_audio = True
                    self._segment_start = self._consumed + offset
                take = min(frame.size - offset, self._max_segment - self._segment_samples)
                self._add_segment_audio(frame[offset : offset + take])
                offset += take
                if self._segment_samples == self._max_segment:
                    events += self._end_segment()
        else:
            self._keep_seed(frame)
        self._consumed += frame.size
        if end_requested and self._segment_audio:
            events += self._end_segment()
        if decode:
            events += self._decode_ready_chunks()
        return events

    def _keep_seed(self, samples: np.ndarray) -> None:
        seed = np.concatenate([self._seed, samples])
        self._seed = seed[seed.size - self._seed_limit :] if seed.size > self._seed_limit else seed

    def _add_segment_audio(self, samples: np.ndarray) -> None:
        self._buffer = np.concatenate([self._buffer, samples])
        self._segment_samples += samples.size

    def _decode_ready_chunks(self, catch_up: bool = False) -> list[StreamEvent]:
        """One decode over every whole chunk buffered (a backlog's at once): each decode re-reads all the segment's
        audio, so decoding them one by one would cost that many decodes for the same audio. A backlog's decode may
        generate ``max_tokens`` per chunk it adds (a segment's first decode, per whole chunk past its lead-in)."""
        if not self._accum.size:
            # A segment's first decode reads all it holds once a whole chunk has come past its lead-in (at speech
            # start the buffer is the seed and one frame of speech: a decode there would find no words) and two
            # past the previous segment's end (whose flush runs in between): one decode per chunk of audio.
            past_lead_in = self._buffer.size - self._lead_in
            previous = self._previous_end
            close_behind = (
                previous is not None and self._segment_start + self._buffer.size - previous < 2 * self._chunk
            )
            if past_lead_in < self._chunk or close_behind:
                return []
            take, new_chunks = self._buffer.size, past_lead_in // self._chunk
        else:
            take = self._buffer.size // self._chunk * self._chunk
            new_chunks = take // self._chunk if catch_up else 1
        if not take:
            return []
        events = self._flush_ended()  # an ended segment's events come first
        self._accum = np.concatenate([self._accum, self._buffer[:take]])
        self._buffer = self._buffer[take:]
        self._lead_in = 0
        outcome = self._decode(self.recognizer, self._accum, final=False, new_chunks=new_chunks)
        return events + self._delta(
            outcome, self.recognizer, self._segment_start, self._accum.size, self._segment_id
        )

    def _decode(
        self, recognizer: LspRecognizer, audio: np.ndarray, final: bool, new_chunks: int = 1
    ):  # -> ChunkOutcome
        started = time.perf_counter()
        outcome = recognizer.decode_chunk(audio, final, publish=True, new_chunks=new_chunks)
        self._model_wall_s += time.perf_counter() - started
        self.decode_calls += 1
        self._decoded_in_push = True
        return outcome

    def _delta(
        self,
        outcome,  # ChunkOutcome
        recognizer: LspRecognizer,
        start: int,
        decoded: int,
        segment_id: int,
        snapshot: bool = True,
    ) -> list[StreamEvent]:
        """The delta of a decode of ``decoded`` samples of the segment from ``start`` (a segment's first one
        after earlier text starts with a space) and the snapshot."""
        start_s = start / SAMPLE_RATE
        end_s, language = start_s + decoded / SAMPLE_RATE, outcome.language or None
        events: list[StreamEvent] = []
        if outcome.delta:
            text = (" " if self._committed_any and not self._segment_committed else "") + outcome.delta
            self._committed_any = self._segment_committed = True
            events.append(Delta(text, segment_id, start_s, end_s, language))
        tail = provisional_tail(outcome.text, recognizer.committed)
        if tail and self._committed_any and not self._segment_committed:
            tail = " " + tail
        if snapshot and (outcome.delta or tail != self._snapshot):
            events.append(Snapshot(tail, segment_id, start_s, end_s, language))
            self._snapshot = tail
        return events

    def _end_segment(self) -> list[StreamEvent]:
        """Close the open segment; flush it now unless this push has decoded already (then the next push does,
        before anything else decodes)."""
        events = self._flush_ended()
        self._ended = self._close_segment()
        return events if self._decoded_in_push else events + self._flush_ended()

    def _close_segment(self) -> EndedSegment:
        """The open segment with all its audio; a fresh recognizer (and decoder caches) for the next one. The VAD
        state carries on."""
        audio = np.concatenate([self._accum, self._buffer]) if self._buffer.size else self._accum
        ended = EndedSegment(
            self.recognizer, audio, self._segment_start, self._segment_id, self._buffer.size // self._chunk
        )
        self._previous_end = self._segment_start + audio.size
        self.recognizer = LspRecognizer(
            self._decoder_factory(), self.options, self.recognizer.forced_language
        )
        self._buffer = self._accum = np.zeros(0, dtype=np.float32)
        self._lead_in = 0
        self._segment_audio = False
        self._segment_samples = 0
        self._segment_id += 1
        return ended

    def _flush_ended(self) -> list[StreamEvent]:
        if self._ended is None:
            return []
        events = self._flush(self._ended)
        self._ended = None
        return events

    def _flush(self, ended: EndedSegment) -> list[StreamEvent]:
        """The segment's final decode, its delta and its speech end."""
        recognizer = ended.recognizer
        start, end = ended.start, ended.start + ended.audio.size
        events: list[StreamEvent] = []
        text = ""
        if ended.audio.size:
            outcome = self._decode(recognizer, ended.audio, final=True, new_chunks=ended.new_chunks)
            # The decode's delta stops unfixed_token_num tokens short; the segment's text is final here, so the
            # rest goes out too and the deltas add up to the segment's text (architecture.md §3.2 rule 3).
            rest = recognizer.commit_rest(outcome.text)
            outcome = replace(outcome, delta=outcome.delta + rest) if rest else outcome
            text = outcome.text.replace(ASR_TEXT_TAG, "")  # the text its deltas published (§8 item 2)
            # The SpeechEnd below retires the snapshot.
            events += self._delta(
                outcome, recognizer, start, ended.audio.size, ended.segment_id, snapshot=False
            )
        if recognizer.language:
            self._language = recognizer.language
        language = recognizer.language or None
        if text:
            lead, self._resumed_lead = self._resumed_lead, ""
            self._texts.append(lead + text)
            self._segments.append(Segment(text, start / SAMPLE_RATE, end / SAMPLE_RATE))
            events.append(SpeechEnd(ended.segment_id, start / SAMPLE_RATE, end / SAMPLE_RATE, text, language))
        self._segment_committed = False
        self._snapshot = ""
        return events
