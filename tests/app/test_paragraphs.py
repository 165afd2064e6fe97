"""Paragraphs follow the speech, not the VAD's pre-roll (issue 42 item 2): a pause is measured from the end of one
segment's speech to the start of the next one's, every pause of a second or more starts a paragraph, and
provisional text after a pause opens its paragraph at once instead of jumping there when it is committed."""

from __future__ import annotations

import numpy as np

from app.live.controller import LiveController
from app.live.session import SessionChange, SessionModel
from app.live.sources import ArraySource
from app.main_window import MainWindow
from app.model_choices import AppState
from app.settings import SettingsStore
from inference.audio.io import load_audio_file
from inference.client import WorkerClient
from inference.contract import SAMPLE_RATE, Delta, Snapshot, SpeechEnd, StreamEvent
from inference.paths import AppPaths
from tests.conftest import REPO_ROOT

SAMPLES = REPO_ROOT / "resources" / "samples"
FIRST = "emma quickly closed the early bottle and sang"
SECOND = "there are twenty hearts in the garden"


def speech_gaps(audio: np.ndarray) -> list[float]:
    """Pauses (seconds) between stretches of sound in clean synthetic speech, by 10 ms energy."""
    frames = audio[: audio.size // 160 * 160].reshape(-1, 160)
    voiced = np.sqrt(np.mean(frames**2, axis=1)) > 0.01
    gaps, run = [], 0
    for index, on in enumerate(voiced):
        if on:
            if run * 0.01 >= 0.5 and index > run:  # a pause, not the gap between two words
                gaps.append(run * 0.01)
            run = 0
        else:
            run += 1
    return gaps


def test_every_pause_of_a_second_in_a_recording_starts_a_paragraph(qtbot) -> None:  # type: ignore[no-untyped-def]
    one, two = (load_audio_file(SAMPLES / f"demo_sample_{i}.wav") for i in (1, 2))
    short = np.zeros(int(0.2 * SAMPLE_RATE), np.float32)
    edge = np.zeros(SAMPLE_RATE, np.float32)
    audio = np.concatenate([edge, one, short, two, one, short, two, edge])
    gaps = speech_gaps(audio)
    # Three pauses, each over the threshold (1.0 s) but under it plus the VAD's 0.5 s pre-roll: read from the
    # segments' start times (pre-roll included), they were too short to start a paragraph.
    assert len(gaps) == 3 and all(1.2 <= gap <= 1.6 for gap in gaps), gaps
    paths = AppPaths.from_environment().ensure()
    window = MainWindow(
        AppState.load(paths),
        SettingsStore(paths),
        LiveController(WorkerClient, paths.data),
        source_factory=lambda _device: ArraySource(audio, "test recording", speed=4.0),
    )
    qtbot.addWidget(window)
    window.show()
    window.panel.device_combo.addItem("test recording", "test")
    window.panel.device_combo.setCurrentIndex(window.panel.device_combo.count() - 1)
    events: list[StreamEvent] = []
    window.controller.events_arrived.connect(events.extend)
    jumps: list[str] = []

    def provisional_in_place(_change: SessionChange) -> None:  # after the view redrew (subscribed after it)
        session = window.controller.session
        last_line = window.panel.caption_text().split("\n")[-1]
        after_closed = bool(session.segments) and session.segments[-1].closed
        if session.provisional_text and after_closed and last_line.strip() != session.provisional_text:
            jumps.append(window.panel.caption_text())

    try:
        with qtbot.waitSignal(window.controller.session_finished, timeout=120000):
            window.captions.start()
            qtbot.waitUntil(lambda: window.controller.state == "running", timeout=60000)
            window.controller.session.subscribe(provisional_in_place)
        assert window.panel.caption_text() == "\n".join([FIRST, SECOND, FIRST, SECOND])  # one per sentence
        ends = [e for e in events if isinstance(e, SpeechEnd) and e.text]
        assert len(ends) == 4
        for (
            end
        ) in ends:  # the speech starts after the pre-roll (0.5 s in whole 32 ms VAD frames) of its audio
            assert end.speech_start_s is not None and 0.2 <= end.speech_start_s - end.start_s <= 0.512 + 1e-6
        assert [s.start_s for s in window.controller.session.segments] == [e.speech_start_s for e in ends]
        assert any(isinstance(e, Snapshot) for e in events) and not jumps, jumps
    finally:
        window.close()


def test_provisional_text_after_a_pause_opens_the_paragraph_at_once(qtbot) -> None:  # type: ignore[no-untyped-def]
    from PySide6.QtWidgets import QWidget

    from app.views.caption_view import CaptionView

    parent = QWidget()
    qtbot.addWidget(parent)
    view = CaptionView(parent, 12, "system", timestamps=False)
    session = SessionModel()
    session.subscribe(view.on_change)
    view.show_session(session)
    # Segment audio starts 0.5 s before its speech (the pre-roll): 2.1 - 1.0 is a pause of 1.1 s.
    session.apply(
        [Delta("first", 0, 0.0, 1.0, speech_start_s=0.5), SpeechEnd(0, 0.0, 1.0, "first", None, 0.5)]
    )
    session.apply([Snapshot("sec", 1, 1.6, 2.3, speech_start_s=2.1)])
    assert view.plain_text() == "first\nsec"  # on its new line before it is committed
    session.apply([Snapshot("second one", 1, 1.6, 2.6, speech_start_s=2.1)])
    assert view.plain_text() == "first\nsecond one"
    session.apply([Delta(" second one", 1, 1.6, 2.6, speech_start_s=2.1)])
    assert view.plain_text() == "first\nsecond one"  # committed where it already was: no jump
    session.apply(
        [SpeechEnd(1, 1.6, 2.6, "second one", None, 2.1), Snapshot("and", 2, 2.4, 3.0, speech_start_s=2.9)]
    )
    assert view.plain_text() == "first\nsecond one and"  # 0.3 s later: the same paragraph
    view.set_timestamps(True)
    assert view.plain_text() == "[00:00] first\n[00:02] second one\n[00:02] and"
