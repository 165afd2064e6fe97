"""Gap markers on the command line's live path: placed before the first event about audio after the gap
(text said before the input went away stays before it), and put into the final transcript at the same place."""

from __future__ import annotations

from inference.audio.devices.gaps import GapMarkers
from inference.contract import Delta, Done, StreamEvent, Transcript


def texts(events: list[StreamEvent]) -> list[str]:
    return [event.text for event in events if isinstance(event, Delta)]


def test_a_marker_comes_after_the_text_before_the_gap_and_before_the_text_after_it() -> None:
    shown: list[StreamEvent] = []
    gaps = GapMarkers(shown.extend)
    gaps.deliver([Delta(" Emma quickly", 0, 0.5, 1.5)])
    gaps.add(2.0, 1.25, "the input 'USB' was unplugged", 1.25)
    gaps.deliver([Delta(" closed the bottle.", 0, 1.5, 1.9)])  # audio before the gap: still before the marker
    assert not any(isinstance(e, Delta) and e.segment_id < 0 for e in shown)
    gaps.deliver([Delta(" There are", 1, 3.5, 4.0)])
    marker = " [… 2.0 s: no audio for 1.25 s (the input 'USB' was unplugged) …]"
    assert texts(shown) == [" Emma quickly", " closed the bottle.", marker, " There are"]
    assert [e.segment_id for e in shown if isinstance(e, Delta)] == [0, 0, -1, 1]

    final = gaps.into(Transcript("Emma quickly closed the bottle. There are twenty hearts."))
    assert final.text == f"Emma quickly closed the bottle.{marker} There are twenty hearts."


def test_a_marker_after_the_last_words_is_shown_at_the_end() -> None:
    shown: list[StreamEvent] = []
    gaps = GapMarkers(shown.extend)
    gaps.deliver([Delta(" Hello there.", 0, 0.0, 1.0)])
    gaps.add(1.5, 0.5, "the default output changed: now 'Mic-feed'", 0.5)
    gaps.deliver([Done(Transcript("Hello there."))])
    assert isinstance(shown[-1], Done) and texts(shown)[-1].startswith(" [… 1.5 s: no audio for 0.50 s")
    gaps.flush()  # nothing left waiting: nothing shown twice
    assert len(texts(shown)) == 2
    assert gaps.into(Transcript("Hello there.")).text.endswith(
        "(the default output changed: now 'Mic-feed') …]"
    )


def test_text_right_after_a_marker_is_kept_apart_from_it() -> None:
    shown: list[StreamEvent] = []
    gaps = GapMarkers(shown.extend)
    gaps.add(0.0, 2.0, "the default output changed", 2.0)
    gaps.deliver([Delta("Emma quickly", 0, 2.5, 3.0)])  # a stream's first text has no leading space
    assert texts(shown) == [" [… 0.0 s: no audio for 2.00 s (the default output changed) …]", " Emma quickly"]


def test_without_a_gap_the_transcript_is_untouched() -> None:
    gaps = GapMarkers(lambda _events: None)
    final = Transcript("Line one.\nLine two.")
    assert gaps.into(final) is final
