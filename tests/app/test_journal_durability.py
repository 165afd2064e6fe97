"""The session journal keeps its promise (a power cut loses at most the last second, a killed app nothing) and
quitting the window drains the sentence in progress into it, like Stop."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from app.live.controller import LiveController
from app.live.journal import FSYNC_INTERVAL_S, SessionJournal, read_session, sessions_dir
from app.live.sources import ArraySource
from app.main_window import MainWindow
from app.model_choices import AppState
from app.settings import SettingsStore
from inference.audio.io import load_audio_file
from inference.client import WorkerClient
from inference.contract import Delta, SpeechEnd
from inference.paths import AppPaths
from tests.conftest import REPO_ROOT


class SyncCounter:
    def __init__(self) -> None:
        self.calls: list[float] = []
        self.lock = threading.Lock()

    def __call__(self, fd: int) -> None:
        os.fsync(fd)
        with self.lock:
            self.calls.append(time.monotonic())

    def count(self) -> int:
        with self.lock:
            return len(self.calls)


def test_a_write_before_a_pause_is_synced_within_a_second_without_a_later_write(tmp_path: Path) -> None:
    sync = SyncCounter()
    journal = SessionJournal(tmp_path, "Demo", "microphone", sync=sync)
    after_header = sync.count()
    written = time.monotonic()
    journal.record([Delta("hello", 0, 0.0, 0.5)])  # then silence: nothing else is written
    deadline = written + FSYNC_INTERVAL_S + 1.0
    while sync.count() == after_header and time.monotonic() < deadline:
        time.sleep(0.01)
    assert sync.count() == after_header + 1, "the pending write was never synced"
    assert sync.calls[-1] - written <= FSYNC_INTERVAL_S
    assert not journal.pending_sync
    time.sleep(FSYNC_INTERVAL_S * 1.5)
    assert sync.count() == after_header + 1  # nothing pending: no needless syncs
    journal.close()


def test_a_closed_segment_is_synced_at_once(tmp_path: Path) -> None:
    sync = SyncCounter()
    journal = SessionJournal(tmp_path, "Demo", "microphone", sync=sync)
    before = sync.count()
    journal.record([Delta("hello", 0, 0.0, 0.5), SpeechEnd(0, 0.0, 0.6, "hello")])
    assert sync.count() == before + 1 and not journal.pending_sync
    journal.close()


def test_an_app_killed_right_after_a_segment_closes_keeps_the_segment(tmp_path: Path) -> None:
    child = textwrap.dedent(f"""
        import os, signal, sys
        sys.path.insert(0, {str(REPO_ROOT)!r})
        from pathlib import Path
        from app.live.journal import SessionJournal
        from inference.contract import Delta, SpeechEnd
        journal = SessionJournal(Path({str(tmp_path)!r}), "Demo", "microphone")
        journal.record([Delta("the last words", 0, 0.0, 1.0), SpeechEnd(0, 0.0, 1.1, "the last words")])
        os.kill(os.getpid(), signal.SIGKILL)
    """)
    result = subprocess.run([sys.executable, "-c", child], capture_output=True, timeout=60)
    assert result.returncode == -signal.SIGKILL
    saved, model = read_session(next(tmp_path.glob("*.jsonl")))
    assert not saved.closed and model.committed_text == "the last words"


@pytest.fixture
def talk() -> np.ndarray:
    samples = REPO_ROOT / "resources" / "samples"
    gap = np.zeros(16000, np.float32)
    one, two = (load_audio_file(samples / f"demo_sample_{i}.wav") for i in (1, 2))
    return np.concatenate([gap, one, gap, two, gap])


def test_quitting_mid_sentence_commits_and_journals_it(qtbot, talk: np.ndarray) -> None:  # type: ignore[no-untyped-def]
    paths = AppPaths.from_environment().ensure()
    controller = LiveController(WorkerClient, paths.data)
    source = ArraySource(talk, "test recording", speed=1.0)  # live: the second sentence is still being said
    window = MainWindow(
        AppState.load(paths), SettingsStore(paths), controller, source_factory=lambda _device: source
    )
    qtbot.addWidget(window)
    window.show()
    window.panel.device_combo.addItem("test recording", "test")
    window.panel.device_combo.setCurrentIndex(window.panel.device_combo.count() - 1)
    window.captions.start()
    qtbot.waitUntil(lambda: "emma" in controller.session.committed_text, timeout=60000)
    second_starts = (
        16000 + load_audio_file(REPO_ROOT / "resources" / "samples" / "demo_sample_1.wav").size + 16000
    )
    qtbot.waitUntil(lambda: source.played_samples > second_starts + 20000, timeout=30000)  # 1.2 s into it
    started = time.monotonic()
    window.close()  # Quit
    assert (
        time.monotonic() - started < 3.0 + 3.0
    )  # bounded (3 s drain): a drain never holds the window for long
    saved, model = read_session(next(sessions_dir(paths.data).glob("*.jsonl")))
    assert saved.closed
    words = model.committed_text.split()
    assert words[:8] == "emma quickly closed the early bottle and sang".split()
    assert len(words) >= 9 and words[8] == "there"  # the sentence in progress was committed, not dropped
