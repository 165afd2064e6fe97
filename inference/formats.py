"""Transcript exporters: plain text, JSON, SRT and WebVTT (subtitle cues with line-length limits)."""

from __future__ import annotations

import json
from dataclasses import dataclass, replace

from inference.contract import Segment, Transcript, Word

FORMATS = ("text", "json", "jsonl", "srt", "vtt")


@dataclass(frozen=True)
class Cue:
    start_s: float
    end_s: float
    lines: tuple[str, ...]
    words: tuple[Word, ...] = ()  # the timed words it shows (none for text without word times)
    speaker: str | None = None  # who says it (segments with speakers: the app's meeting mode)


def build_cues(
    transcript: Transcript, max_line_chars: int = 42, max_lines: int = 2, max_cue_s: float = 7.0
) -> list[Cue]:
    """Subtitle cues of at most ``max_lines`` lines of ``max_line_chars`` characters and ``max_cue_s`` seconds.

    With word timestamps (Parakeet) cues are cut between words, at sentence punctuation or at the limits,
    and span exactly their words. Without them (R2T2, live segments) each segment is cut into pieces that
    fit the line limits, and the segment's time is shared among its pieces by their length; a clip with
    neither words nor segments is treated as one segment over its duration. Segments with speakers are cut one
    by one (a cue never mixes two speakers), in time order.
    """
    if any(segment.speaker for segment in transcript.segments):
        return _cues_by_speaker(transcript.segments, transcript.speech, max_line_chars, max_lines, max_cue_s)
    if transcript.words:
        return _cues_from_words(transcript.words, max_line_chars, max_lines, max_cue_s)
    spans = [(s.text, s.start_s, s.end_s) for s in transcript.segments if s.text.strip()]
    if not spans and transcript.text.strip():
        end = transcript.timing.audio_s if transcript.timing else 0.0
        spans = [(transcript.text, 0.0, end)]
    cues: list[Cue] = []
    for text, start, end in spans:
        for piece, piece_start, piece_end in _over_speech(text, start, end, transcript.speech):
            cues += _cues_from_text(piece, piece_start, piece_end, max_line_chars, max_lines, max_cue_s)
    return cues


def _cues_by_speaker(
    segments: list[Segment],
    speech: list[tuple[float, float]],
    max_line_chars: int,
    max_lines: int,
    max_cue_s: float,
) -> list[Cue]:
    cues: list[Cue] = []
    for segment in sorted(segments, key=lambda s: s.start_s):
        if not segment.text.strip():
            continue
        if segment.words:
            pieces = _cues_from_words(list(segment.words), max_line_chars, max_lines, max_cue_s)
        else:
            pieces = [
                cue
                for piece, start, end in _over_speech(segment.text, segment.start_s, segment.end_s, speech)
                for cue in _cues_from_text(piece, start, end, max_line_chars, max_lines, max_cue_s)
            ]
        cues += [replace(cue, speaker=segment.speaker) for cue in pieces]
    return cues


SILENCE_BREAK_S = 1.0  # no cue stays on screen through a silence this long


def _over_speech(
    text: str, start: float, end: float, speech: list[tuple[float, float]]
) -> list[tuple[str, float, float]]:
    """A text-only segment shared among the voiced stretches inside it (pauses under ``SILENCE_BREAK_S``
    bridged), its words given out by each stretch's share of the voiced time: an estimate, but one that keeps
    cues off the screen through silences. Without VAD stretches inside it, the segment stays whole."""
    stretches: list[list[float]] = []
    for a, b in sorted(speech):
        a, b = max(a, start), min(b, end)
        if b <= a:
            continue
        if stretches and a - stretches[-1][1] < SILENCE_BREAK_S:
            stretches[-1][1] = max(stretches[-1][1], b)
        else:
            stretches.append([a, b])
    words = text.split()
    if len(stretches) < 2 or len(words) < 2:
        return [(text, *(stretches[0] if stretches else (start, end)))] if words else []
    voiced = sum(b - a for a, b in stretches)
    pieces, taken, elapsed = [], 0, 0.0
    for index, (a, b) in enumerate(stretches):
        elapsed += b - a
        upto = len(words) if index == len(stretches) - 1 else round(len(words) * elapsed / voiced)
        if upto > taken:
            pieces.append((" ".join(words[taken:upto]), a, b))
            taken = upto
    return pieces


PAUSE_BREAK_S = 0.5  # a silence this long between words always starts a new cue
# Words a cue should not end on when the break can move (a reader expects what follows them).
FUNCTION_WORDS = frozenset(
    "a an the and or but nor so yet of in on at to for from by with about as into over than that this these those "
    "is are was were be been am his her its their our your my if then when while because".split()
)
LOOK_BACK_WORDS = 3  # how far a forced break may move back to avoid ending on a function word


def _cues_from_words(words: list[Word], max_line_chars: int, max_lines: int, max_cue_s: float) -> list[Cue]:
    """Cues end where their last word's sound ends (not at the next word's start), break at pauses and sentence
    ends, and, when the size or duration limits force a break, avoid leaving a function word at the end."""
    cues: list[Cue] = []
    current: list[Word] = []

    def emit(count: int) -> None:
        piece = current[:count]
        del current[:count]
        lines = _wrap([w.text for w in piece], max_line_chars)
        end = max(piece[-1].sound_end_s, piece[0].start_s + 0.001)
        cues.append(Cue(piece[0].start_s, end, tuple(lines), tuple(piece)))

    def forced_break() -> int:
        """How many of ``current`` to emit: all, or fewer so that the cue does not end on a function word."""
        for count in range(len(current), max(0, len(current) - LOOK_BACK_WORDS), -1):
            if _bare(current[count - 1].text) not in FUNCTION_WORDS:
                return count
        return len(current)

    for word in words:
        if current and word.start_s - current[-1].sound_end_s >= PAUSE_BREAK_S:
            emit(len(current))
        while current:
            candidate = [w.text for w in current] + [word.text]
            too_long = len(_wrap(candidate, max_line_chars)) > max_lines
            too_slow = word.sound_end_s - current[0].start_s > max_cue_s
            if not (too_long or too_slow):
                break
            emit(forced_break())
        current.append(word)
        if word.text.endswith((".", "?", "!")):
            emit(len(current))
    if current:
        emit(len(current))
    return cues


def _bare(word: str) -> str:
    return word.strip(".,;:!?\"'()").lower()


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
        lines = list(cue.lines)
        if cue.speaker:  # SubRip has no speaker markup: the name leads the cue, as in subtitles of dialogue
            lines[0] = f"{cue.speaker}: {lines[0]}"
        blocks.append(
            f"{index}\n{_stamp(cue.start_s, ',')} --> {_stamp(cue.end_s, ',')}\n" + "\n".join(lines)
        )
    return "\n\n".join(blocks) + ("\n" if blocks else "")


def to_vtt(transcript: Transcript, **cue_args: float) -> str:
    parts = ["WEBVTT", ""]
    for cue in build_cues(transcript, **cue_args):  # type: ignore[arg-type]
        text = "\n".join(cue.lines)
        if cue.speaker:  # WebVTT's voice span names the speaker (players show or style it)
            text = f"<v {_vtt_escape(cue.speaker)}>{_vtt_escape(text)}</v>"
        parts.append(f"{_stamp(cue.start_s, '.')} --> {_stamp(cue.end_s, '.')}\n" + text)
        parts.append("")
    return "\n".join(parts)


def _vtt_escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


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
