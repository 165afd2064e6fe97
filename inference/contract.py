"""The contract every part of Captioneer speaks: engines, streams, results and events.

Engines, the worker, the client, the CLI, the GUI and the server all use these types, so a fact such as "a delta
is committed text" or "audio is 16 kHz" lives here once (docs/architecture.md §3). Only the standard library and
:mod:`inference.errors` are imported; numpy appears in annotations only.

A :class:`Delta` is committed, append-only text; a :class:`Snapshot` is a segment's whole provisional text and
replaces the previous one; a delta or speech end of a segment drops its snapshot. Every event carries its segment
and audio-relative times, and survives a JSON round trip. Engines refuse NaN/Inf samples with a ``UsageError``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, runtime_checkable

from inference.errors import Cancelled, UsageError

if TYPE_CHECKING:
    import numpy as np

SAMPLE_RATE = 16000
"""Every engine, stream and protocol message takes mono float32 samples at this rate."""

BACKEND_NAMES = ("auto", "cpu", "cuda", "metal", "vulkan")
"""The ggml backends a request may name (``auto`` prefers a GPU); :mod:`inference.native.backend` opens them."""


# ------------------------------------------------------------------------------------------ results


def _round(value: float | None, digits: int = 3) -> float | None:
    return None if value is None else round(float(value), digits)


@dataclass(frozen=True)
class Word:
    """``end_s`` is the reference's end (Parakeet's runs up to the next word's start); ``voiced_end_s``, where
    known, is where the word's own sound ends (its last token), which subtitles use so cues leave silences."""

    text: str
    start_s: float
    end_s: float
    confidence: float | None = None
    voiced_end_s: float | None = None

    @property
    def sound_end_s(self) -> float:
        return self.end_s if self.voiced_end_s is None else min(self.voiced_end_s, self.end_s)

    def shifted(self, offset: float, limit: float | None = None) -> Word:
        """The same word ``offset`` seconds later (times clipped to ``limit``)."""

        def move(t: float | None) -> float | None:
            return None if t is None else (t + offset if limit is None else min(t + offset, limit))

        return Word(self.text, move(self.start_s), move(self.end_s), self.confidence, move(self.voiced_end_s))  # type: ignore[arg-type]

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"word": self.text, "start": _round(self.start_s), "end": _round(self.end_s)}
        if self.confidence is not None:
            out["confidence"] = _round(self.confidence, 4)
        if self.voiced_end_s is not None:
            out["voiced_end"] = _round(self.voiced_end_s)
        return out

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Word:
        voiced = data.get("voiced_end")
        return cls(
            str(data["word"]),
            float(data["start"]),
            float(data["end"]),
            data.get("confidence"),
            None if voiced is None else float(voiced),
        )


@dataclass(frozen=True)
class Segment:
    text: str
    start_s: float
    end_s: float
    words: tuple[Word, ...] = ()
    speaker: str | None = None  # who said it, where a transcript has speakers (the app's meeting mode)

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "text": self.text,
            "start": _round(self.start_s),
            "end": _round(self.end_s),
            "words": [w.to_json() for w in self.words],
        }
        if self.speaker is not None:
            data["speaker"] = self.speaker
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Segment:
        words = tuple(Word.from_json(w) for w in data.get("words", ()))
        speaker = data.get("speaker")
        return cls(
            str(data["text"]),
            float(data["start"]),
            float(data["end"]),
            words,
            str(speaker) if speaker is not None else None,
        )


@dataclass(frozen=True)
class Timing:
    audio_s: float
    wall_s: float

    @property
    def rtf(self) -> float:
        """Real-time factor: wall seconds per audio second (lower is faster)."""
        return self.wall_s / self.audio_s if self.audio_s > 0 else 0.0

    def to_json(self) -> dict[str, float]:
        return {"audio_s": round(self.audio_s, 3), "wall_s": round(self.wall_s, 4), "rtf": round(self.rtf, 4)}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Timing:
        return cls(float(data["audio_s"]), float(data["wall_s"]))


@dataclass
class Transcript:
    text: str
    language: str | None = None
    words: list[Word] = field(default_factory=list)
    segments: list[Segment] = field(default_factory=list)
    token_ids: list[int] = field(default_factory=list)
    timing: Timing | None = None
    # Voiced stretches (seconds) a VAD found in the audio: subtitles of text without word times show it only
    # while someone speaks. Set by whoever renders subtitles (the CLI, the server), not by engines.
    speech: list[tuple[float, float]] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "text": self.text,
            "language": self.language,
            "words": [w.to_json() for w in self.words],
            "segments": [s.to_json() for s in self.segments],
            "token_ids": list(self.token_ids),
            "timing": self.timing.to_json() if self.timing else None,
        }
        if self.speech:
            data["speech"] = [list(stretch) for stretch in self.speech]
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Transcript:
        timing = data.get("timing")
        return cls(
            text=str(data["text"]),
            language=data.get("language"),
            words=[Word.from_json(w) for w in data.get("words", ())],
            segments=[Segment.from_json(s) for s in data.get("segments", ())],
            token_ids=[int(t) for t in data.get("token_ids", ())],
            timing=Timing.from_json(timing) if timing else None,
            speech=[(float(a), float(b)) for a, b in data.get("speech", ())],
        )


# ------------------------------------------------------------------------------------------ events


# ``speech_start_s`` (Delta, Snapshot, SpeechEnd): where the segment's speech begins, after the audio a VAD keeps
# before it (the pre-roll, which ``start_s`` includes so a soft first word reaches the model). Displays and
# subtitles use it: a pause is measured from the end of one segment's speech to the start of the next one's.
# None: the stream does not know, and ``start_s`` is the best start there is. ``end_s`` is the speech's end already.


@dataclass(frozen=True)
class Delta:
    """Committed text of ``segment_id``: append-only, never revised (include its leading space)."""

    type: ClassVar[str] = "delta"
    text: str
    segment_id: int = 0
    start_s: float | None = None
    end_s: float | None = None
    language: str | None = None
    speech_start_s: float | None = None


@dataclass(frozen=True)
class Snapshot:
    """The whole provisional text of ``segment_id``; replaces the previous snapshot of that segment."""

    type: ClassVar[str] = "snapshot"
    text: str
    segment_id: int = 0
    start_s: float | None = None
    end_s: float | None = None
    language: str | None = None
    speech_start_s: float | None = None


@dataclass(frozen=True)
class SpeechEnd:
    """Segment ``segment_id`` is closed: ``text`` is its authoritative committed text, no snapshot remains."""

    type: ClassVar[str] = "speech_end"
    segment_id: int
    start_s: float
    end_s: float
    text: str = ""
    language: str | None = None
    speech_start_s: float | None = None


@dataclass(frozen=True)
class Done:
    """The stream or job finished; ``transcript`` is the authoritative final result."""

    type: ClassVar[str] = "done"
    transcript: Transcript


@dataclass(frozen=True)
class ErrorEvent:
    """Something went wrong. ``kind`` is machine-readable (see ``ERROR_KINDS``); message and fix are for people."""

    type: ClassVar[str] = "error"
    kind: str
    message: str
    fix: str | None = None
    fatal: bool = True  # False: the stream goes on (e.g. after a worker restart)


@dataclass(frozen=True)
class Progress:
    """Progress of a long step (``stage``: load, convert, transcribe). ``total`` None: unknown length."""

    type: ClassVar[str] = "progress"
    stage: str
    done: float
    total: float | None = None
    message: str = ""


@dataclass(frozen=True)
class Stats:
    """Live figures of a stream: audio processed, real-time factor, backlog and per-chunk latency."""

    type: ClassVar[str] = "stats"
    audio_s: float
    wall_s: float
    backlog_s: float = 0.0
    latency_s: float | None = None

    @property
    def rtf(self) -> float:
        return self.wall_s / self.audio_s if self.audio_s > 0 else 0.0


StreamEvent = Delta | Snapshot | SpeechEnd | Done | ErrorEvent | Progress | Stats
EVENT_TYPES: dict[str, type] = {
    cls.type: cls for cls in (Delta, Snapshot, SpeechEnd, Done, ErrorEvent, Progress, Stats)
}
ERROR_KINDS = (
    "usage",  # a bad option or call: fix the request
    "input",  # unreadable or invalid audio
    "model",  # a missing, incompatible or corrupt model
    "backend",  # the native backend failed
    "unsupported",  # the loaded engine cannot do this
    "out_of_memory",
    "worker_crashed",  # the worker process died (signal or exit)
    "worker_hung",  # the worker stopped answering and was killed
    "worker_restarted",  # not fatal: the worker died; a new one is starting and will replay the audio
    "worker_resumed",  # not fatal, a notice: the new worker took the stream over
    "worker_failed",  # not fatal: the restart limit tripped; the stream stays open until a worker is revived
    "backlog",  # audio arrives faster than it is transcribed and the policy refused it
    "cancelled",
    "internal",  # a bug: report it
)


def event_to_json(event: StreamEvent) -> dict[str, Any]:
    """A JSON-ready dict with a ``type`` key; ``event_from_json`` reverses it."""
    if isinstance(event, Done):  # flat: {"type": "done", "text": ..., "words": ..., ...}
        return {"type": event.type, **event.transcript.to_json()}
    out: dict[str, Any] = {"type": event.type}
    for f in fields(event):  # type: ignore[arg-type]
        value = getattr(event, f.name)
        if isinstance(value, Transcript):
            value = value.to_json()
        elif isinstance(value, float):
            value = round(value, 4)
        out[f.name] = value
    return out


def event_from_json(data: Mapping[str, Any]) -> StreamEvent:
    kind = data.get("type")
    cls = EVENT_TYPES.get(str(kind))
    if cls is None:
        raise UsageError(f"unknown event type {kind!r}", f"expected one of {', '.join(EVENT_TYPES)}")
    if cls is Done:
        return Done(Transcript.from_json(data))
    values = {f.name: data[f.name] for f in fields(cls) if f.name in data}
    return cls(**values)  # type: ignore[no-any-return]


def committed_text(events: list[StreamEvent]) -> str:
    """The committed text a list of events adds up to (the concatenation of its deltas)."""
    return "".join(e.text for e in events if isinstance(e, Delta))


# ------------------------------------------------------------------------------------------ engines


@dataclass(frozen=True)
class Capabilities:
    """What a loaded engine can do, reported by the engine itself (not by its family's JSON spec).

    ``streaming``: the engine has its own live path (``open_stream``). Without it, live audio is
    still captioned segment by segment (``inference.streaming.SegmentedStream``).
    ``snapshots``: its live path publishes revisable provisional text.
    ``streams_per_engine``: how many streams may be open at once on one loaded engine (they share its
    weights; each stream has its own state).
    ``speech_gate``: the model invents words in non-speech, so its transcripts keep only the VAD's speech
    (offline: the engine runs Silero itself; live streams in "auto" mode are VAD-segmented). Such an engine takes
    the request option ``speech_checked=True`` (the caller's VAD already found this audio to be speech, as
    ``SegmentedStream`` has) and then runs no VAD pass of its own.
    """

    streaming: bool = False
    snapshots: bool = False
    hotwords: bool = False
    word_timestamps: bool = False
    language_detection: bool = False
    context: bool = False
    streams_per_engine: int = 8
    speech_gate: bool = False

    def to_json(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Capabilities:
        return cls(**{f.name: data[f.name] for f in fields(cls) if f.name in data})


class CancelToken:
    """Set from any thread; long jobs call ``check()`` between spans/windows and stop with ``Cancelled``."""

    def __init__(self) -> None:
        self._event = threading.Event()

    def cancel(self) -> None:
        self._event.set()

    @property
    def cancelled(self) -> bool:
        return self._event.is_set()

    def check(self) -> None:
        if self._event.is_set():
            raise Cancelled("the transcription was cancelled")


ProgressCallback = Callable[[Progress], None]


@dataclass(frozen=True)
class JobControl:
    """What a long job checks between its steps (spans, windows): cancellation first, then progress."""

    progress: ProgressCallback | None = None
    cancel: CancelToken | None = None
    stage: str = "transcribe"

    def step(self, done: float, total: float | None, message: str = "") -> None:
        if self.cancel is not None:
            self.cancel.check()
        if self.progress is not None:
            self.progress(Progress(self.stage, done, total, message))


@runtime_checkable
class Stream(Protocol):
    """A live transcription. Not thread-safe: one caller pushes, in order."""

    def push(self, pcm: np.ndarray) -> list[StreamEvent]:
        """Feed float32 mono ``SAMPLE_RATE`` samples; returns the events they produced (maybe none)."""
        ...

    def finish(self) -> Transcript:
        """Flush what is buffered and return the authoritative final transcript; the stream is closed.

        The tail it flushes may commit text that no delta announced (a segment still open, the LSP
        tail): the final transcript, not the concatenation of deltas, is the stream's last word.
        """
        ...

    def cancel(self) -> None:
        """Drop the stream without a result (an aborted push-to-talk); idempotent."""
        ...


@dataclass(frozen=True)
class ResumePoint:
    """Where a replacement stream can take over from this one, in this stream's samples.

    Everything before ``start_sample`` is reflected in the committed text already. A new stream given the
    audio from there on continues without losing or repeating a word: its first ``context_samples`` only
    prime it (``Resumable.resume``, no events), the rest is pushed as usual. ``state`` (JSON values) is what
    it needs besides audio, such as the committed text that belongs to the context.
    ``continues_segment``: the new stream's segment 0 is this stream's open segment, not a new one.
    ``overlap_text``: the end of the committed text that belongs to the context; the new stream's final
    transcript covers that audio again, so its text replaces this overlap instead of following it.
    """

    start_sample: int
    context_samples: int = 0
    state: dict[str, Any] = field(default_factory=dict)
    continues_segment: bool = False
    overlap_text: str = ""

    def to_json(self) -> dict[str, Any]:
        return {
            "start_sample": self.start_sample,
            "context_samples": self.context_samples,
            "state": self.state,
            "continues_segment": self.continues_segment,
            "overlap_text": self.overlap_text,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ResumePoint:
        return cls(
            int(data["start_sample"]),
            int(data.get("context_samples", 0)),
            dict(data.get("state") or {}),
            bool(data.get("continues_segment", False)),
            str(data.get("overlap_text", "")),
        )


@runtime_checkable
class Resumable(Protocol):
    """A stream that a fresh stream can continue after its process died (the client replays the audio)."""

    def resume_point(self) -> ResumePoint:
        """Where a replacement would start now; asked after every push."""
        ...

    def resume(self, context: np.ndarray, state: Mapping[str, Any]) -> None:
        """On a new stream, before any push: take over from a ``ResumePoint`` of a dead one."""
        ...


@runtime_checkable
class Flushable(Protocol):
    """A stream whose ``finish`` closes something open (a VAD segment): ``flush`` does that first and returns
    its events (the last delta, its speech end), so they reach the caller like any other push's."""

    def flush(self) -> list[StreamEvent]:
        """Close what is open and return its events; ``finish`` afterwards only builds the transcript."""
        ...


@runtime_checkable
class Engine(Protocol):
    """A loaded model. ``transcribe`` and streams run on one thread at a time (the worker's)."""

    family: str
    capabilities: Capabilities

    def transcribe(
        self,
        audio: np.ndarray,
        *,
        progress: ProgressCallback | None = None,
        cancel: CancelToken | None = None,
        **request_options: Any,
    ) -> Transcript: ...

    def open_stream(self, **request_options: Any) -> Stream: ...

    def close(self) -> None: ...


class OfflineJob(Protocol):
    """An offline transcription fed a file's audio in blocks (``inference/offline_jobs.py``): its transcript is
    the one ``Engine.transcribe`` gives for the same audio. ``passes`` is 1, or 2 when the plan needs the whole
    clip first (its length, its VAD speech): then the same audio is fed twice."""

    passes: int

    def feed(self, pcm: np.ndarray) -> None:
        """The next block of the current pass (mono float32 at ``SAMPLE_RATE``, checked at the boundary)."""
        ...

    def end_pass(self) -> None:
        """The current pass's audio has all arrived."""
        ...

    def finish(self) -> Transcript:
        """After the last pass: the transcript."""
        ...


@runtime_checkable
class StreamedOffline(Protocol):
    """An engine that plans a long file's windows as its audio arrives, holding only what the next window
    needs (engines without it are fed through ``offline_jobs.WholeClipJob``)."""

    def open_offline_job(
        self,
        *,
        progress: ProgressCallback | None = None,
        cancel: CancelToken | None = None,
        **request_options: Any,
    ) -> OfflineJob: ...
