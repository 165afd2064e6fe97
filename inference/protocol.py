"""Wire messages between the client and the worker process: typed, versioned, audio as binary frames.

A frame is ``[4-byte little-endian header length][UTF-8 JSON header][raw payload]``. The header holds
the message type and its fields; a message with audio carries it as the payload (float32 little-endian
samples), never as a JSON list of numbers. Both sides check ``PROTOCOL_VERSION`` in the first exchange
(``Hello``), so a client and a worker from different installs refuse each other with a clear message.
"""

from __future__ import annotations

import json
import struct
from dataclasses import dataclass, field, fields
from typing import Any, ClassVar

import numpy as np

from inference.audio.samples import checked_samples
from inference.contract import Capabilities, StreamEvent, Transcript, event_from_json, event_to_json
from inference.errors import WorkerError

PROTOCOL_VERSION = 5  # 4: streamed offline jobs (OpenJob/JobAudio/JobPassEnd); 5: the worker's log lines
_HEADER = struct.Struct("<I")


# ---------------------------------------------------------------------------------------- requests


@dataclass(frozen=True)
class Hello:
    type: ClassVar[str] = "hello"
    version: int = PROTOCOL_VERSION
    pid: int = 0


@dataclass(frozen=True)
class LoadModel:
    """Load ``model_path`` as engine ``engine_id``. ``factory`` ("module:function") overrides the
    family registry (test engines); progress arrives as ``EventMessage(Progress)`` with this id."""

    type: ClassVar[str] = "load"
    request_id: int
    engine_id: str
    model_path: str
    family: str | None = None
    session_options: dict[str, Any] = field(default_factory=dict)
    backend: str = "auto"
    threads: int | None = None
    factory: str | None = None


@dataclass(frozen=True)
class UnloadModel:
    type: ClassVar[str] = "unload"
    request_id: int
    engine_id: str


@dataclass(frozen=True)
class Transcribe:
    type: ClassVar[str] = "transcribe"
    request_id: int
    engine_id: str
    options: dict[str, Any] = field(default_factory=dict)
    pcm: np.ndarray | None = None


@dataclass(frozen=True)
class CancelJob:
    type: ClassVar[str] = "cancel_job"
    request_id: int


@dataclass(frozen=True)
class OpenJob:
    """A streamed offline transcription: a file's audio arrives in blocks, so neither side holds all of it.

    The worker answers ``JobOpened`` with how many passes over the audio the engine needs (a second pass when
    its plan needs the whole clip first: its length, its VAD speech). Each pass is ``JobAudio`` blocks (each
    answered by ``JobTook``, which paces the sender) and a ``JobPassEnd``; the last pass's end is answered by
    ``Result`` for ``request_id`` (or ``Failed``). ``expected_samples`` (from the file's header) only sizes
    progress until the first pass has counted the audio."""

    type: ClassVar[str] = "open_job"
    request_id: int
    engine_id: str
    options: dict[str, Any] = field(default_factory=dict)
    expected_samples: int | None = None


@dataclass(frozen=True)
class JobAudio:
    """Block ``seq`` (counted per pass) of a streamed job's current pass."""

    type: ClassVar[str] = "job_audio"
    job_id: int
    seq: int
    pcm: np.ndarray | None = None


@dataclass(frozen=True)
class JobPassEnd:
    type: ClassVar[str] = "job_pass_end"
    job_id: int


@dataclass(frozen=True)
class OpenStream:
    type: ClassVar[str] = "open_stream"
    request_id: int
    engine_id: str
    stream_id: str
    options: dict[str, Any] = field(default_factory=dict)
    segmenter: dict[str, Any] = field(default_factory=dict)
    mode: str = "auto"  # auto: the engine's own live path if it has one; native; segmented (VAD segments)
    resume: dict[str, Any] | None = None  # a ResumePoint's state: this stream continues one whose worker died
    pcm: np.ndarray | None = None  # with ``resume``: the context audio that primes the new stream


@dataclass(frozen=True)
class PushAudio:
    """``seq`` counts pushes per stream; the worker answers each with ``Pushed`` (events + timing)."""

    type: ClassVar[str] = "push"
    stream_id: str
    seq: int
    pcm: np.ndarray | None = None


@dataclass(frozen=True)
class FinishStream:
    type: ClassVar[str] = "finish"
    request_id: int
    stream_id: str


@dataclass(frozen=True)
class CancelStream:
    type: ClassVar[str] = "cancel_stream"
    stream_id: str


@dataclass(frozen=True)
class Ping:
    type: ClassVar[str] = "ping"
    nonce: int


@dataclass(frozen=True)
class Shutdown:
    type: ClassVar[str] = "shutdown"


# --------------------------------------------------------------------------------------- responses


@dataclass(frozen=True)
class Loaded:
    type: ClassVar[str] = "loaded"
    request_id: int
    engine_id: str
    family: str
    capabilities: dict[str, Any]
    load_s: float
    native: str = ""  # the native build the engine runs on (ggml's CPU backend variant), for the app's log

    @property
    def caps(self) -> Capabilities:
        return Capabilities.from_json(self.capabilities)


@dataclass(frozen=True)
class Opened:
    type: ClassVar[str] = "opened"
    request_id: int
    stream_id: str
    kind: str  # "native" (the engine's own live path) or "segmented" (VAD segments, transcribed offline)


@dataclass(frozen=True)
class JobOpened:
    """Streamed job ``job_id`` (its OpenJob's request id) is open and needs ``passes`` passes over the audio."""

    type: ClassVar[str] = "job_opened"
    job_id: int
    passes: int


@dataclass(frozen=True)
class JobTook:
    """The worker has taken block ``seq`` of job ``job_id`` (and done the work it allowed)."""

    type: ClassVar[str] = "job_took"
    job_id: int
    seq: int


@dataclass(frozen=True)
class Decoding:
    """The worker began decoding push ``seq`` of ``stream_id``: if it dies before ``Pushed``, it died on that
    audio (the client's evidence that audio, not chance, kills the model)."""

    type: ClassVar[str] = "decoding"
    stream_id: str
    seq: int


@dataclass(frozen=True)
class Pushed:
    """The worker processed push ``seq`` of ``stream_id`` in ``wall_s`` seconds and it produced ``events``."""

    type: ClassVar[str] = "pushed"
    stream_id: str
    seq: int
    samples: int
    wall_s: float
    events: list[dict[str, Any]] = field(default_factory=list)
    resume: dict[str, Any] | None = None  # the stream's ResumePoint after this push (resumable streams)

    def stream_events(self) -> list[StreamEvent]:
        return [event_from_json(e) for e in self.events]


@dataclass(frozen=True)
class Result:
    """The answer to a request: a transcript (transcribe, finish) or nothing (unload)."""

    type: ClassVar[str] = "result"
    request_id: int
    transcript: dict[str, Any] | None = None
    wall_s: float = 0.0

    def as_transcript(self) -> Transcript:
        if self.transcript is None:
            raise WorkerError("the worker answered without a transcript", "report this as a bug")
        return Transcript.from_json(self.transcript)


@dataclass(frozen=True)
class EventMessage:
    """An event outside a push: progress of request ``request_id``, or a stream's asynchronous error."""

    type: ClassVar[str] = "event"
    event: dict[str, Any]
    request_id: int | None = None
    stream_id: str | None = None

    @classmethod
    def of(
        cls, event: StreamEvent, request_id: int | None = None, stream_id: str | None = None
    ) -> EventMessage:
        return cls(event_to_json(event), request_id, stream_id)


@dataclass(frozen=True)
class Failed:
    """Request ``request_id`` (or a push of ``stream_id``) failed; ``kind`` is one of contract.ERROR_KINDS."""

    type: ClassVar[str] = "failed"
    kind: str
    message: str
    fix: str | None = None
    request_id: int | None = None
    stream_id: str | None = None
    exit_code: int = 1


@dataclass(frozen=True)
class Pong:
    type: ClassVar[str] = "pong"
    nonce: int
    busy_s: float  # how long the worker's current operation has been running (0 when idle)
    rss_bytes: int = 0


@dataclass(frozen=True)
class LogLine:
    """A record the worker logged, for the client's log: the worker has no log file of its own, and its stderr
    is nobody's in the app."""

    type: ClassVar[str] = "log"
    level: int
    logger: str
    message: str
    created: float  # the record's time.time()
    pid: int


Message = (
    Hello
    | LoadModel
    | UnloadModel
    | Transcribe
    | CancelJob
    | OpenJob
    | JobAudio
    | JobPassEnd
    | OpenStream
    | PushAudio
    | FinishStream
    | CancelStream
    | Ping
    | Shutdown
    | Loaded
    | Opened
    | JobOpened
    | JobTook
    | Decoding
    | Pushed
    | Result
    | EventMessage
    | Failed
    | Pong
    | LogLine
)
MESSAGE_TYPES: dict[str, type] = {
    cls.type: cls
    for cls in (
        Hello,
        LoadModel,
        UnloadModel,
        Transcribe,
        CancelJob,
        OpenJob,
        JobAudio,
        JobPassEnd,
        OpenStream,
        PushAudio,
        FinishStream,
        CancelStream,
        Ping,
        Shutdown,
        Loaded,
        Opened,
        JobOpened,
        JobTook,
        Decoding,
        Pushed,
        Result,
        EventMessage,
        Failed,
        Pong,
        LogLine,
    )
}


# ------------------------------------------------------------------------------------------ frames


def encode(message: Message) -> bytearray:
    """One frame. A ``pcm`` field travels as the payload (float32), every other field as JSON."""
    header: dict[str, Any] = {"type": message.type}
    samples: np.ndarray | None = None
    for f in fields(message):  # type: ignore[arg-type]
        value = getattr(message, f.name)
        if f.name == "pcm":
            if value is not None:
                samples = np.ascontiguousarray(value, dtype="<f4").reshape(-1)
            continue
        header[f.name] = value
    head = json.dumps(header, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    start = _HEADER.size + len(head)
    # The samples are written once, straight into the frame (tobytes() and a concatenation were two copies).
    frame = bytearray(start + (0 if samples is None else samples.nbytes))
    _HEADER.pack_into(frame, 0, len(head))
    frame[_HEADER.size : start] = head
    if samples is not None:
        frame[start:] = samples.data.cast("B")
    return frame


def decode(frame: bytes | memoryview) -> Message:
    view = memoryview(frame)
    if len(view) < _HEADER.size:
        raise WorkerError("a truncated message crossed the worker boundary", "restart Captioneer")
    (length,) = _HEADER.unpack_from(view)
    header = json.loads(bytes(view[_HEADER.size : _HEADER.size + length]))
    cls = MESSAGE_TYPES.get(header.pop("type", None))
    if cls is None:
        raise WorkerError("an unknown message crossed the worker boundary", "client and worker must match")
    names = {f.name for f in fields(cls)}
    if "pcm" in names:
        payload = view[_HEADER.size + length :]
        # 1-D float32 by the frame's layout, finite because the sender built it with ``audio_payload``: the
        # worker takes it as it is (inference/audio/samples.py).
        header["pcm"] = np.frombuffer(payload, dtype="<f4").astype(np.float32, copy=False)
    unknown = set(header) - names
    if unknown:
        raise WorkerError(
            f"a {getattr(cls, 'type', '?')} message has unknown fields {sorted(unknown)}",
            "client and worker must match",
        )
    return cls(**header)  # type: ignore[no-any-return]


def check_version(hello: Message) -> Hello:
    if not isinstance(hello, Hello):
        raise WorkerError(
            f"the worker greeted with {hello.type!r}, not hello", "client and worker must match"
        )
    if hello.version != PROTOCOL_VERSION:
        raise WorkerError(
            f"the worker speaks protocol version {hello.version}, this client {PROTOCOL_VERSION}",
            "the installation is mixed; reinstall Captioneer so both come from the same version",
        )
    return hello


def audio_payload(pcm: np.ndarray) -> np.ndarray:
    """The check of audio before it crosses the boundary (1-D float32, finite; other float types converted):
    the worker takes the samples of a frame as they are (``inference/audio/samples.py``)."""
    return checked_samples(pcm, "audio", convert=True)
