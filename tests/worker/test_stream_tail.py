"""A tail that only a stream's final transcript holds still reaches the caller as its last delta."""

from __future__ import annotations

from inference.continuity import StreamContinuity
from inference.contract import Delta, Segment, Transcript


def test_the_final_text_past_the_deltas_becomes_one_last_delta_with_its_times() -> None:
    continuity = StreamContinuity()
    continuity.adopt(Delta("the early", 0, 0.0, 1.0))
    final = Transcript("the early bottle sang", segments=[Segment("bottle sang", 1.2, 2.0)])
    tail = continuity.unannounced_tail(final)
    assert tail is not None and (tail.text, tail.start_s, tail.end_s) == (" bottle sang", 1.2, 2.0)
    assert tail.segment_id == 1 and continuity.text == final.text
    assert continuity.unannounced_tail(final) is None  # announced now


def test_no_tail_when_the_deltas_already_add_up_or_the_final_text_revised_them() -> None:
    continuity = StreamContinuity()
    continuity.adopt(Delta("a cat", 0))
    assert continuity.unannounced_tail(Transcript("a cat")) is None
    assert continuity.unannounced_tail(Transcript("a hat sat")) is None  # which words are new is unknown
    fresh = StreamContinuity()
    only = fresh.unannounced_tail(Transcript("said at the end"))
    assert only is not None and only.text == "said at the end"  # no leading space before any text
