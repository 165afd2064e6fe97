"""Continuous autosave of live sessions, recovery after a crash, and the history of past sessions.

Each session is one JSON-lines file in ``<data dir>/sessions/`` named by its start time
(``2026-12-01T11-52-03.jsonl``)::

    {"type": "session", "version": 1, "started": 1764589923.1, "model": "Demo", "source": "Microphone"}
    {"type": "delta", "segment_id": 0, "text": "hello", "start_s": 0.1, "end_s": 1.2, "at": 1764589925.0}
    {"type": "speech_end", "segment_id": 0, "text": "hello", "start_s": 0.1, "end_s": 1.2, "at": ...}
    {"type": "closed", "at": 1764589990.0}

In meeting mode a delta or speech end also names its speaker (``"speaker": "You"``) and its segment id is that
speaker's stream's; lines without a speaker (every journal before meeting mode) read as before.

Lines are flushed when text is committed (a killed app loses nothing) and fsync-ed when a segment closes or by a
flusher thread within a second (a power cut loses at most that second). A file without its ``closed`` line is
offered for recovery; a line cut off by a power cut is skipped.
"""

from __future__ import annotations

import json
import logging
import math
import os
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, TypeGuard

from app.live.session import SessionModel, speech_start
from app.live.speakers import SpeakerEvent, is_label
from inference.contract import Delta, SpeechEnd, StreamEvent

log = logging.getLogger("captioneer.app.journal")
JOURNAL_VERSION = 1
FSYNC_INTERVAL_S = 1.0
MAX_LINE_BYTES = 1 << 20  # one committed delta is a few words; a longer line is damage
MAX_JOURNAL_BYTES = 256 << 20  # ~700 hours of captions
_LATEST_START = 253402300800  # 10000-01-01: later start times cannot be shown (time.localtime)


def sessions_dir(data_dir: Path) -> Path:
    return data_dir / "sessions"


class SessionJournal:
    """Appends a session's committed events to its file; call ``record`` from one thread (the model's)."""

    def __init__(
        self,
        directory: Path,
        model: str,
        source: str,
        clock: Callable[[], float] = time.time,
        sync: Callable[[int], None] = os.fsync,
    ) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        self.clock = clock
        self._sync = sync
        self._lock = threading.Lock()  # the flusher thread syncs while the model's thread writes
        self._dirty = threading.Event()  # written, not yet synced
        started = clock()
        stamp = time.strftime("%Y-%m-%dT%H-%M-%S", time.localtime(started))
        path = directory / f"{stamp}.jsonl"
        suffix = 1
        while path.exists():
            suffix += 1
            path = directory / f"{stamp}-{suffix}.jsonl"
        self.path = path
        self._file: IO[str] | None = path.open("x", encoding="utf-8")
        self._write(
            {
                "type": "session",
                "version": JOURNAL_VERSION,
                "started": started,
                "model": model,
                "source": source,
            },
            force_sync=True,
        )
        self._flusher = threading.Thread(target=self._flush_pending, name="captioneer-journal", daemon=True)
        self._flusher.start()

    def record(self, events: Sequence[StreamEvent | SpeakerEvent]) -> None:
        for item in events:
            event, speaker = (item.event, item.speaker) if isinstance(item, SpeakerEvent) else (item, None)
            if isinstance(event, Delta | SpeechEnd):
                entry = {
                    "type": "delta" if isinstance(event, Delta) else "speech_end",
                    "segment_id": event.segment_id,
                    "text": event.text,
                    "start_s": speech_start(event),
                    "end_s": event.end_s,
                    "at": self.clock(),
                }
                if speaker is not None:
                    entry["speaker"] = speaker
                self._write(entry, force_sync=isinstance(event, SpeechEnd))

    def record_final_tail(self, segment_id: int, text: str, speaker: str | None = None) -> None:
        """Text the stream's final transcript committed without a delta (see ``SessionModel``); ``segment_id`` is
        the stream's id of the segment (``SessionSegment.stream_id``)."""
        entry: dict[str, Any] = {
            "type": "delta",
            "segment_id": segment_id,
            "text": text,
            "start_s": None,
            "end_s": None,
            "at": self.clock(),
        }
        if speaker is not None:
            entry["speaker"] = speaker
        self._write(entry)

    def close(self) -> None:
        if self._file is not None:
            self._write({"type": "closed", "at": self.clock()}, force_sync=True)
            with self._lock:
                self._file.close()
                self._file = None
            self._dirty.set()  # wakes the flusher, which sees the file is gone and ends

    @property
    def pending_sync(self) -> bool:
        """Something was written that is not on disk yet (the flusher syncs it within a second)."""
        return self._dirty.is_set() and self._file is not None

    def _write(self, entry: dict[str, Any], force_sync: bool = False) -> None:
        with self._lock:
            if self._file is None:
                return
            self._file.write(json.dumps(entry, ensure_ascii=False) + "\n")
            self._file.flush()  # in the OS's hands: a killed app loses nothing
            if force_sync:
                self._sync(self._file.fileno())
                self._dirty.clear()
            else:
                self._dirty.set()

    def _flush_pending(self) -> None:
        """Flusher thread: a write waits at most ``FSYNC_INTERVAL_S`` for its sync, however long the pause after it."""
        while True:
            self._dirty.wait()
            time.sleep(FSYNC_INTERVAL_S / 2)  # gathers a burst of writes into one sync
            with self._lock:
                if self._file is None:
                    return
                if self._dirty.is_set():
                    self._sync(self._file.fileno())
                    self._dirty.clear()


@dataclass(frozen=True)
class SavedSession:
    path: Path
    started: float
    model: str
    source: str
    closed: bool
    text: str

    @property
    def title(self) -> str:
        when = time.strftime("%Y-%m-%d %H:%M", time.localtime(self.started))
        preview = self.text[:60] + ("…" if len(self.text) > 60 else "")
        return f"{when} — {self.model} — {preview or '(nothing said)'}"


def read_session(path: Path) -> tuple[SavedSession, SessionModel]:
    """The saved session and a model rebuilt from it (its committed text, segments and times).

    A journal may be damaged or hostile: a line that is cut off, too long, not an event or of the wrong types
    is skipped with a warning and every other line still counts, so one bad line never costs the user the rest
    of their text. At most :data:`MAX_JOURNAL_BYTES` are read. Raises OSError only (the file cannot be read).
    """
    model = SessionModel()
    header: dict[str, Any] = {}
    closed = False
    skipped = 0
    with path.open("rb") as handle:
        for number, line in enumerate(_bounded_lines(handle, path), start=1):
            entry = None if line is None else _parse_line(line)
            if entry is None:
                # A line cut off by a crash or power cut (the recovery marker may follow it), or damage.
                log.warning("%s line %d is incomplete or damaged; skipped", path.name, number)
                skipped += 1
                continue
            kind = entry.get("type")
            if kind == "session":
                header = entry
            elif kind == "closed":
                closed = True
            elif kind in ("delta", "speech_end"):
                event = _event(entry)
                speaker = entry.get("speaker")
                if event is None or not (speaker is None or is_label(speaker)):
                    skipped += 1
                    log.warning("%s line %d is not a valid %s; skipped", path.name, number, kind)
                else:
                    model.apply([event if speaker is None else SpeakerEvent(speaker, event)])
    if skipped:
        log.warning("%s: %d damaged line(s) skipped; the rest of the session is kept", path.name, skipped)
    saved = SavedSession(
        path,
        _started(header.get("started"), path),
        _label(header.get("model")),
        _label(header.get("source")),
        closed,
        model.labelled_text,
    )
    return saved, model


def _bounded_lines(handle: IO[bytes], path: Path) -> Iterator[bytes | None]:
    """The file's lines; None for a line longer than :data:`MAX_LINE_BYTES` (read past, never held whole)."""
    total = 0
    while total < MAX_JOURNAL_BYTES:
        line = handle.readline(MAX_LINE_BYTES + 1)
        if not line:
            return
        total += len(line)
        if len(line) > MAX_LINE_BYTES and not line.endswith(b"\n"):
            log.warning("%s holds a line of more than %d bytes; skipped", path.name, MAX_LINE_BYTES)
            while (rest := handle.readline(MAX_LINE_BYTES)) and not rest.endswith(b"\n"):
                total += len(rest)
            total += len(rest)
            yield None
            continue
        yield line
    log.warning("%s is larger than %d bytes; the rest is not read", path.name, MAX_JOURNAL_BYTES)


def _parse_line(line: bytes) -> dict[str, Any] | None:
    """A JSON object, or None for a line cut off by a crash or power cut (or damaged otherwise)."""
    if not line.strip():
        return {}
    try:
        # errors="replace": a damaged byte costs one character, not the line
        entry = json.loads(line.decode("utf-8", errors="replace"))
    except (ValueError, RecursionError):
        return None
    return entry if isinstance(entry, dict) else None


def _event(entry: dict[str, Any]) -> StreamEvent | None:
    """The delta or speech end a line stands for, if its fields have the types the journal writes."""
    segment, text = entry.get("segment_id"), entry.get("text", "")
    start, end = entry.get("start_s"), entry.get("end_s")
    if type(segment) is not int or not isinstance(text, str):
        return None
    if entry["type"] == "delta":
        if not (_time_or_none(start) and _time_or_none(end)):
            return None
        return Delta(text, segment, start, end)
    if not (_is_time(start) and _is_time(end)):
        return None
    return SpeechEnd(segment, float(start), float(end), text)


def _is_time(value: object) -> TypeGuard[int | float]:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _time_or_none(value: object) -> bool:
    return value is None or _is_time(value)


def _started(value: object, path: Path) -> float:
    """The header's start time when it is a plausible Unix time, else the file's modification time."""
    if _is_time(value) and 0 <= value < _LATEST_START:
        return float(value)
    return path.stat().st_mtime


def _label(value: object) -> str:
    return value[:200] if isinstance(value, str) else "?"


def list_sessions(data_dir: Path) -> list[SavedSession]:
    """Past sessions, newest first; unreadable files are skipped with a log line, never deleted."""
    sessions = []
    for path in sorted(sessions_dir(data_dir).glob("*.jsonl"), reverse=True):
        try:
            sessions.append(read_session(path)[0])
        except (OSError, ValueError, KeyError) as exc:
            log.warning("cannot read saved session %s: %s", path, exc)
    return sessions


def unfinished_sessions(data_dir: Path) -> list[SavedSession]:
    """Sessions that did not end cleanly (the app or the machine stopped) and hold some text."""
    return [s for s in list_sessions(data_dir) if not s.closed and s.text]


def mark_recovered(session: SavedSession) -> None:
    """Close a recovered session's file so it is not offered again (its text stays as it was)."""
    with session.path.open("a", encoding="utf-8") as handle:
        handle.write("\n" + json.dumps({"type": "closed", "at": time.time(), "recovered": True}) + "\n")
