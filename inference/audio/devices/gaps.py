"""Gap markers for a live input that went away mid-session (unplugged, or the default changed): the marker
text and its place (``gap_text``, ``comes_after``) that the command line and the caption window
(app/live/pipeline.py) share, and the command line's ``GapMarkers``. A marker is a committed ``Delta`` with a
negative segment id (the stream's own ids are never negative), put before the first event about audio after
the gap and into the final transcript where it happened.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable

from inference.contract import Delta, Done, SpeechEnd, Stats, StreamEvent, Transcript

Deliver = Callable[[list[StreamEvent]], None]


def gap_text(start_s: float, missing_s: float, reason: str) -> str:
    return f"[… {start_s:.1f} s: no audio for {missing_s:.2f} s ({reason}) …]"


def comes_after(event: StreamEvent, gap: Delta) -> bool:
    """Whether ``event`` is about audio after the gap (or the stream processed past it, or ended)."""
    if isinstance(event, Done):
        return True
    if isinstance(event, Stats):
        return gap.end_s is not None and event.audio_s >= gap.end_s
    end = event.end_s if isinstance(event, Delta | SpeechEnd) else None
    return end is not None and gap.end_s is not None and end > gap.end_s


class GapMarkers:
    """Wraps a stream's ``deliver``: ``add`` queues a marker (any thread), ``deliver`` passes the stream's
    events on with the waiting markers in place, ``into`` puts the markers into the final transcript."""

    def __init__(self, deliver: Deliver) -> None:
        self._deliver = deliver
        self._lock = threading.Lock()
        self._waiting: list[Delta] = []
        self._placed: list[tuple[int, str]] = []  # (words of stream text before it, marker text)
        self._stream_words = 0
        self._marker_last = False  # the last text shown was a marker: the next one is kept apart from it
        self._next_id = -1

    def add(self, start_s: float, missing_s: float, reason: str, filled_s: float) -> None:
        """A gap at ``start_s`` seconds of stream time; ``filled_s`` of silence were sent in its place."""
        with self._lock:
            text = gap_text(start_s, missing_s, reason)
            self._waiting.append(Delta(" " + text, self._next_id, start_s, start_s + filled_s))
            self._next_id -= 1

    def deliver(self, events: list[StreamEvent]) -> None:
        ordered: list[StreamEvent] = []
        with self._lock:
            for event in events:
                while self._waiting and comes_after(event, self._waiting[0]):
                    self._place(self._waiting.pop(0), ordered)
                if isinstance(event, Delta) and event.text:
                    if self._marker_last and not event.text[:1].isspace():  # a stream's first text has none
                        event = dataclasses.replace(event, text=" " + event.text)
                    self._marker_last = False
                    self._stream_words += len(event.text.split())
                ordered.append(event)
        self._deliver(ordered)

    def _place(self, marker: Delta, ordered: list[StreamEvent]) -> None:
        self._placed.append((self._stream_words, marker.text.strip()))
        self._marker_last = True
        ordered.append(marker)

    def flush(self) -> None:
        """Deliver the markers still waiting (the stream ended before any event came after them)."""
        ordered: list[StreamEvent] = []
        with self._lock:
            while self._waiting:
                self._place(self._waiting.pop(0), ordered)
        if ordered:
            self._deliver(ordered)

    def into(self, transcript: Transcript) -> Transcript:
        """``transcript`` with each marker's text where it was shown: after as many words of the final text as
        the stream had committed before it (the final text begins with what was committed)."""
        with self._lock:
            placed = list(self._placed)
        if not placed:
            return transcript
        words, taken = transcript.text.split(), 0
        pieces: list[str] = []
        for count, marker in placed:
            cut = max(taken, min(count, len(words)))
            pieces += [*words[taken:cut], marker]
            taken = cut
        pieces += words[taken:]
        return dataclasses.replace(transcript, text=" ".join(pieces))
