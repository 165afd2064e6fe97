"""The options of the commands that run in the app (``captioneer gui``, ``captioneer dictate``), defined once.

``inference.cli`` lists them in ``captioneer --help``; ``app.main`` and ``app.dictation.command`` parse them. Only
the standard library is imported: ``captioneer dictate --toggle`` runs from a desktop shortcut and must start fast.
"""

from __future__ import annotations

import argparse
from pathlib import Path

# What inference.audio.decoding reads (docs/audio_input.md §1).
AUDIO_FILES = "WAV, FLAC, OGG Vorbis/Opus, MP3, AIFF, RF64; with ffmpeg installed M4A, MP4, WebM, video files"
GUI_DESCRIPTION = "Open the caption window (what `captioneer` without a command does)."
DICTATE_DESCRIPTION = (
    "Start or stop push-to-talk dictation in the running app. Bind `captioneer dictate --toggle` to a desktop "
    "shortcut where apps cannot watch the keyboard (Wayland)."
)


def add_gui_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--input-file",
        type=Path,
        metavar="PATH",
        help=f"caption this recording ({AUDIO_FILES}), played in real time",
    )


def add_dictate_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--toggle", action="store_true", help="start dictating, or stop and insert the text")
