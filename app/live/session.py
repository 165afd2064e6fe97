"""The live session model (Qt-free): the single owner of what was said.

Events from the worker are applied here, in order, on one thread; views and exporters only read. A
``SessionChange`` tells listeners what moved (committed text grew, a provisional text changed, the
status changed), so a view can append or replace exactly what it shows instead of redrawing.

Rules (``inference.contract``): a ``Delta`` appends committed text to its segment and drops that
segment's snapshot; a ``Snapshot`` replaces the segment's provisional text; a ``SpeechEnd`` closes the
segment, its text being authoritative (it replaces what the deltas had added up to when they differ); a
worker restart drops every snapshot (the dead stream's guesses; the resumed stream publishes its own).

In meeting mode (``app.live.speakers``) events come wrapped in ``SpeakerEvent``: each speaker's stream numbers
its segments from 0, so the model gives every (speaker, stream segment) its own session id, labels the segment,
and keeps the segments in the order their speech started — a segment that started before one already shown is
placed before it and the change says ``rewritten`` (views redraw), as does text added to a segment that is no
longer the last one.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

from app.live.speakers import SpeakerEvent, label_lead, turns
from inference.contract import (
    Delta,
    Done,
    ErrorEvent,
    Segment,
    Snapshot,
    SpeechEnd,
    Stats,
    StreamEvent,
    Transcript,
    Word,
)


@dataclass
class SessionSegment:
    """Committed text of one segment with audio-relative (stream) and wall-clock times; ``start_s`` is where its
    speech begins (the event's ``speech_start_s`` where the stream knows it: no VAD pre-roll)."""

    segment_id: int
    text: str = ""
    start_s: float | None = None
    end_s: float | None = None
    started_at: float = 0.0  # wall clock (Unix seconds) of the first committed text
    committed_at: float = 0.0  # wall clock of the latest committed text
    language: str | None = None
    words: tuple[Word, ...] = ()
    closed: bool = False
    speaker: str | None = None  # "You" / "Others" in meeting mode
    stream_segment_id: int | None = None  # the id its own stream gave it (``segment_id`` is the session's)

    @property
    def stream_id(self) -> int:
        return self.segment_id if self.stream_segment_id is None else self.stream_segment_id


@dataclass(frozen=True)
class SessionStatus:
    """What the status line shows."""

    worker: str = "idle"  # idle | loading | running | restarting | stopped | failed
    message: str = ""
    latency_s: float | None = None  # speech end (audio time) → committed text, as measured by the pipeline
    rtf: float | None = None
    backlog_s: float = 0.0


@dataclass(frozen=True)
class SessionChange:
    """``committed``: text appended to the committed transcript (may be ""); ``rewritten``: committed text was
    replaced (a speech end corrected its segment: redraw); ``provisional``: the provisional text changed."""

    committed: str = ""
    rewritten: bool = False
    provisional: bool = False
    status: bool = False
    opened_segment: int | None = None  # index in ``segments`` of the segment that ``committed`` begins


Listener = Callable[[SessionChange], None]


@dataclass
class SessionModel:
    clock: Callable[[], float] = time.time
    segments: list[SessionSegment] = field(default_factory=list)
    provisional: dict[int, Snapshot] = field(default_factory=dict)
    status: SessionStatus = field(default_factory=SessionStatus)
    errors: list[ErrorEvent] = field(default_factory=list)
    final: Transcript | None = None  # the stream's final transcript (its words), once it finished
    _by_id: dict[int, SessionSegment] = field(default_factory=dict)
    _session_ids: dict[tuple[str, int], int] = field(
        default_factory=dict
    )  # (speaker, stream id) → session id
    speakers: dict[int, str] = field(default_factory=dict)  # session segment id → speaker (meeting mode)
    _listeners: list[Listener] = field(default_factory=list)

    # ------------------------------------------------------------------ listeners
    def subscribe(self, listener: Listener) -> Callable[[], None]:
        self._listeners.append(listener)
        return lambda: self._listeners.remove(listener)

    def _notify(self, change: SessionChange) -> None:
        for listener in list(self._listeners):
            listener(change)

    # ------------------------------------------------------------------ events
    def apply(self, events: Sequence[StreamEvent | SpeakerEvent]) -> None:
        for event in events:
            if isinstance(event, SpeakerEvent):
                self._notify(self._apply_spoken(event))
            else:
                self._notify(self._apply_one(event))

    def _apply_spoken(self, spoken: SpeakerEvent) -> SessionChange:
        """One speaker's event: its segment id mapped to the session's, the segment labelled and kept in time order."""
        event = spoken.event
        if isinstance(event, Done):
            return self._adopt_final(event.transcript, self.clock(), spoken.speaker)
        if not isinstance(event, Delta | Snapshot | SpeechEnd):
            return self._apply_one(event)
        key = (spoken.speaker, event.segment_id)
        session_id = self._session_ids.get(key)
        if session_id is None:
            session_id = self._session_ids[key] = len(self._session_ids)
            self.speakers[session_id] = spoken.speaker
        change = self._apply_one(replace(event, segment_id=session_id))
        segment = self._by_id.get(session_id)
        if segment is None:
            return change
        segment.speaker, segment.stream_segment_id = spoken.speaker, event.segment_id
        if change.opened_segment is not None and self._place_by_start(segment):
            return replace(change, committed="", rewritten=True, opened_segment=None)
        if (change.committed or change.rewritten) and segment is not self.segments[-1]:
            return replace(change, committed="", rewritten=True, opened_segment=None)
        return change

    def _place_by_start(self, segment: SessionSegment) -> bool:
        """Move a newly opened segment before those whose speech started later; True when it moved."""
        if segment.start_s is None:
            return False
        index = self.segments.index(segment)
        target = index
        while target > 0 and _starts_after(self.segments[target - 1], segment.start_s):
            target -= 1
        if target == index:
            return False
        self.segments.insert(target, self.segments.pop(index))
        return True

    def _apply_one(self, event: StreamEvent) -> SessionChange:
        now = self.clock()
        if isinstance(event, Delta):
            if self.status.worker == "restarting":  # text flows again: the new worker is up
                self.status = replace(
                    self.status,
                    worker="running",
                    message="the inference worker was restarted; captions continue",
                )
            segment = self._segment(event.segment_id, now)
            opened = None if segment.text else self.segments.index(segment)
            if not segment.text:
                segment.started_at = now
                event_text = event.text.lstrip() if not self.committed_text else event.text
            else:
                event_text = event.text
            segment.text += event_text
            segment.committed_at = now
            segment.start_s = speech_start(event) if segment.start_s is None else segment.start_s
            segment.end_s = event.end_s if event.end_s is not None else segment.end_s
            segment.language = event.language or segment.language
            dropped = self.provisional.pop(event.segment_id, None) is not None
            return SessionChange(committed=event_text, provisional=dropped, opened_segment=opened)
        if isinstance(event, Snapshot):
            self.provisional[event.segment_id] = event
            return SessionChange(provisional=True)
        if isinstance(event, SpeechEnd):
            dropped = self.provisional.pop(event.segment_id, None) is not None
            existing = self._by_id.get(event.segment_id)
            if existing is None and not event.text:
                return SessionChange(provisional=dropped)
            segment = existing or self._segment(event.segment_id, now)
            segment.start_s, segment.end_s, segment.closed = speech_start(event), event.end_s, True
            segment.language = event.language or segment.language
            if event.text and event.text.strip() != segment.text.strip():
                appended = not segment.text  # only the speech end carried this segment's text
                lead = " " if appended and self.committed_text.strip() else ""
                segment.text = lead + event.text.strip() if appended else _keep_lead(segment.text, event.text)
                segment.committed_at = now
                return SessionChange(
                    committed=segment.text if appended else "",
                    rewritten=not appended,
                    provisional=dropped,
                    opened_segment=self.segments.index(segment) if appended else None,
                )
            return SessionChange(provisional=dropped)
        if isinstance(event, ErrorEvent):
            self.errors.append(event)
            worker = {
                "worker_restarted": "restarting",
                "worker_failed": "down",
                "worker_resumed": "running",
            }.get(event.kind, "failed" if event.fatal else "running")
            self.status = replace(self.status, worker=worker, message=event.message)
            # The dead worker's provisional text is no one's guess any more: the new stream renumbers its
            # segments and replays the audio, so its own snapshots take over from nothing, not from a ghost.
            dropped = event.kind == "worker_restarted" and bool(self.provisional)
            if dropped:
                self.provisional.clear()
            return SessionChange(status=True, provisional=dropped)
        if isinstance(event, Stats):
            self.status = replace(
                self.status, rtf=event.rtf if event.audio_s else None, backlog_s=event.backlog_s
            )
            return SessionChange(status=True)
        if isinstance(event, Done):
            if self.speakers:  # a meeting's merged transcript: each speaker's tail was adopted with its own
                self.provisional.clear()
                self.final = event.transcript
                return SessionChange(provisional=True)
            return self._adopt_final(event.transcript, now)
        return SessionChange()

    def _segment(self, segment_id: int, now: float) -> SessionSegment:
        segment = self._by_id.get(segment_id)
        if segment is None:
            segment = SessionSegment(segment_id, started_at=now, committed_at=now)
            self._by_id[segment_id] = segment
            self.segments.append(segment)
        return segment

    def _adopt_final(self, final: Transcript, now: float, speaker: str | None = None) -> SessionChange:
        """The stream's final transcript may commit a tail no delta announced: append what is new (in meeting
        mode, to that speaker's text; the meeting's merged transcript arrives later, unlabelled)."""
        if speaker is None:
            self.provisional.clear()
            self.final = final
        else:
            for session_id in [i for i in self.provisional if self.speakers.get(i) == speaker]:
                del self.provisional[session_id]
        mine = [s for s in self.segments if s.speaker == speaker]
        # Gap markers (negative stream ids, ``app.live.pipeline``) are the app's, not in the stream's final text.
        committed = "".join(s.text for s in mine if s.stream_id >= 0).strip()
        text = final.text.strip()
        if not text.startswith(committed) or text == committed:
            return SessionChange(provisional=True)
        tail = text[len(committed) :].strip()
        session_id = max(self._by_id, default=-1) + 1 if speaker is None else len(self._session_ids)
        segment = SessionSegment(
            session_id,
            " " + tail if self.committed_text.strip() else tail,
            started_at=now,
            committed_at=now,
            language=final.language,
            closed=True,
            speaker=speaker,
        )
        if speaker is not None:
            segment.stream_segment_id = 1 + max((s.stream_id for s in mine), default=-1)
            self._session_ids[(speaker, segment.stream_segment_id)] = session_id
            self.speakers[session_id] = speaker
        for source in final.segments:
            if source.text.strip() and tail.endswith(source.text.strip()):
                segment.start_s, segment.end_s, segment.words = source.start_s, source.end_s, source.words
            elif speaker is not None and source.text.strip().endswith(tail):  # the end of its last segment
                segment.start_s, segment.end_s = source.start_s, source.end_s
        self._by_id[segment.segment_id] = segment
        self.segments.append(segment)
        if speaker is not None and self._place_by_start(segment):
            return SessionChange(rewritten=True, provisional=True)
        return SessionChange(committed=segment.text, provisional=True, opened_segment=len(self.segments) - 1)

    def set_status(self, worker: str, message: str = "", latency_s: float | None = None) -> None:
        self.status = replace(self.status, worker=worker, message=message)
        if latency_s is not None:
            self.status = replace(self.status, latency_s=latency_s)
        self._notify(SessionChange(status=True))

    # ------------------------------------------------------------------ reading
    @property
    def committed_text(self) -> str:
        return "".join(segment.text for segment in self.segments)

    @property
    def provisional_text(self) -> str:
        """The provisional text after the committed text; in meeting mode each speaker's part starts with its
        label where the speaker changes."""
        previous = self.segments[-1].speaker if self.segments else None
        parts = []
        for session_id, snapshot in sorted(self.provisional.items()):
            if not snapshot.text.strip():
                continue
            speaker = self.speakers.get(session_id)
            parts.append((label_lead(speaker) if speaker != previous else "") + snapshot.text.strip())
            previous = speaker
        return " ".join(parts)

    @property
    def labelled_text(self) -> str:
        """The committed text; in meeting mode one line per turn, each starting with its speaker."""
        if not self.speakers:
            return self.committed_text.strip()
        return turns((segment.speaker, segment.text) for segment in self.segments)

    def to_transcript(self) -> Transcript:
        segments = [
            Segment(
                s.text.strip(),
                s.start_s or 0.0,
                s.end_s if s.end_s is not None else (s.start_s or 0.0),
                s.words,
                s.speaker,
            )
            for s in self.segments
            if s.text.strip()
        ]
        languages = [s.language for s in self.segments if s.language]
        language = languages[-1] if languages else None
        if self.speakers:  # two streams' times: subtitles are cut per segment, each with its speaker
            return Transcript(self.labelled_text, language, [], segments)
        words = [w for s in self.segments for w in s.words]
        if not words and self.final is not None and self.final.text.strip() == self.committed_text.strip():
            words = list(self.final.words)  # live deltas carry no word times; the final transcript does
        return Transcript(self.committed_text.strip(), language, words, segments)


def _starts_after(segment: SessionSegment, start_s: float) -> bool:
    """Unknown times (a tail only a final transcript held) count as late: they are the end of a stream."""
    return segment.start_s is None or segment.start_s > start_s


def speech_start(event: Delta | SpeechEnd) -> float | None:
    """Where the segment's speech begins: displays and pauses are measured from there, not from the pre-roll."""
    return event.speech_start_s if event.speech_start_s is not None else event.start_s


def _keep_lead(old: str, new: str) -> str:
    """``new`` with the leading whitespace ``old`` had (the separator from the previous segment)."""
    return old[: len(old) - len(old.lstrip())] + new.strip()
