"""Export a live session (TXT, SRT, VTT, JSON) through the same renderers as the command line."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from app.live.session import SessionModel
from inference.errors import UsageError
from inference.formats import render

EXPORT_FORMATS = {"txt": "Plain text", "srt": "SubRip subtitles", "vtt": "WebVTT subtitles", "json": "JSON"}
_RENDERERS = {"txt": "text", "srt": "srt", "vtt": "vtt", "json": "json"}


def path_for_filter(path: Path, fmt: str) -> Path:
    """The file a save dialog means: a name without a known extension gets the chosen filter's."""
    return path if path.suffix.lstrip(".").lower() in _RENDERERS else path.with_name(f"{path.name}.{fmt}")


def _umask() -> int:
    mask = os.umask(0o022)  # reading the umask means setting it: put it back at once
    os.umask(mask)
    return mask


def export_session(session: SessionModel, path: Path, fmt: str | None = None) -> Path:
    """Write the committed transcript to ``path`` (format from ``fmt`` or the file extension), atomically."""
    fmt = (fmt or path.suffix.lstrip(".")).lower()
    if fmt not in _RENDERERS:
        raise UsageError(
            f"cannot export {path.name}: unknown format {fmt!r}", f"use one of {', '.join(EXPORT_FORMATS)}"
        )
    text = render(session.to_transcript(), _RENDERERS[fmt])
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.chmod(tmp, 0o666 & ~_umask())  # mkstemp's file is private; an export is an ordinary file
        Path(tmp).replace(path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path
