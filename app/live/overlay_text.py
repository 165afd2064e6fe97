"""Which committed text the caption overlay shows after it faded (Qt-free).

The overlay fades after its hold time; when speech comes again, what was said before the pause is old news. A
``FadeMark`` records how far the committed text reached when the overlay faded, and ``split_at_mark`` cuts the
session's committed text there: the overlay shows what came after (and, by the ``overlay_after_fade`` setting,
the last line before it), never the sentences it already showed.
"""

from __future__ import annotations

from dataclasses import dataclass

from app.live.session import SessionModel, SessionSegment
from app.live.speakers import label_lead

AFTER_FADE = {
    "new": "Only what is said after the pause",
    "last_line": "The last line before the pause, then what follows",
}


@dataclass(frozen=True)
class FadeMark:
    """The session's committed text at a fade: ``segments`` segments, of which the last had ``chars`` characters;
    ``open``: that segment was still open (it may grow after the fade, and only its new part is new)."""

    segments: int
    chars: int = 0
    open: bool = False

    @classmethod
    def of(cls, session: SessionModel) -> FadeMark:
        segments = session.segments
        if not segments:
            return cls(0)
        return cls(len(segments), len(segments[-1].text), not segments[-1].closed)


def split_at_mark(session: SessionModel, mark: FadeMark | None) -> tuple[str, str]:
    """(before, after): the committed text up to ``mark`` and since it (all of it is "after" without a mark).

    A segment before the mark that a speech end rewrote stays before it: a correction of old text is not news.
    In meeting mode each change of speaker is labelled ("… Others: …")."""
    texts = _labelled(session.segments)
    if mark is None:
        return "", "".join(texts)
    before = texts[: mark.segments]
    after = texts[mark.segments :]
    if before and mark.open:
        last = before[-1]
        label = len(last) - len(
            session.segments[mark.segments - 1].text
        )  # the mark counts the segment's text
        cut = min(mark.chars + label, len(last))
        before[-1] = last[:cut]
        after.insert(0, last[cut:])
    return "".join(before), "".join(after)


def _labelled(segments: list[SessionSegment]) -> list[str]:
    """The segments' texts, each change of speaker starting with the new speaker's label."""
    texts: list[str] = []
    previous: str | None = None
    for segment in segments:
        if segment.speaker != previous and segment.speaker is not None:
            lead = " " if texts else ""
            texts.append(lead + label_lead(segment.speaker) + segment.text.lstrip())
        else:
            texts.append(segment.text)
        previous = segment.speaker
    return texts
