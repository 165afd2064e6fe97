"""The caption window as the app builds it, for tests that play a source through it."""

from __future__ import annotations

from collections.abc import Callable

from app.live.controller import LiveController
from app.live.sources import AudioSource
from app.main_window import MainWindow
from app.model_choices import AppState
from app.settings import SettingsStore
from inference.client import WorkerClient
from inference.paths import AppPaths


def caption_window(qtbot, source_factory: Callable[[object], AudioSource]) -> MainWindow:  # type: ignore[no-untyped-def]
    """The main window on the real worker client, shown, its captions played from ``source_factory``."""
    paths = AppPaths.from_environment().ensure()
    controller = LiveController(WorkerClient, paths.data)
    win = MainWindow(AppState.load(paths), SettingsStore(paths), controller, source_factory=source_factory)
    qtbot.addWidget(win)
    win.show()
    return win
