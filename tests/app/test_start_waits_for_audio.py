"""The window says it is captioning only once the input's audio flows: a sound server's new record stream gets
its first audio up to ~2 s after opening, and words said before that would be lost while "listening" shows.
The controller's background start waits on the source's ``wait_until_delivering``; a meeting waits on both."""

from __future__ import annotations

import threading

import numpy as np

from app.live.controller import LiveController
from app.live.sources import ArraySource
from app.model_choices import ModelChoice
from inference.audio.meeting import MeetingInput
from inference.client import WorkerClient
from inference.paths import AppPaths
from tests.conftest import REPO_ROOT


class _LateSource(ArraySource):
    """An input whose first audio comes when the test says so (a sound server's late start)."""

    def __init__(self, name: str) -> None:
        super().__init__(np.zeros(16000, np.float32), name, speed=8.0)
        self.waiting = threading.Event()  # someone waits for the first audio
        self.delivering = threading.Event()
        self.waited_on: threading.Thread | None = None

    def wait_until_delivering(self) -> bool:
        self.waited_on = threading.current_thread()
        self.waiting.set()
        return self.delivering.wait(120)


def test_running_is_announced_only_after_the_input_delivers(qtbot) -> None:  # type: ignore[no-untyped-def]
    source = _LateSource("Late microphone")
    controller = LiveController(WorkerClient, AppPaths.from_environment().ensure().data)
    announced: list[bool] = []  # whether the input delivered when "running" was announced

    def on_state(state: str, _message: str) -> None:
        if state == "running":
            announced.append(source.delivering.is_set())

    controller.state_changed.connect(on_state)
    try:
        controller.start(ModelChoice("Demo", REPO_ROOT / "resources" / "demo_model", "parakeet_tdt"), source)
        qtbot.waitUntil(source.waiting.is_set, timeout=120000)
        assert source.waited_on is not threading.main_thread()  # the background start waits, not the GUI
        assert controller.state == "loading" and not announced
        source.delivering.set()
        qtbot.waitUntil(lambda: bool(announced), timeout=120000)
        assert announced == [True]
    finally:
        controller.shutdown()


def test_a_meeting_waits_for_both_captures() -> None:
    microphone, system = _LateSource("Microphone"), _LateSource("Speakers")
    meeting = MeetingInput(microphone, system)
    result: list[bool] = []
    waiter = threading.Thread(target=lambda: result.append(meeting.wait_until_delivering()))
    waiter.start()
    assert microphone.waiting.wait(60)
    microphone.delivering.set()
    assert system.waiting.wait(60)  # still waiting: the system audio has not delivered yet
    assert not result
    system.delivering.set()
    waiter.join(60)
    assert result == [True]
