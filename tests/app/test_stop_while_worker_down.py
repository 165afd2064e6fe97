"""Stopping a live session while the model's worker is down (past its restart limit, before a revival) ends it
in good order (issue 38 item 1): the window keeps what was heard, shows the gap marker for the audio held
meanwhile and says the worker is down; the journal and an export carry the same transcript.

The real worker process is SIGKILLed once the first sentence is committed; the client's restart limit is 0 here,
so that one death trips it (a revival would come only after an hour). The recording goes on while no worker runs
and then ends, which stops the session as the Stop button does."""

from __future__ import annotations

import os
import re
import signal

import numpy as np

from app.live.controller import LiveController
from app.live.export import export_session
from app.live.journal import read_session
from app.live.pipeline import WORKER_DOWN_AT_END
from app.main_window import MainWindow
from app.model_choices import AppState
from app.settings import SettingsStore
from inference.audio.io import load_audio_file
from inference.client import WorkerClient, WorkerPolicy
from inference.contract import SAMPLE_RATE
from inference.paths import AppPaths
from tests.app.test_restart_in_view import FIRST, SAMPLES, HeldRecording

GIVES_UP_AT_ONCE = WorkerPolicy(
    ping_interval_s=0.2, ping_timeout_s=30.0, max_restarts=0, revive_after_s=(3600.0,)
)
GAP = re.compile(r"\[… ([0-9.]+)–([0-9.]+) s not transcribed …\]")


def test_stopping_while_the_worker_is_down_keeps_what_was_heard_with_a_gap_marker(qtbot, tmp_path) -> None:  # type: ignore[no-untyped-def]
    gap = np.zeros(SAMPLE_RATE, np.float32)
    one, two = (load_audio_file(SAMPLES / f"demo_sample_{i}.wav") for i in (1, 2))
    speech = np.concatenate([gap, one, gap, two, gap])
    source = HeldRecording(speech, hold_at=2 * gap.size + one.size)  # after the first sentence and its pause
    paths = AppPaths.from_environment().ensure()
    controller = LiveController(lambda: WorkerClient(GIVES_UP_AT_ONCE), paths.data)
    window = MainWindow(
        AppState.load(paths), SettingsStore(paths), controller, source_factory=lambda _d: source
    )
    qtbot.addWidget(window)
    window.show()
    window.panel.device_combo.addItem("held recording", "held")
    window.panel.device_combo.setCurrentIndex(window.panel.device_combo.count() - 1)
    try:
        window.captions.start()
        qtbot.waitUntil(lambda: controller.state == "running", timeout=60000)
        session = controller.session
        qtbot.waitUntil(lambda: source.held.is_set() and FIRST in session.committed_text, timeout=60000)
        assert controller.journal is not None
        journal = controller.journal.path
        client = controller.client
        assert client is not None and client.pid is not None
        os.kill(client.pid, signal.SIGKILL)
        qtbot.waitUntil(lambda: session.status.worker == "down", timeout=60000)  # the limit tripped

        # The second sentence is played while no worker runs; the recording ends, which stops the session.
        with qtbot.waitSignal(controller.session_finished, timeout=120000):
            source.release()
    finally:
        source.stop()
    try:
        assert controller.state == "idle" and not [e for e in session.errors if e.fatal], session.errors
        shown = window.panel.caption_text()
        assert shown.startswith(FIRST) and "there are twenty" not in shown, shown
        # Marked as not transcribed: what the killed worker left unanswered (if anything) and the audio played
        # while no worker ran, to the end of the recording.
        gaps = GAP.findall(shown)
        assert shown.endswith("…]") and float(gaps[-1][1]) == round(speech.size / SAMPLE_RATE, 1), shown
        assert WORKER_DOWN_AT_END in window.panel.status_label.text()
        assert session.errors[-1].kind == "worker_failed" and WORKER_DOWN_AT_END in session.errors[-1].message
        assert session.final is not None and session.final.text == session.committed_text.strip()

        _saved, reread = read_session(journal)  # the journal carries what the window shows
        assert reread.committed_text.strip() == session.committed_text.strip()
        text = export_session(session, tmp_path / "talk.txt").read_text()
        assert text.strip() == session.committed_text.strip(), text
        srt = export_session(session, tmp_path / "talk.srt").read_text()  # the gap is a cue of its own
        assert GAP.fullmatch(srt.strip().splitlines()[-1]), srt
    finally:
        window.close()
