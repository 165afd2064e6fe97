"""The command line's meeting feed: each side's audio reaches its own stream, whole, and a side whose input
goes away finishes the meeting with what was captured (fake captures; the real ones are tested through a
private PulseAudio in test_sound_meeting_cli.py)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from inference.audio.devices.meeting_feed import feed_meeting_until_interrupted
from inference.audio.meeting import MeetingInput


class _Capture:
    """Delivers ``blocks`` as soon as it starts, then ends with ``ending`` (None: keeps going)."""

    def __init__(self, name: str, blocks: list[np.ndarray], ending: str | None = None) -> None:
        self.name = name
        self.blocks = blocks
        self.ending = ending
        self.stopped = False

    def start(self, sink: Callable[[np.ndarray], None], on_end: Callable[[str | None], None]) -> None:
        for block in self.blocks:
            sink(block)
        if self.ending is not None:
            on_end(self.ending)

    def stop(self) -> None:
        self.stopped = True


def test_each_side_reaches_its_own_stream_whole_and_a_lost_input_finishes_the_meeting() -> None:
    mine = [np.full(1600, 0.5, np.float32) for _ in range(3)]
    theirs = [np.full(1600, 0.25, np.float32) for _ in range(3)]
    microphone = _Capture("Headset mic", mine)
    system = _Capture("Speakers", theirs, ending="the input 'Speakers' was unplugged or removed")
    pushed: dict[str, list[np.ndarray]] = {"You": [], "Others": []}
    notes: list[str] = []

    feed_meeting_until_interrupted(
        lambda speaker, chunk: pushed[speaker].append(chunk),
        MeetingInput(microphone, system),
        3200,
        notes.append,
    )

    assert np.array_equal(np.concatenate(pushed["You"]), np.concatenate(mine))
    assert np.array_equal(np.concatenate(pushed["Others"]), np.concatenate(theirs))
    assert [chunk.size for chunk in pushed["You"]] == [3200, 1600]  # whole chunks, then the rest at the end
    assert notes[0] == "listening on Headset mic (You) and Speakers (Others) (Ctrl-C to finish)"
    assert "unplugged or removed (Others); finishing the transcript" in notes[-1]
    assert microphone.stopped and system.stopped


def test_ctrl_c_inside_a_push_does_not_lose_or_repeat_audio() -> None:
    mine = [np.arange(i * 1600, (i + 1) * 1600, dtype=np.float32) for i in range(4)]
    microphone = _Capture("Mic", mine)
    system = _Capture("Speakers", [])
    pushed: list[np.ndarray] = []

    def push(_speaker: str, chunk: np.ndarray) -> None:
        pushed.append(chunk)
        if len(pushed) == 1:
            raise KeyboardInterrupt  # Ctrl-C while the first chunk was being sent (it was sent)

    try:
        feed_meeting_until_interrupted(push, MeetingInput(microphone, system), 3200, lambda _note: None)
    except KeyboardInterrupt:
        pass
    else:
        raise AssertionError("the interrupt reaches the caller, which finishes the streams")
    assert np.array_equal(np.concatenate(pushed), np.concatenate(mine))
