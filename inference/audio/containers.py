"""What kind of audio file a few leading bytes are, for inputs that expect raw PCM (stdin, ``/live``): a file
sent where samples were expected is named instead of being heard as noise."""

from __future__ import annotations

_MAGIC = (
    (b"RIFF", "WAV"),
    (b"RIFX", "WAV"),
    (b"RF64", "WAV"),
    (b"OggS", "Ogg"),
    (b"fLaC", "FLAC"),
    (b"ID3", "MP3"),
    (b"FORM", "AIFF"),
    (b"\x1a\x45\xdf\xa3", "WebM/Matroska"),  # EBML: what a browser's MediaRecorder sends
)


def container_kind(head: bytes) -> str | None:
    """ "MP4/M4A", "WAV", "FLAC", ... for data starting as such a file does, or None (raw samples, or a kind not
    known here). Only the first 12 bytes are looked at."""
    if head[4:8] == b"ftyp":  # ISO media (MP4, M4A, MOV): the box size comes first
        return "MP4/M4A"
    return next((kind for magic, kind in _MAGIC if head.startswith(magic)), None)
