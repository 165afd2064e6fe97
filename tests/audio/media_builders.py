"""Audio and video files made by the ffmpeg tool, for the tests of what is read through it (FfmpegReader)."""

from __future__ import annotations

import subprocess
from pathlib import Path


def ffmpeg(*args: str) -> None:
    """Run ffmpeg quietly (errors only, never waiting on stdin, overwriting)."""
    subprocess.run(["ffmpeg", "-v", "error", "-nostdin", "-y", *args], check=True)


def encoded(source: Path, out: Path, *codec: str) -> Path:
    """``source`` re-encoded into ``out`` (its container from the name) with ``codec`` options."""
    ffmpeg("-i", str(source), *codec, str(out))
    return out


def generated(graph: str, out: Path, *codec: str) -> Path:
    """A lavfi source (``sine=f=440:d=6``, ``aevalsrc=...``) encoded into ``out``."""
    ffmpeg("-f", "lavfi", "-i", graph, *codec, str(out))
    return out


def video_with(audio: Path, out: Path) -> Path:
    """A small H.264 video with ``audio`` as its AAC sound track, as long as the audio."""
    ffmpeg(
        "-f", "lavfi", "-i", "color=c=blue:s=64x48:d=60", "-i", str(audio),
        "-c:v", "libx264", "-c:a", "aac", "-shortest", str(out),
    )  # fmt: skip
    return out
