"""The one speech tracker behind the offline VAD segments, the live segmenters and R2T2's endpointing."""

from __future__ import annotations

import numpy as np

from inference.audio.speech_tracker import (
    FRAME_SAMPLES,
    FrameSplitter,
    SpeechEnded,
    SpeechStarted,
    SpeechTracker,
    TrackerRules,
)

SILERO = TrackerRules(0.5, 0.35, 3 * FRAME_SAMPLES, 0.5, end_below=0.35)
HYSTERESIS = TrackerRules(0.5, 0.35, 3 * FRAME_SAMPLES, 0.35, end_below=0.35)


def run(rules: TrackerRules, probabilities: list[float]) -> list[object]:
    tracker = SpeechTracker(rules)
    return [e for i, p in enumerate(probabilities) if (e := tracker.step(p, i * FRAME_SAMPLES))]


def test_speech_ends_at_the_first_silent_frame_of_a_dip_long_enough() -> None:
    events = run(SILERO, [0.1, 0.9, 0.9, 0.1, 0.1, 0.1, 0.1, 0.1])
    assert events == [SpeechStarted(512), SpeechEnded(512, 3 * 512)]  # ended on the frame 3 frames on


def test_silero_rules_keep_a_dip_open_across_frames_between_the_thresholds() -> None:
    # Frames of 0.4 neither end the dip (they are under the threshold) nor are they silent enough to end speech.
    probabilities = [0.9, 0.1, 0.4, 0.4, 0.4, 0.1]
    assert run(SILERO, probabilities) == [SpeechStarted(0), SpeechEnded(0, 512)]
    # A plain hysteresis counts them as speech: the dip starts again at the last frame and stays short.
    assert run(HYSTERESIS, probabilities) == [SpeechStarted(0)]


def test_frames_stay_aligned_to_the_stream_however_samples_arrive() -> None:
    splitter = FrameSplitter()
    audio = np.arange(5 * FRAME_SAMPLES + 100, dtype=np.float32)
    frames = [f for piece in np.array_split(audio, 7) for f in splitter.frames(piece)]
    assert [int(f[0]) for f in frames] == [i * FRAME_SAMPLES for i in range(5)]
    assert splitter.take_pending().size == 100 and splitter.pending.size == 0
