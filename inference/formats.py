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
    """Subtitle cues of at most ``max_lines`` lines of ``max_line_chars`` characters and ``max_cue_s`` seconds.

    With word timestamps (Parakeet) cues are cut between words, at sentence punctuation or at the limits,
    and span exactly their words. Without them (R2T2, live segments) each segment is cut into pieces that
    fit the line limits, and the segment's time is shared among its pieces by their length; a clip with
    neither words nor segments is treated as one segment over its duration.
    """
    if transcript.words:
        return _cues_from_words(transcript.words, max_line_chars, max_lines, max_cue_s)
    spans = [(s.text, s.start_s, s.end_s) for s in transcript.segments if s.text.strip()]
    if not spans and transcript.text.strip():
        end = transcript.timing.audio_s if transcript.timing else 0.0
        spans = [(transcript.text, 0.0, end)]
    cues: list[Cue] = []
    for text, start, end in spans:
        cues += _cues_from_text(text, start, end, max_line_chars, max_lines, max_cue_s)
    return cues


def _cues_from_words(words: list[Word], max_line_chars: int, max_lines: int, max_cue_s: float) -> list[Cue]:
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


def _cues_from_text(
    text: str, start: float, end: float, max_line_chars: int, max_lines: int, max_cue_s: float
) -> list[Cue]:
    lines = _wrap(text.split(), max_line_chars)
    pieces = [lines[i : i + max_lines] for i in range(0, len(lines), max_lines)]
    duration = max(end - start, 0.001 * len(pieces))

    def weights() -> list[int]:
        return [sum(len(line) for line in piece) for piece in pieces]

    # More pieces when the segment is long: no cue may outlast max_cue_s.
    while max(weights()) * duration / sum(weights()) > max_cue_s and any(
        len(" ".join(piece).split()) > 1 for piece in pieces
    ):
        pieces = _split_longest(pieces)
    shares = weights()
    cues, at = [], start
    for piece, weight in zip(pieces, shares, strict=True):
        length = duration * weight / sum(shares)
        cues.append(Cue(at, at + length, tuple(piece)))
        at += length
    return cues


def _split_longest(pieces: list[list[str]]) -> list[list[str]]:
    splittable = [i for i in range(len(pieces)) if len(" ".join(pieces[i]).split()) > 1]
    index = max(splittable, key=lambda i: sum(len(line) for line in pieces[i]))
    words = " ".join(pieces[index]).split()
    half = len(words) // 2
    return pieces[:index] + [[" ".join(words[:half])], [" ".join(words[half:])]] + pieces[index + 1 :]


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
