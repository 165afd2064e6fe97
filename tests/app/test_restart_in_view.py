"""A worker killed mid-segment, seen from the window: the dead stream's provisional text goes at once, the resumed
stream's snapshots replace it, and at the end the window shows exactly what was said (issue 42 item 1).

The real worker process is killed with SIGKILL while the demo model's provisional text of an open segment is on
screen (the recording is held there, so the kill cannot miss the segment); the real supervisor restarts it.
"""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Callable

import numpy as np

from app.live.controller import LiveController
from app.live.session import SessionChange
from app.live.sources import BLOCK_S, Sink
from app.main_window import MainWindow
from app.model_choices import AppState
from app.settings import SettingsStore
from inference.audio.io import load_audio_file
from inference.client import WorkerClient, WorkerPolicy
from inference.contract import SAMPLE_RATE
from inference.paths import AppPaths
from tests.conftest import REPO_ROOT

SAMPLES = REPO_ROOT / "resources" / "samples"
FIRST = "emma quickly closed the early bottle and sang"
SECOND = "there are twenty hearts in the garden"
RESTARTS_AT_ONCE = WorkerPolicy(ping_interval_s=0.2, ping_timeout_s=30.0, backoff_s=(0.0,))


class HeldRecording:
    """Plays samples (as fast as the model takes them) up to ``hold_at``, waits there until ``release()``, then
    plays the rest: the test decides when the speech in the middle of a sentence goes on."""

    name = "held recording"
    paced_by_model = True

    def __init__(self, samples: np.ndarray, hold_at: int) -> None:
        self.samples = samples
        self.hold_at = hold_at
        self.held = threading.Event()
        self._go = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def release(self) -> None:
        self._go.set()

    def start(self, sink: Sink, on_end: Callable[[str | None], None]) -> None:
        step = int(BLOCK_S * SAMPLE_RATE)

        def play() -> None:
            for start in range(0, self.samples.size, step):
                if start >= self.hold_at and not self._go.is_set():
                    self.held.set()
                    while not self._go.wait(0.05):
                        if self._stop.is_set():
                            return
                if self._stop.is_set():
                    return
                sink(self.samples[start : start + step])
            on_end(None)

        self._thread = threading.Thread(target=play, name="held-recording", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._go.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=5)


def test_a_worker_killed_mid_segment_leaves_no_ghost_provisional_text(qtbot) -> None:  # type: ignore[no-untyped-def]
    gap = np.zeros(SAMPLE_RATE, np.float32)
    one, two = (load_audio_file(SAMPLES / f"demo_sample_{i}.wav") for i in (1, 2))
    speech = np.concatenate([gap, one, gap, two, gap])
    source = HeldRecording(speech, hold_at=gap.size + int(2.8 * SAMPLE_RATE))  # inside the first sentence
    paths = AppPaths.from_environment().ensure()
    controller = LiveController(lambda: WorkerClient(RESTARTS_AT_ONCE), paths.data)
    window = MainWindow(
        AppState.load(paths), SettingsStore(paths), controller, source_factory=lambda _d: source
    )
    qtbot.addWidget(window)
    window.show()
    window.view_menu.set_overlay_visible(True)
    window.panel.device_combo.addItem("held recording", "held")
    window.panel.device_combo.setCurrentIndex(window.panel.device_combo.count() - 1)
    try:
        window.captions.start()
        qtbot.waitUntil(lambda: controller.state == "running", timeout=60000)
        session = controller.session
        qtbot.waitUntil(lambda: source.held.is_set() and bool(session.provisional_text), timeout=60000)
        ghost = session.provisional_text
        dead_ids = set(session.provisional)
        assert ghost in window.panel.caption_text() and not session.committed_text  # on screen, provisional

        seen_at_restart: list[tuple[str, str, str]] = []

        def on_change(_change: SessionChange) -> None:  # runs after the views redrew (subscribed after them)
            if session.status.worker == "restarting" and not seen_at_restart:
                seen_at_restart.append(
                    (window.panel.caption_text(), window.overlay.displayed_text(), session.provisional_text)
                )

        session.subscribe(on_change)
        client = controller.client
        assert client is not None and client.pid is not None
        os.kill(client.pid, signal.SIGKILL)
        qtbot.waitUntil(lambda: bool(seen_at_restart), timeout=60000)
        shown, overlay, provisional = seen_at_restart[0]
        assert (shown, provisional) == (
            "",
            "",
        )  # nothing was committed yet, and the guess died with the worker
        assert ghost.split()[-1] not in overlay

        # The new worker replays the held sentence: its own snapshot (a new segment id) is all that is shown.
        qtbot.waitUntil(
            lambda: (
                any(e.kind == "worker_resumed" for e in session.errors) and bool(session.provisional_text)
            ),
            timeout=60000,
        )
        assert not dead_ids & set(session.provisional)
        assert window.panel.caption_text() == session.provisional_text

        with qtbot.waitSignal(controller.session_finished, timeout=120000):
            source.release()
        assert session.provisional == {}
        assert window.panel.caption_text() == f"{FIRST}\n{SECOND}"  # what was said, once, nothing else
        assert window.overlay.displayed_text().endswith("garden")
    finally:
        source.stop()
        window.close()
