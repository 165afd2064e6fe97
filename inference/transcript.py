"""Results and streaming events shared by every family, the worker protocol and the app."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass(frozen=True)
class Word:
    text: str
    start_s: float
    end_s: float
    confidence: float | None = None

    def to_json(self) -> dict[str, Any]:
        return {"word": self.text, "start": round(self.start_s, 3), "end": round(self.end_s, 3)}


@dataclass(frozen=True)
class Segment:
    text: str
    start_s: float
    end_s: float
    words: tuple[Word, ...] = ()


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


@dataclass
class Transcript:
    text: str
    language: str | None = None
    words: list[Word] = field(default_factory=list)
    segments: list[Segment] = field(default_factory=list)
    token_ids: list[int] = field(default_factory=list)
    timing: Timing | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "text": self.text,
            "language": self.language,
            "words": [w.to_json() for w in self.words],
            "token_ids": list(self.token_ids),
            "timing": self.timing.to_json() if self.timing else None,
        }


# --- streaming events -------------------------------------------------------------------------


@dataclass(frozen=True)
class Delta:
    """Committed text: append-only, never revised. Deltas of a stream concatenate to its committed text."""

    text: str
    type: str = "delta"


@dataclass(frozen=True)
class Snapshot:
    """The whole current provisional hypothesis; replaces the previous snapshot."""

    text: str
    type: str = "snapshot"


@dataclass(frozen=True)
class SpeechEnd:
    """End of a voiced segment, with its authoritative text and span in seconds."""

    start_s: float
    end_s: float
    text: str = ""
    type: str = "speech_end"


@dataclass(frozen=True)
class Stats:
    audio_s: float
    wall_s: float
    backlog_s: float = 0.0
    type: str = "stats"


StreamEvent = Delta | Snapshot | SpeechEnd | Stats


def event_to_json(event: StreamEvent) -> dict[str, Any]:
    return asdict(event)
