"""``ArrivingAudio`` (the samples a streamed job still needs) reads exactly the stream's samples after any mix of
appends and forgets, and holds about what it was not told to forget."""

from __future__ import annotations

import numpy as np
import pytest

from inference.offline_jobs import ArrivingAudio, GrowingAudio


def test_reads_are_the_streams_samples_after_random_appends_and_forgets() -> None:
    rng = np.random.default_rng(5)
    stream = rng.standard_normal(3_000_000).astype(np.float32)
    held = ArrivingAudio()
    fed = 0
    while fed < stream.size:
        size = int(rng.choice([0, 1, 100, 4096, 70_000, 300_000]))
        held.append(stream[fed : fed + size])
        fed = min(stream.size, fed + size)
        assert held.end == fed
        if rng.random() < 0.5:
            held.forget_before(int(rng.integers(held.start, held.end + 1)))
        if held.end > held.start:
            a = int(rng.integers(held.start, held.end))
            b = int(rng.integers(a, held.end + 1))
            np.testing.assert_array_equal(held.read(a, b), stream[a:b])
        assert held._data.size <= max(4 * (held.end - held.start) + 2 * 300_000, 1 << 22)
    with pytest.raises(AssertionError):
        held.read(held.start - 1, held.end)


def test_growing_audio_hands_over_what_it_gathered() -> None:
    gathered = GrowingAudio()
    parts = [np.full(n, i, np.float32) for i, n in enumerate([3, 0, 1 << 20, 7])]
    for part in parts:
        gathered.append(part)
    np.testing.assert_array_equal(gathered.take(), np.concatenate(parts))
    assert gathered.size == 0 and gathered.take().size == 0
