"""Who said it, in meeting mode: "You" (the microphone) and "Others" (what the computer plays).

A meeting runs one live stream per speaker in the same worker. Their events reach the window (or the terminal)
wrapped in ``SpeakerEvent``, so that each stream's segments are kept apart (both streams number theirs from 0) and
labelled; events that are about the session rather than its text (errors, figures) travel unwrapped.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace

from inference.contract import Segment, StreamEvent, Transcript

YOU = "You"
OTHERS = "Others"
MAX_LABEL_CHARS = 40  # a journal is untrusted: a longer "speaker" is damage


@dataclass(frozen=True)
class SpeakerEvent:
    """``event`` of the live stream of ``speaker``."""

    speaker: str
    event: StreamEvent


def labelled(speaker: str, events: Iterable[StreamEvent]) -> list[SpeakerEvent]:
    return [SpeakerEvent(speaker, event) for event in events]


def label_lead(speaker: str | None) -> str:
    """What a paragraph of ``speaker`` starts with ("You: "), nothing outside meeting mode."""
    return f"{speaker}: " if speaker else ""


def is_label(value: object) -> bool:
    return isinstance(value, str) and 0 < len(value) <= MAX_LABEL_CHARS and value.strip() == value


def turns(spoken: Iterable[tuple[str | None, str]]) -> str:
    """(speaker, text) in order as one line per turn, each starting with its speaker ("You: …")."""
    lines: list[str] = []
    previous: str | None = None
    for speaker, text in spoken:
        text = text.strip()
        if not text:
            continue
        if lines and speaker == previous:
            lines[-1] += " " + text
        else:
            lines.append(label_lead(speaker) + text)
        previous = speaker
    return "\n".join(lines)


def merge_finals(finals: dict[str, Transcript]) -> Transcript:
    """The speakers' final transcripts as one: their segments in time order, each with its speaker (a final
    without segments counts as one from the start), and the text one line per turn."""
    segments = sorted(
        (
            replace(segment, speaker=speaker)
            for speaker, final in finals.items()
            for segment in (final.segments or [Segment(final.text, 0.0, 0.0)])
            if segment.text.strip()
        ),
        key=lambda segment: segment.start_s,
    )
    languages = [final.language for final in finals.values() if final.language]
    text = turns((segment.speaker, segment.text) for segment in segments)
    return Transcript(text, languages[0] if languages else None, [], segments)
