"""One live stream's text, times and segment ids, kept continuous when the worker behind it is replaced.

After a worker restart the client reopens the stream in a new process, which starts again at time 0,
segment 0 and empty text. ``StreamContinuity`` rewrites what the new stream reports so the caller sees
one stream: times count from the start of the whole stream, segment ids never repeat (a view would
replace the wrong provisional text otherwise), the first new delta is separated from the old text, and
the final transcript starts with everything committed before the crash.
"""

from __future__ import annotations

import dataclasses

from inference.contract import Delta, Segment, Snapshot, SpeechEnd, StreamEvent, Timing, Transcript, Word


class StreamContinuity:
    def __init__(self) -> None:
        self._committed: list[str] = []
        self._segments: list[Segment] = []  # from speech_end events, in stream time
        self._before: tuple[str, list[Segment]] | None = None  # what was final when the last worker died
        self._time_offset_s = 0.0
        self._id_offset = 0
        self._max_id = -1
        self._join_next = False
        self._continued = False  # the current worker stream continues a segment of the one before it
        self._closed: set[int] = set()  # segment ids a speech end closed
        self._by_segment: dict[
            int, str
        ] = {}  # each segment's text: its deltas, or its speech end's once closed

    @property
    def text(self) -> str:
        return "".join(self._committed)

    @property
    def authoritative_text(self) -> str:
        """The committed text with each closed segment's text as its speech end gave it (a segment's last words
        may arrive only there)."""
        return "".join(self._by_segment.values())

    @property
    def restarted(self) -> bool:
        return self._before is not None

    def worker_replaced(
        self, resume_at_s: float, continues_segment: bool = False, overlap_text: str = ""
    ) -> None:
        """The next events come from a new worker stream whose time 0 is ``resume_at_s`` of this stream.

        ``continues_segment``: that stream's segment 0 is the segment left open here, and its deltas continue
        the committed text as it is (it may go on inside a word); otherwise it starts a new segment.
        ``overlap_text``: committed text the new stream's final transcript repeats (its context's)."""
        before = self.authoritative_text
        if overlap_text and before.endswith(overlap_text):
            before = before[: len(before) - len(overlap_text)]
        self._before = (before, list(self._segments))
        self._time_offset_s = resume_at_s
        open_id = self._max_id if self._max_id >= 0 and self._max_id not in self._closed else None
        self._continued = continues_segment
        self._id_offset = open_id if continues_segment and open_id is not None else self._max_id + 1
        self._join_next = bool(self._committed) and not continues_segment

    def gap(self, start_s: float, end_s: float) -> Delta:
        """A visible marker for audio that could not be transcribed, committed as a segment of its own."""
        self._max_id += 1
        self._closed.add(self._max_id)
        text = f"[… {start_s:.1f}–{end_s:.1f} s not transcribed …]"
        event = Delta((" " if self.text.strip() else "") + text, self._max_id, start_s, end_s)
        self._committed.append(event.text)
        self._by_segment[self._max_id] = event.text
        self._join_next = True
        return event

    def adopt(self, event: StreamEvent) -> StreamEvent:
        """The event as this stream reports it (shifted, renumbered); records committed text."""
        if isinstance(event, Delta | Snapshot | SpeechEnd) and self.restarted:
            changes: dict[str, object] = {"segment_id": event.segment_id + self._id_offset}
            if event.start_s is not None:
                changes["start_s"] = event.start_s + self._time_offset_s
            if event.end_s is not None:
                changes["end_s"] = event.end_s + self._time_offset_s
            if event.speech_start_s is not None:
                changes["speech_start_s"] = event.speech_start_s + self._time_offset_s
            event = dataclasses.replace(event, **changes)  # type: ignore[arg-type]
        if isinstance(event, Delta | Snapshot | SpeechEnd):
            self._max_id = max(self._max_id, event.segment_id)
        if (
            isinstance(event, Delta | Snapshot)
            and self._join_next
            and event.text[:1].strip()
            and not self.text[-1:].isspace()
        ):  # a new stream's first text, read after the committed text
            event = dataclasses.replace(event, text=" " + event.text)
        if isinstance(event, Delta) and event.text:
            self._join_next = False
            self._committed.append(event.text)
            self._by_segment[event.segment_id] = self._by_segment.get(event.segment_id, "") + event.text
        elif isinstance(event, SpeechEnd):
            self._closed.add(event.segment_id)
            if event.text:
                self._segments.append(Segment(event.text, event.start_s, event.end_s))
                known = self._by_segment.get(event.segment_id)
                if known is not None:
                    lead = known[: len(known) - len(known.lstrip())]
                else:
                    lead = " " if self.authoritative_text.strip() else ""
                self._by_segment[event.segment_id] = lead + event.text.strip()
        return event

    def unannounced_tail(self, final: Transcript) -> Delta | None:
        """The end of the final text that no delta carried (a native stream's tail committed only at its finish),
        as the last delta, so that the deltas add up to the final text; None when they already do, or when the
        final text revised committed words (then which words are new cannot be told)."""
        said = self.text.strip()
        if not final.text.startswith(said):
            return None
        rest = final.text[len(said) :]
        if not rest.strip():
            return None
        self._max_id += 1
        self._closed.add(self._max_id)
        text = rest if said else rest.lstrip()
        self._committed.append(text)
        self._by_segment[self._max_id] = text
        start_s = end_s = None  # where it lies: the final segment it ends with, when there is one
        for segment in final.segments:
            if segment.text.strip() and text.strip().endswith(segment.text.strip()):
                start_s, end_s = segment.start_s, segment.end_s
        return Delta(text, self._max_id, start_s, end_s, final.language)

    def final(self, transcript: Transcript) -> Transcript:
        """The new worker's final transcript, placed after everything committed before a restart."""
        if self._before is None:
            return transcript
        text_before, segments_before = self._before
        shift = self._time_offset_s

        def moved(word: Word) -> Word:
            return word.shifted(shift)

        segments = [
            Segment(s.text, s.start_s + shift, s.end_s + shift, tuple(moved(w) for w in s.words))
            for s in transcript.segments
        ]
        if (
            self._continued
        ):  # the new stream's text goes on from the text before its context, maybe inside a word
            text = (text_before + transcript.text).strip()
        else:
            text = " ".join(part for part in (text_before.strip(), transcript.text.strip()) if part)
        return Transcript(
            text=text,
            language=transcript.language,
            words=[moved(w) for w in transcript.words],  # word times before the crash lived in the old worker
            segments=segments_before + segments,
            token_ids=list(transcript.token_ids),
            # The new stream's clock starts where it took over: the whole stream's audio is longer.
            timing=Timing(transcript.timing.audio_s + shift, transcript.timing.wall_s)
            if transcript.timing
            else None,
        )
