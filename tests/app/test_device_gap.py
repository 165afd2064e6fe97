"""An input that goes away mid-session: the session continues on the replacement, and the span no input
delivered is marked in the transcript, after what was said before and before what was said after."""

from __future__ import annotations

import re

import numpy as np

from app.live.controller import LiveController
from app.live.sources import ArraySource
from app.model_choices import ModelChoice
from inference.audio.io import load_audio_file
from inference.client import WorkerClient
from inference.paths import AppPaths
from tests.conftest import REPO_ROOT


class _UnpluggedSource(ArraySource):
    """Delivers its audio, then reports the device gone (what a capture's watcher does on an unplug)."""

    def start(self, sink, on_end) -> None:  # type: ignore[no-untyped-def]
        super().start(sink, lambda _reason: on_end("the input 'USB mic' was unplugged or removed"))


def _sample(name: str) -> np.ndarray:
    audio = load_audio_file(REPO_ROOT / "resources" / "samples" / name)
    return np.concatenate([np.zeros(8000, np.float32), audio, np.zeros(16000, np.float32)])


def test_an_unplugged_input_leaves_a_gap_marker_between_the_texts_before_and_after(qtbot) -> None:  # type: ignore[no-untyped-def]
    before, after = _sample("demo_sample_1.wav"), _sample("demo_sample_2.wav")
    replacements: list[ArraySource] = []

    def reconnect(_lost: object) -> ArraySource:
        replacements.append(ArraySource(after, "Default microphone", speed=8.0))
        return replacements[-1]

    controller = LiveController(WorkerClient, AppPaths.from_environment().ensure().data, reconnect=reconnect)
    messages: list[str] = []
    controller.state_changed.connect(lambda _state, message: messages.append(message))
    try:
        with qtbot.waitSignal(controller.session_finished, timeout=120000):
            controller.start(
                ModelChoice("Demo", REPO_ROOT / "resources" / "demo_model", "parakeet_tdt"),
                _UnpluggedSource(before, "USB mic", speed=8.0),
            )
        assert replacements and any("now listening on Default microphone" in m for m in messages)
        text = controller.session.committed_text
        markers = re.findall(
            r"\[… [\d.]+ s: no audio for [\d.]+ s \(the input 'USB mic' was unplugged or removed\) …\]", text
        )
        assert len(markers) == 1, text
        marker = markers[0]
        assert text.index("emma quickly") < text.index(marker) < text.index("there are twenty"), text
        gap = next(s for s in controller.session.to_transcript().segments if marker in s.text)
        assert (
            gap.start_s >= before.size / 16000 - 0.05 and gap.end_s >= gap.start_s
        )  # stream time at the loss
        assert text.rstrip().endswith("garden"), text  # the final transcript's tail is still adopted
    finally:
        controller.shutdown()
