"""The speaker labels and events of meeting mode live in ``inference.speakers`` (the command line's meeting uses
them too); the app's modules import them from here."""

from inference.speakers import (
    MAX_LABEL_CHARS,
    OTHERS,
    YOU,
    SpeakerEvent,
    is_label,
    label_lead,
    labelled,
    merge_finals,
    turns,
)

__all__ = [
    "MAX_LABEL_CHARS",
    "OTHERS",
    "YOU",
    "SpeakerEvent",
    "is_label",
    "label_lead",
    "labelled",
    "merge_finals",
    "turns",
]
