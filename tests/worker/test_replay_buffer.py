"""The client's replay buffer: what a restarted worker is given, with positions in whole-stream samples."""

from __future__ import annotations

import numpy as np

from inference.contract import ResumePoint
from inference.replay import POISON_DEATHS, ReplayBuffer


def ramp(start: int, count: int) -> np.ndarray:
    """Samples whose values are their own positions, so a replay shows exactly which audio it holds."""
    return np.arange(start, start + count, dtype=np.float32)


def test_a_resumable_stream_replays_from_its_point_with_context_and_state() -> None:
    buffer = ReplayBuffer(1000)
    for start in range(0, 400, 100):
        buffer.sent(ramp(start, 100))
    buffer.answered(100, ResumePoint(40).to_json())
    buffer.answered(100, ResumePoint(150, 30, {"committed": "ab"}, True).to_json())  # 2 pushes unanswered
    assert buffer.held_samples == 400 - 150
    replay = buffer.worker_died()
    assert replay.start == 150 and replay.lost is None and replay.continues_segment
    assert np.array_equal(replay.context, ramp(150, 30)) and np.array_equal(replay.audio, ramp(180, 220))
    assert replay.resume == {"committed": "ab"}  # the state the new stream resumes with


def test_positions_after_a_restart_count_from_the_new_stream_s_start() -> None:
    buffer = ReplayBuffer(1000)
    buffer.sent(ramp(0, 300))
    buffer.answered(300, ResumePoint(200).to_json())
    first = buffer.worker_died()
    assert first.start == 200 and first.resume is None  # no state: a plain new stream, audio from 200
    buffer.sent(first.audio)  # the replay, pushed again
    buffer.sent(ramp(300, 100))
    buffer.answered(100, ResumePoint(50).to_json())  # the new stream's sample 50 = 250 overall
    second = buffer.worker_died()
    assert second.start == 250 and np.array_equal(second.audio, ramp(250, 150))


def test_a_stream_that_reports_no_point_re_sends_only_unanswered_audio() -> None:
    buffer = ReplayBuffer(1000)
    for start in range(0, 300, 100):
        buffer.sent(ramp(start, 100))
    buffer.answered(100, None)
    assert buffer.held_samples == 200
    replay = buffer.worker_died()
    assert replay.start == 100 and np.array_equal(replay.audio, ramp(100, 200))


def test_audio_that_keeps_killing_workers_is_given_up_as_a_gap() -> None:
    buffer = ReplayBuffer(1000)
    buffer.sent(ramp(0, 100))
    buffer.answered(100, ResumePoint(60).to_json())
    buffer.sent(ramp(100, 100))
    for _ in range(POISON_DEATHS):  # killed twice in a row while replaying: still replayed
        replay = buffer.worker_died()
        assert replay.lost is None and replay.start == 60
        buffer.sent(replay.audio)
    given_up = buffer.worker_died()
    assert given_up.lost == (60, 200) and given_up.start == 200 and given_up.audio.size == 0


def test_past_the_bound_the_oldest_audio_is_counted_as_lost_not_dropped_silently() -> None:
    buffer = ReplayBuffer(250)
    buffer.answered(0, ResumePoint(0).to_json())
    for start in range(0, 400, 100):
        buffer.sent(ramp(start, 100))
    assert buffer.held_samples == 250
    replay = buffer.worker_died()
    assert replay.lost == (0, 150) and replay.start == 150 and np.array_equal(replay.audio, ramp(150, 250))


def test_an_answer_resets_the_count_of_deaths() -> None:
    buffer = ReplayBuffer(1000)
    buffer.sent(ramp(0, 100))
    for _ in range(5):
        replay = buffer.worker_died()
        assert replay.lost is None
        buffer.sent(replay.audio)
        buffer.answered(replay.audio.size, ResumePoint(0).to_json())


def test_deaths_that_were_not_the_audio_s_doing_never_give_it_up() -> None:
    buffer = ReplayBuffer(1000)
    buffer.sent(ramp(0, 100))
    buffer.answered(100, ResumePoint(60).to_json())
    buffer.sent(ramp(100, 100))
    for _ in range(POISON_DEATHS + 3):  # killed from outside, or during restarts: always replayed
        replay = buffer.worker_died(on_this_audio=False)
        assert replay.lost is None and replay.start == 60
        buffer.sent(replay.audio)
    for _ in range(POISON_DEATHS):  # crashes while decoding it are what count
        assert buffer.worker_died(on_this_audio=True).lost is None
        buffer.sent(replay.audio)
    assert buffer.worker_died(on_this_audio=True).lost == (60, 200)
