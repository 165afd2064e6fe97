"""Transcript exporters: plain text, JSON, SRT and WebVTT (subtitle cues with line-length limits)."""

from __future__ import annotations

import json
from dataclasses import dataclass

from inference.contract import Transcript, Word

FORMATS = ("text", "json", "jsonl", "srt", "vtt")


@dataclass(frozen=True)
class Cue:
    start_s: float
    end_s: float
    lines: tuple[str, ...]


def build_cues(
    transcript: Transcript, max_line_chars: int = 42, max_lines: int = 2, max_cue_s: float = 7.0
) -> list[Cue]:
    """Group words into cues of at most ``max_lines`` lines of ``max_line_chars`` characters.

    A cue also ends at sentence punctuation or when it would exceed ``max_cue_s``. Without word timing the
    whole text becomes one timed cue per segment (or one cue for the whole clip).
    """
    words = transcript.words
    if not words:
        if not transcript.text.strip():
            return []
        end = transcript.timing.audio_s if transcript.timing else 0.0
        return [Cue(0.0, max(end, 0.001), tuple(_wrap(transcript.text.split(), max_line_chars)))]
    cues: list[Cue] = []
    current: list[Word] = []

    def flush() -> None:
        if current:
            lines = _wrap([w.text for w in current], max_line_chars)
            cues.append(Cue(current[0].start_s, max(current[-1].end_s, current[0].start_s + 0.001), tuple(lines)))
            current.clear()

    for word in words:
        candidate = [w.text for w in current] + [word.text]
        too_long = len(_wrap(candidate, max_line_chars)) > max_lines
        too_slow = bool(current) and word.end_s - current[0].start_s > max_cue_s
        if current and (too_long or too_slow):
            flush()
        current.append(word)
        if word.text.endswith((".", "?", "!")):
            flush()
    flush()
    return cues


def _wrap(words: list[str], width: int) -> list[str]:
    lines: list[str] = []
    line = ""
    for word in words:
        if line and len(line) + 1 + len(word) > width:
            lines.append(line)
            line = word
        else:
            line = f"{line} {word}" if line else word
    if line:
        lines.append(line)
    return lines


def _stamp(seconds: float, sep: str) -> str:
    millis = max(0, round(seconds * 1000))
    hours, rest = divmod(millis, 3_600_000)
    minutes, rest = divmod(rest, 60_000)
    secs, ms = divmod(rest, 1000)
    return f"{hours:02d}:{minutes:02d}:{secs:02d}{sep}{ms:03d}"


def to_srt(transcript: Transcript, **cue_args: float) -> str:
    blocks = []
    for index, cue in enumerate(build_cues(transcript, **cue_args), start=1):  # type: ignore[arg-type]
        blocks.append(f"{index}\n{_stamp(cue.start_s, ',')} --> {_stamp(cue.end_s, ',')}\n" + "\n".join(cue.lines))
    return "\n\n".join(blocks) + ("\n" if blocks else "")


def to_vtt(transcript: Transcript, **cue_args: float) -> str:
    parts = ["WEBVTT", ""]
    for cue in build_cues(transcript, **cue_args):  # type: ignore[arg-type]
        parts.append(f"{_stamp(cue.start_s, '.')} --> {_stamp(cue.end_s, '.')}\n" + "\n".join(cue.lines))
        parts.append("")
    return "\n".join(parts)


def to_json(transcript: Transcript) -> str:
    return json.dumps(transcript.to_json(), ensure_ascii=False)


def render(transcript: Transcript, fmt: str) -> str:
    if fmt == "text":
        return transcript.text + "\n"
    if fmt == "json":
        return to_json(transcript) + "\n"
    if fmt == "srt":
        return to_srt(transcript)
    if fmt == "vtt":
        return to_vtt(transcript)
    raise ValueError(f"render() does not handle {fmt!r}")
