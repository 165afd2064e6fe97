"""Span planners: fixed offline spans, long-form windows and VAD chunks (examples + randomised properties)."""

from __future__ import annotations

import numpy as np
import pytest

from inference.audio.spans import (
    LongFormWindow,
    Span,
    encoder_valid_frames,
    plan_fixed_spans,
    plan_long_form_windows,
    plan_vad_chunks,
    seconds_to_samples,
)
from inference.audio.vad import SpeechSegment
from inference.errors import UsageError

SR = 16000
CAP = 2 * SR  # the default chunk of 2 s
PAD = SR // 4
GAP = SR // 2


def spans(pairs: list[tuple[int, int]]) -> list[Span]:
    return [Span(a, b) for a, b in pairs]


def vad_chunks(speech: list[tuple[int, int]], n: int, capacity: int = CAP) -> list[tuple[int, int]]:
    found = plan_vad_chunks(
        [SpeechSegment(a, b) for a, b in speech], n, capacity, merge_gap_samples=GAP, padding_samples=PAD
    )
    return [(c.start, c.end) for c in found]


# --- helpers -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("seconds", "samples"), [(2.0, 32000), (30.0, 480000), (0.001, 16), (0.5 / SR, 1), (0.0, 0)]
)
def test_seconds_to_samples_rounds_half_up(seconds, samples):
    assert seconds_to_samples(seconds) == samples


@pytest.mark.parametrize(
    ("n", "frames"), [(0, 0), (159, 0), (160, 1), (1280, 1), (1440, 2), (16000, 13), (32000, 25)]
)
def test_encoder_valid_frames(n, frames):
    assert encoder_valid_frames(n) == frames


# --- fixed spans ---------------------------------------------------------------------------------------


def test_fixed_spans_are_consecutive_and_the_last_is_short():
    span = 30 * SR
    assert plan_fixed_spans(2 * span + 5, span) == spans(
        [(0, span), (span, 2 * span), (2 * span, 2 * span + 5)]
    )
    assert plan_fixed_spans(span, span) == spans([(0, span)])
    assert plan_fixed_spans(0, span) == []
    with pytest.raises(UsageError):
        plan_fixed_spans(10, 0)


# --- long-form windows -------------------------------------------------------------------------------


def test_long_form_windows_for_ten_seconds():
    windows = plan_long_form_windows(10 * SR, 2 * SR, 10 * SR, 2 * SR)
    assert [w.center for w in windows] == spans([(i * 32000, (i + 1) * 32000) for i in range(5)])
    assert windows[0].window == Span(0, 64000)
    assert (windows[0].keep_start, windows[0].keep_end) == (0, 25)
    assert windows[4].window == Span(0, 160000)
    assert (windows[4].keep_start, windows[4].keep_end) == (100, 125)
    assert [w.frame_offset for w in windows] == [0, 25, 50, 75, 100]


def test_long_form_window_with_full_left_context():
    windows = plan_long_form_windows(20 * SR, 2 * SR, 10 * SR, 2 * SR)
    w = windows[6]  # center 12..14 s
    assert w.window == Span(2 * SR, 16 * SR)
    assert (w.keep_start, w.keep_end) == (125, 150)


def test_a_tail_shorter_than_one_feature_hop_keeps_nothing():
    windows = plan_long_form_windows(5 * 32000 + 100, 32000, 160000, 32000)
    assert windows[-1].center == Span(160000, 160100)
    assert windows[-1].kept_frames == 0


def test_long_form_rejects_bad_sizes():
    with pytest.raises(UsageError):
        plan_long_form_windows(SR, 0, 0, 0)
    with pytest.raises(UsageError):
        plan_long_form_windows(SR, SR, -1, 0)
    assert plan_long_form_windows(0, SR, SR, SR) == []


def test_long_form_properties_on_random_layouts():
    rng = np.random.default_rng(11)
    for _ in range(300):
        n = int(rng.integers(1, 40 * SR))
        center = int(rng.integers(16, 5 * SR))
        left, right = int(rng.integers(0, 12 * SR)), int(rng.integers(0, 3 * SR))
        windows: list[LongFormWindow] = plan_long_form_windows(n, center, left, right)
        assert windows[0].center.start == 0 and windows[-1].center.end == n
        offset = 0
        for before, after in zip(windows, windows[1:], strict=False):
            assert before.center.end == after.center.start  # centers tile the clip
        for w in windows:
            assert 0 <= w.window.start <= w.center.start < w.center.end <= w.window.end <= n
            assert w.window.start == max(0, w.center.start - left)
            assert w.window.end == min(n, w.center.end + right)
            valid = encoder_valid_frames(w.window.length)
            assert 0 <= w.keep_start <= w.keep_end <= valid
            # Kept frames start at or before the center and stop before its end rounds past the window.
            assert w.keep_start * 1280 <= w.center.start - w.window.start
            assert w.keep_end * 1280 < w.center.end - w.window.start + 1280
            assert w.frame_offset == offset
            offset += w.kept_frames


# --- VAD chunks ----------------------------------------------------------------------------------------


def test_no_speech_gives_no_chunks():
    assert vad_chunks([], 10 * SR) == []


def test_single_segment_is_padded_and_clipped():
    assert vad_chunks([(10000, 20000)], 10 * SR) == [(6000, 24000)]
    assert vad_chunks([(1000, 5000)], 6000) == [(0, 6000)]


def test_close_segments_merge_within_capacity():
    assert vad_chunks([(10000, 20000), (30000, 34000)], 10 * SR) == [(6000, 38000)]  # exactly 2 s
    assert vad_chunks([(10000, 20000), (30000, 35000)], 10 * SR) == [(6000, 24000), (26000, 39000)]


def test_distant_segments_stay_apart():
    assert vad_chunks([(10000, 20000), (40000, 44000)], 10 * SR) == [(6000, 24000), (36000, 48000)]


def test_long_speech_is_cut_at_capacity():
    assert vad_chunks([(20000, 100000)], 10 * SR) == [(16000, 48000), (48000, 80000), (80000, 104000)]


def test_overflowing_overlap_cuts_at_the_next_speech_start():
    # A's padding overlaps B's, but together they exceed 2 s: cut where B's speech starts.
    assert vad_chunks([(10000, 30000), (33000, 40000)], 10 * SR) == [(6000, 33000), (33000, 44000)]


def test_overflowing_overlap_without_a_gap_fills_to_capacity():
    # B's speech starts exactly where A's ends, so there is no silent place to cut: fill to capacity.
    assert vad_chunks([(10000, 30000), (30000, 45000)], 10 * SR) == [(6000, 38000), (38000, 49000)]


def test_full_chunk_is_never_overlapped():
    # The reference would restart at B's padded start (56000) and decode 56000..64000 twice.
    assert vad_chunks([(0, 60000), (60000, 70000)], 10 * SR) == [(0, 32000), (32000, 64000), (64000, 74000)]


def test_unsorted_input_is_sorted():
    assert vad_chunks([(40000, 44000), (10000, 20000)], 10 * SR) == [(6000, 24000), (36000, 48000)]


def test_segments_outside_the_audio_or_bad_options_are_rejected():
    with pytest.raises(UsageError):
        vad_chunks([(5000, 4000)], SR)
    with pytest.raises(UsageError):
        vad_chunks([(0, SR + 1)], SR)
    with pytest.raises(UsageError):
        plan_vad_chunks([SpeechSegment(0, 10)], SR, 0)
    with pytest.raises(UsageError):
        plan_vad_chunks([SpeechSegment(0, 10)], SR, CAP, merge_gap_samples=-1)


def random_speech(rng: np.random.Generator, n: int, layout: str) -> list[tuple[int, int]]:
    count = int(rng.integers(0, 25))
    if layout == "overlapping":  # arbitrary, possibly overlapping or touching segments
        starts = rng.integers(0, n - 1, count)
        return [(int(s), int(min(n, s + rng.integers(1, 3 * CAP)))) for s in starts]
    if layout == "grid":  # touching segments on a 0.25 s grid, so chunks often fill capacity exactly
        segments, position = [], int(rng.integers(0, 4)) * PAD
        for _ in range(count):
            end = position + int(rng.integers(1, 12)) * PAD
            if end > n:
                break
            segments.append((position, end))
            # The gap is often 0: touching segments, as Silero's padding produces them.
            position = end + int(rng.integers(0, 4)) * PAD
        return segments
    cuts = np.unique(rng.integers(1, n, 2 * count))  # distinct sorted cut points: disjoint segments
    return [(int(a), int(b)) for a, b in zip(cuts[0::2], cuts[1::2], strict=False)]


@pytest.mark.parametrize("layout", ["disjoint", "overlapping", "grid"])
def test_vad_chunk_properties_on_random_speech(layout):
    rng = np.random.default_rng(len(layout))
    for trial in range(400):
        n = int(rng.integers(2, 60 * SR))
        capacity = int(rng.choice([SR // 2, CAP, 5 * SR, 30 * SR]))
        speech = random_speech(rng, n, layout)
        chunks = vad_chunks(speech, n, capacity)
        note = f"trial {trial}: n={n} capacity={capacity} speech={speech} chunks={chunks}"
        covered = np.zeros(n, dtype=bool)
        for start, end in chunks:
            assert 0 <= start < end <= n, note
            assert end - start <= capacity, note
            covered[start:end] = True
        for before, after in zip(chunks, chunks[1:], strict=False):
            assert before[1] <= after[0], note  # sorted, never overlapping
        padded = np.zeros(n, dtype=bool)
        for start, end in speech:
            padded[max(0, start - PAD) : min(n, end + PAD)] = True
        assert not np.any(padded & ~covered), note  # all (padded) speech is decoded
        for start, end in chunks:
            assert padded[start:end].any(), note  # no chunk without speech
        if layout == "disjoint":
            # Audio outside the padded speech is only included to bridge gaps of at most merge_gap.
            extra = covered & ~padded
            runs = np.flatnonzero(np.diff(np.concatenate([[0], extra.astype(np.int8), [0]])))
            assert all(b - a <= GAP for a, b in zip(runs[0::2], runs[1::2], strict=False)), note
