"""The command line's meeting output: text starts a line at each change of speaker, jsonl labels each event."""

from __future__ import annotations

import io
import json

from inference.cli_meeting import MeetingPrinter
from inference.contract import Delta, Segment, Stats, Transcript
from inference.formats import render
from inference.speakers import merge_finals


def test_text_starts_a_labelled_line_at_each_change_of_speaker() -> None:
    out = io.StringIO()
    printer = MeetingPrinter(out, "text")
    printer.print_events("Others", [Delta(" hello there", 0, 0.0, 1.0)])
    printer.print_events("Others", [Delta(" friend", 0, 1.0, 1.5)])
    printer.print_events("You", [Delta(" hi", 0, 1.6, 2.0), Stats(2.0, 0.1, 0.05)])
    printer.print_events("Others", [Delta(" bye", 1, 2.5, 3.0)])
    printer.end_line()
    assert out.getvalue() == "Others: hello there friend\nYou: hi\nOthers: bye\n"


def test_jsonl_labels_each_event_with_its_speaker_and_leaves_out_figures() -> None:
    out = io.StringIO()
    printer = MeetingPrinter(out, "jsonl")
    printer.print_events("You", [Delta(" hi", 0, 0.0, 0.5), Stats(0.5, 0.1, 0.05)])
    lines = [json.loads(line) for line in out.getvalue().splitlines()]
    assert lines == [{**lines[0], "type": "delta", "text": " hi", "speaker": "You"}] and len(lines) == 1


def test_the_merged_transcript_renders_speakers_in_srt_and_vtt() -> None:
    merged = merge_finals(
        {
            "You": Transcript("hi", None, [], [Segment("hi", 1.6, 2.0)]),
            "Others": Transcript("hello there", None, [], [Segment("hello there", 0.0, 1.5)]),
        }
    )
    assert merged.text == "Others: hello there\nYou: hi"
    assert "Others: hello there" in render(merged, "srt") and "You: hi" in render(merged, "srt")
    assert "<v Others>hello there</v>" in render(merged, "vtt")
    assert '"speaker": "You"' in render(merged, "json")
