"""The speech gate's window planner (inference/audio/spans.py::plan_speech_windows): examples + random properties."""

from __future__ import annotations

import numpy as np
import pytest

from inference.audio.spans import Span, SpeechWindow, plan_speech_windows
from inference.audio.vad import SpeechSegment
from inference.errors import UsageError

SR = 16000


def plan(speech: list[tuple[int, int]], n: int, cap: int = 20 * SR, gap: int = SR // 2, pad: int = SR // 2):
    segments = [SpeechSegment(a, b) for a, b in speech]
    return plan_speech_windows(segments, n, cap, merge_gap_samples=gap, padding_samples=pad)


def test_close_segments_share_a_window_far_ones_do_not() -> None:
    windows = plan([(SR, 2 * SR), (2 * SR + 4000, 3 * SR), (6 * SR, 7 * SR)], 8 * SR)
    assert windows == [
        SpeechWindow(Span(SR // 2, 3 * SR + SR // 2), Span(0, (3 * SR + 6 * SR) // 2), Span(SR, 3 * SR)),
        SpeechWindow(
            Span(6 * SR - SR // 2, 7 * SR + SR // 2), Span(9 * SR // 2, 8 * SR), Span(6 * SR, 7 * SR)
        ),
    ]


def test_padding_stops_at_the_clip_and_at_the_zone() -> None:
    # Padding by 1 s would reach the neighbour's speech; the windows stop where the zones meet.
    windows = plan([(1000, SR), (SR + 9000, 2 * SR)], 2 * SR + 100, pad=SR)
    middle = (SR + SR + 9000) // 2
    assert [w.window for w in windows] == [Span(0, middle), Span(middle, 2 * SR + 100)]
    assert [w.zone for w in windows] == [Span(0, middle), Span(middle, 2 * SR + 100)]


def test_a_group_stops_at_its_cap_and_a_long_segment_is_cut() -> None:
    windows = plan([(0, 5 * SR), (5 * SR + 100, 9 * SR)], 9 * SR, cap=4 * SR, pad=0)
    assert [w.speech for w in windows] == [Span(0, 4 * SR), Span(4 * SR, 5 * SR), Span(5 * SR + 100, 9 * SR)]
    assert [w.zone for w in windows] == [
        Span(0, 4 * SR),
        Span(4 * SR, 5 * SR + 50),
        Span(5 * SR + 50, 9 * SR),
    ]


def test_no_speech_no_windows_and_bad_input_is_refused() -> None:
    assert plan([], 10 * SR) == []
    with pytest.raises(UsageError, match="outside the audio"):
        plan([(0, 11 * SR)], 10 * SR)
    with pytest.raises(UsageError):
        plan([(0, SR)], 10 * SR, cap=0)


@pytest.mark.parametrize("seed", range(20))
def test_zones_tile_the_clip_and_windows_hold_their_speech(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = int(rng.integers(SR, 60 * SR))
    cuts = np.sort(rng.choice(n, size=2 * int(rng.integers(1, 12)), replace=False))
    speech = [(int(a), int(b)) for a, b in cuts.reshape(-1, 2)]
    cap = int(rng.integers(SR, 10 * SR))
    windows = plan(speech, n, cap=cap, gap=int(rng.integers(0, SR)), pad=int(rng.integers(0, 2 * SR)))
    assert windows[0].zone.start == 0 and windows[-1].zone.end == n
    for before, after in zip(windows, windows[1:], strict=False):
        assert before.zone.end == after.zone.start
        assert before.speech.end <= after.speech.start
    for w in windows:
        assert w.zone.start <= w.window.start and w.window.end <= w.zone.end  # so windows never overlap
        assert w.window.start <= w.speech.start < w.speech.end <= w.window.end
        assert w.speech.length <= cap
        assert w.zone.start <= w.speech.start and w.speech.end <= w.zone.end
    for a, b in speech:  # every segment lies in the groups' speech, once
        assert sum(max(0, min(b, w.speech.end) - max(a, w.speech.start)) for w in windows) == b - a
