"""``captioneer transcribe --input meeting --mode streaming``: the microphone as "You" and what the computer
plays as "Others", two live streams on one engine (one model load), the microphone cleaned of the playback it
hears (``inference.audio.bleed``), as the window's meeting mode does.

Text prints each speaker's committed text as it grows, a new line at each change of speaker ("You: …",
"Others: …"); jsonl prints the streams' events with a ``speaker`` field, each speaker's ``done``, then the
meeting's merged ``done``. The returned transcript interleaves both by time with a speaker on each segment, so
json, SRT and VTT carry the labels as the window's export does.
"""

from __future__ import annotations

import json
import sys
import threading
from collections.abc import Callable
from typing import IO, Any

import numpy as np

from inference.cli_signals import finish_on_signals
from inference.contract import Delta, Done, Stats, StreamEvent, Transcript, event_to_json
from inference.speakers import OTHERS, YOU, label_lead, merge_finals


class MeetingPrinter:
    """Prints both streams' events as they come (from the client's threads), labelled."""

    def __init__(self, out: IO[str], fmt: str) -> None:
        self.out = out
        self.fmt = fmt
        self._lock = threading.Lock()
        self._speaker: str | None = None  # whose text the current line shows

    def deliver_for(self, speaker: str) -> Callable[[list[StreamEvent]], None]:
        return lambda events: self.print_events(speaker, events)

    def print_events(self, speaker: str, events: list[StreamEvent]) -> None:
        with self._lock:
            for event in events:
                if self.fmt == "jsonl" and not isinstance(event, Stats):
                    self.out.write(
                        json.dumps({**event_to_json(event), "speaker": speaker}, ensure_ascii=False)
                    )
                    self.out.write("\n")
                elif self.fmt == "text" and isinstance(event, Delta) and event.text:
                    if speaker != self._speaker:  # a new turn starts a line with its speaker
                        lead = "\n" if self._speaker is not None else ""
                        self.out.write(lead + label_lead(speaker) + event.text.lstrip())
                        self._speaker = speaker
                    else:
                        self.out.write(event.text)
            self.out.flush()

    def end_line(self) -> None:
        with self._lock:
            if self._speaker is not None:
                self.out.write("\n")


def run_meeting_stream(
    engine: Any,
    fmt: str,
    stream_mode: str,
    request_options: dict[str, Any],
    chunk_samples: int,
    out: IO[str],
    open_capture: Callable[[str], Any] | None = None,
) -> Transcript:
    """Caption the default microphone and system audio until Ctrl-C; the meeting's merged final transcript.
    ``open_capture(id)``: the capture for an input id (by default through the sound server)."""
    from inference.audio.bleed import BleedFilter
    from inference.audio.devices.choices import MIC_DEFAULT, SYSTEM_DEFAULT
    from inference.audio.devices.meeting_feed import feed_meeting_until_interrupted
    from inference.audio.devices.opening import open_capture as open_input
    from inference.audio.meeting import MeetingInput
    from inference.client import BacklogFull, BacklogPolicy

    def notify(note: str) -> None:
        sys.stderr.write(f"captioneer: {note}\n")

    opener = open_capture or (lambda input_id: open_input(input_id, notify))
    meeting = MeetingInput(opener(MIC_DEFAULT), opener(SYSTEM_DEFAULT), BleedFilter())
    printer = MeetingPrinter(out, fmt)
    # A live device cannot wait for the model: its audio queues (bounded), as for one input.
    streams = {
        speaker: engine.open_stream(
            on_events=printer.deliver_for(speaker),
            backlog=BacklogPolicy("coalesce", max_in_flight=2, max_backlog_s=30.0),
            mode=stream_mode,
            **request_options,
        )
        for speaker in (YOU, OTHERS)
    }

    def push(speaker: str, chunk: np.ndarray) -> None:
        try:
            streams[speaker].push(chunk)
        except BacklogFull as exc:  # dropped with a note: the device cannot wait
            notify(f"{speaker}: {exc}")

    # Ctrl-C / kill end the feeding between two pushes (inference/cli_signals.py), never inside one.
    with finish_on_signals() as stop:
        feed_meeting_until_interrupted(push, meeting, chunk_samples, notify, stop=stop.is_set)
    if stop.is_set():
        notify("interrupted; finishing the transcript")
    finals = {speaker: stream.finish() for speaker, stream in streams.items()}
    for speaker, final in finals.items():  # each speaker's own final (jsonl), as the window gets them
        printer.print_events(speaker, [Done(final)])
    printer.end_line()
    return merge_finals(finals)
