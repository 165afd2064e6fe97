"""Exporters: SRT/VTT timing format, cue splitting by line length and punctuation, JSON shape."""

from __future__ import annotations

import json

import pytest

from inference.contract import Timing, Transcript, Word
from inference.formats import build_cues, render, to_srt, to_vtt


def _transcript() -> Transcript:
    words = [
        Word(w, i * 0.5, i * 0.5 + 0.4)
        for i, w in enumerate("the quick brown fox jumps over the lazy dog.".split())
    ]
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


def test_segments_without_words_become_cues_within_the_limits() -> None:
    """R2T2 and live segments have no word times: cues follow segments, fit 2 x 42 characters and 7 s."""
    from inference.contract import Segment

    long_text = " ".join(f"word{i}" for i in range(60))  # ~400 characters in one 35 s segment
    t = Transcript(
        text="hello there " + long_text,
        segments=[Segment("hello there", 0.5, 1.5), Segment(long_text, 2.0, 37.0)],
    )
    cues = build_cues(t)
    assert cues[0].start_s == 0.5 and cues[0].end_s == 1.5 and cues[0].lines == ("hello there",)
    rest = cues[1:]
    assert rest[0].start_s == 2.0 and abs(rest[-1].end_s - 37.0) < 1e-9
    assert all(b.start_s == pytest.approx(a.end_s) for a, b in zip(rest, rest[1:], strict=False))
    assert all(c.end_s - c.start_s <= 7.0 + 1e-9 for c in cues)
    assert all(len(c.lines) <= 2 and all(len(line) <= 42 for line in c.lines) for c in cues)
    assert " ".join(" ".join(c.lines) for c in rest) == long_text  # nothing lost or repeated
    srt = to_srt(t)
    assert srt.startswith("1\n00:00:00,500 --> 00:00:01,500\nhello there\n\n2\n00:00:02,000 --> ")


def test_a_long_single_word_segment_cannot_loop() -> None:
    from inference.contract import Segment

    t = Transcript(
        text="a b", segments=[Segment("supercalifragilistic", 0.0, 30.0), Segment("a b", 30.0, 60.0)]
    )
    cues = build_cues(t)
    assert [c.lines for c in cues][0] == ("supercalifragilistic",) and len(cues) == 3


def test_text_without_word_times_is_shown_only_while_someone_speaks() -> None:
    from inference.contract import Segment

    text = " ".join(f"w{i}" for i in range(24))
    stretches = [(1.0, 4.0), (10.0, 14.0), (14.5, 16.0), (25.0, 26.0)]  # 14-14.5: a breath, bridged
    transcript = Transcript(text, segments=[Segment(text, 0.0, 30.0)], speech=stretches)
    cues = build_cues(transcript)
    silences = [(4.0, 10.0), (16.0, 25.0)]
    assert all(not (cue.start_s < a and cue.end_s > b) for cue in cues for a, b in silences)
    assert all(
        any(a - 1e-6 <= cue.start_s and cue.end_s <= b + 1e-6 for a, b in [(1, 4), (10, 16), (25, 26)])
        for cue in cues
    )
    shown = " ".join(line for cue in cues for line in cue.lines).split()
    assert shown == text.split()  # every word, in order, once
    # Words are given out by voiced time: 3 s, 6 s, 1 s of 10 s.
    first = [w for cue in cues if cue.end_s <= 4.0 for line in cue.lines for w in line.split()]
    assert len(first) == round(24 * 3 / 10)
    without = build_cues(Transcript(text, segments=[Segment(text, 0.0, 30.0)]))
    assert without[0].start_s == 0.0 and without[-1].end_s == pytest.approx(
        30.0
    )  # no VAD stretches: the segment as before
    assert Transcript.from_json(transcript.to_json()).speech == stretches
