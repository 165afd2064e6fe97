"""Exporters: SRT/VTT timing format, cue splitting by line length and punctuation, JSON shape."""

from __future__ import annotations

import json

from inference.contract import Timing, Transcript, Word
from inference.formats import build_cues, render, to_srt, to_vtt


def _transcript() -> Transcript:
    words = [Word(w, i * 0.5, i * 0.5 + 0.4) for i, w in enumerate("the quick brown fox jumps over the lazy dog.".split())]
    words += [Word("Next", 6.0, 6.3), Word("sentence", 6.4, 7.0)]
    return Transcript(text=" ".join(w.text for w in words), language="en", words=words, token_ids=[1, 2, 3])


def test_srt_numbering_and_timestamps() -> None:
    srt = to_srt(_transcript())
    blocks = srt.strip().split("\n\n")
    assert blocks[0].startswith("1\n00:00:00,000 --> 00:00:04,400\n")
    assert blocks[1].startswith("2\n00:00:06,000 --> 00:00:07,000\nNext sentence")


def test_vtt_header_and_dot_millis() -> None:
    vtt = to_vtt(_transcript())
    assert vtt.startswith("WEBVTT\n\n00:00:00.000 --> 00:00:04.400")


def test_line_length_limit_splits_cues() -> None:
    cues = build_cues(_transcript(), max_line_chars=10, max_lines=1)
    assert all(len(line) <= 10 for cue in cues for line in cue.lines)
    assert len(cues) > 3
    joined = " ".join(" ".join(c.lines) for c in cues)
    assert joined == _transcript().text


def test_json_contract() -> None:
    t = _transcript()
    t.timing = Timing(audio_s=10.0, wall_s=0.5)
    data = json.loads(render(t, "json"))
    assert set(data) == {"text", "language", "words", "segments", "token_ids", "timing"}
    assert data["words"][0] == {"word": "the", "start": 0.0, "end": 0.4}
    assert data["timing"] == {"audio_s": 10.0, "wall_s": 0.5, "rtf": 0.05}


def test_empty_transcript_has_no_cues() -> None:
    assert to_srt(Transcript(text="")) == ""
    assert to_vtt(Transcript(text="")) == "WEBVTT\n"


def test_hour_stamps() -> None:
    t = Transcript(text="late", words=[Word("late", 3725.25, 3726.0)])
    assert "01:02:05,250 --> 01:02:06,000" in to_srt(t)
