"""Where the caption text starts a new paragraph (Qt-free): at every pause in the speech of at least
``PARAGRAPH_PAUSE_S``, measured from the end of one segment's speech to the start of the next one's (not from the
audio a VAD keeps before the speech, which would shorten every pause by about half a second).

Provisional text after such a pause opens the new paragraph at once, so it does not first sit at the end of the
previous one and jump when it is committed. In meeting mode every change of speaker starts a paragraph too, and a
paragraph starts with its speaker ("You: ").
"""

from __future__ import annotations

from app.live.session import SessionModel, SessionSegment
from app.live.speakers import label_lead

PARAGRAPH_PAUSE_S = 1.0  # README: "a pause of a second starts a new paragraph"


def _after_pause(before: SessionSegment, start_s: float | None) -> bool:
    if not before.closed:
        return False
    if before.end_s is None or start_s is None:
        return True
    return start_s - before.end_s >= PARAGRAPH_PAUSE_S


def starts_paragraph(session: SessionModel, index: int) -> bool:
    """Segment ``index`` begins a paragraph: the one before it is closed and a pause (or unknown times) lies between."""
    if index <= 0:
        return False
    if session.segments[index].speaker != session.segments[index - 1].speaker:
        return True
    return _after_pause(session.segments[index - 1], session.segments[index].start_s)


def paragraph_lead(session: SessionModel, index: int) -> str:
    """What paragraph-opening segment ``index`` starts with: its speaker in meeting mode ("You: "), else nothing."""
    return label_lead(session.segments[index].speaker)


def provisional_opens_segment(session: SessionModel) -> bool:
    """The provisional text is a segment of its own, not the continuation of the last committed one."""
    if not session.provisional:
        return False
    return not session.segments or min(session.provisional) != session.segments[-1].segment_id


def provisional_starts_paragraph(session: SessionModel) -> bool:
    """The provisional text belongs to a segment that will begin a paragraph once committed."""
    if not session.segments or not provisional_opens_segment(session):
        return False
    if session.speakers.get(min(session.provisional)) != session.segments[-1].speaker:
        return True
    return _after_pause(session.segments[-1], provisional_start_s(session))


def provisional_start_s(session: SessionModel) -> float | None:
    """When the provisional text's speech began (its first segment's), None when unknown or there is none."""
    if not session.provisional:
        return None
    snapshot = session.provisional[min(session.provisional)]
    return snapshot.speech_start_s if snapshot.speech_start_s is not None else snapshot.start_s
