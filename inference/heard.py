"""The transcript of a live stream that ended while no worker ran (docs/architecture.md §4.2): the stream's
``heard()`` text and timing, with one segment per committed segment, built from the deltas the caller received,
so subtitles and JSON keep their times as a finished stream's would."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from inference.contract import Delta, Segment, Transcript


def heard_with_segments(heard: Transcript, deltas: Sequence[Delta]) -> Transcript:
    """``heard`` with a segment per ``segment_id`` of ``deltas`` (in the order they arrived; gap markers are
    segments of their own). A delta without times takes them from its neighbours."""
    order: list[int] = []
    texts: dict[int, list[str]] = {}
    spans: dict[int, list[float]] = {}
    for delta in deltas:
        if delta.segment_id not in texts:
            order.append(delta.segment_id)
            texts[delta.segment_id] = []
            spans[delta.segment_id] = []
        texts[delta.segment_id].append(delta.text)
        spans[delta.segment_id] += [t for t in (delta.start_s, delta.end_s) if t is not None]
    segments: list[Segment] = []
    for segment_id in order:
        text = "".join(texts[segment_id]).strip()
        if not text:
            continue
        previous_end = segments[-1].end_s if segments else 0.0
        times = spans[segment_id] or [previous_end]
        segments.append(Segment(text, min(times), max(times)))
    return dataclasses.replace(heard, segments=segments)
