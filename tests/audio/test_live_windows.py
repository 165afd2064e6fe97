"""The speech gate's window plan made live gives the offline plan, window for window, each window before the
audio it ends at has passed, and after any handover to a stream restored from an earlier frame."""

from __future__ import annotations

import numpy as np
import pytest

from inference.audio.live_windows import LiveSpeechWindows
from inference.audio.spans import SpeechWindow, SpeechWindowPlan, plan_speech_windows
from inference.audio.speech_tracker import FRAME_SAMPLES
from inference.audio.vad import segments_from_probabilities

OPEN = 1 << 62


def probabilities(rng: np.random.Generator, frames: int) -> np.ndarray:
    """Runs of speech, silence and the values between Silero's thresholds, of many lengths."""
    runs: list[np.ndarray] = []
    while sum(r.size for r in runs) < frames:
        value = rng.choice([0.05, 0.3, 0.45, 0.6, 0.9], p=[0.35, 0.1, 0.1, 0.1, 0.35])
        runs.append(np.full(int(rng.integers(1, int(rng.choice([10, 40, 200])))), value))
    return np.concatenate(runs)[:frames]


def offline(probs: np.ndarray, n_samples: int, plan: SpeechWindowPlan) -> list[SpeechWindow]:
    return plan_speech_windows(
        segments_from_probabilities(probs, n_samples),
        n_samples,
        plan.max_group_samples,
        merge_gap_samples=plan.merge_gap_samples,
        padding_samples=plan.padding_samples,
    )


def live(
    probs: np.ndarray, n_samples: int, plan: SpeechWindowPlan, rng: np.random.Generator
) -> tuple[list[SpeechWindow], list[int], int]:
    """The windows, where the stream was when each came out, and how many handovers it went through."""
    planner = LiveSpeechWindows(plan)
    whole = n_samples // FRAME_SAMPLES
    states: dict[int, dict] = {}
    got: list[SpeechWindow] = []
    given_at: list[int] = []
    handovers = frame = 0
    while frame < whole:
        states[frame] = planner.state()
        windows = planner.step(float(probs[frame]))
        frame += 1
        got += windows
        given_at += [planner.position] * len(windows)
        if rng.random() < 0.01:  # a replacement restored at the first frame a window still to come needs
            restart = planner.keep_from() // FRAME_SAMPLES
            assert restart <= frame
            replacement = LiveSpeechWindows(plan)
            replacement.restore(states[restart], *planner.given())
            planner, frame, handovers = replacement, restart, handovers + 1
    tail = float(probs[whole]) if whole < probs.size else None
    got += planner.finish(n_samples, tail)
    given_at += [n_samples] * (len(got) - len(given_at))
    return got, given_at, handovers


@pytest.mark.parametrize("seed", range(4))
def test_live_windows_are_the_offline_plan(seed: int) -> None:
    rng = np.random.default_rng(seed)
    handovers = 0
    for _ in range(60):
        frames = int(rng.integers(1, 3000))
        n_samples = frames * FRAME_SAMPLES - int(rng.integers(0, FRAME_SAMPLES))
        probs = probabilities(rng, frames)
        plan = SpeechWindowPlan(
            int(rng.choice([16000, 32000, 320000])),
            int(rng.choice([0, 4000, 16000])),
            int(rng.choice([0, 4000, 16000])),
            int(rng.choice([0, 3840])),
        )
        expected = offline(probs, n_samples, plan)
        got, given_at, turns = live(probs, n_samples, plan, rng)
        handovers += turns
        assert [(w.window, w.speech, w.zone.start) for w in got] == [
            (w.window, w.speech, w.zone.start) for w in expected
        ]
        # A window given before its neighbour was known leaves its zone open at the end (see the module doc).
        assert all(g.zone.end in (e.zone.end, OPEN) for g, e in zip(got, expected, strict=True))
        assert all(w.window.end <= at for w, at in zip(got, given_at, strict=True))  # its audio had arrived
    assert handovers >= 5


def test_a_group_is_given_when_the_next_speech_counts_and_after_a_long_silence() -> None:
    plan = SpeechWindowPlan(320000, 16000, 16000, 3840)
    planner = LiveSpeechWindows(plan)
    speech, pause = [0.9] * 30, [0.05] * 60  # about 1 s of speech, 1.9 s of silence
    given = []
    for index, p in enumerate(speech + pause + speech + [0.05] * 200):
        for window in planner.step(p):
            given.append((index, window))
    (first_at, first), (second_at, second) = given
    # The first group ends 1.9 s before the next speech, too far to join: it is given once that speech has
    # lasted longer than the shortest kept segment (250 ms: at its 8th frame), not at the end of the stream.
    assert first.speech.end < second.speech.start and first_at == 90 + 7
    # The last one waits for a silence no later speech could change it across (here about 2.5 s).
    assert 150 < second_at < 250
    assert planner.finish(290 * FRAME_SAMPLES) == []


def test_silero_frame_by_frame_gives_the_offline_probabilities_exactly() -> None:
    """The live plan hears what the offline pass hears: frames aligned to the stream's first sample, however
    the samples arrive, and the last partial frame zero-padded, give bit-identical probabilities."""
    from inference.audio.speech_tracker import FrameSplitter
    from inference.audio.vad import SileroVad

    rng = np.random.default_rng(3)
    t = np.arange(5 * 16000 + 300) / 16000
    audio = (0.3 * np.sin(2 * np.pi * 180 * t) * (np.sin(2 * np.pi * 0.4 * t) > 0)).astype(np.float32)
    audio += rng.normal(0, 0.01, audio.size).astype(np.float32)
    vad = SileroVad()
    offline = vad.frame_probabilities(audio)
    splitter, live, position = FrameSplitter(), [], 0
    while position < audio.size:
        size = int(rng.integers(1, 3000))
        live += [vad.process(frame) for frame in splitter.frames(audio[position : position + size])]
        position += size
    pending = splitter.take_pending()
    tail = np.zeros(FRAME_SAMPLES, np.float32)
    tail[: pending.size] = pending
    live.append(vad.process(tail))
    assert np.array_equal(np.array(live, np.float32), offline)
