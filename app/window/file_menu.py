"""The File menu: models, recordings, export, past sessions and Quit, each handled by the part it belongs to."""

from __future__ import annotations

from PySide6.QtGui import QAction, QKeySequence
from PySide6.QtWidgets import QMainWindow

from app.window.models import ModelPicker
from app.window.recordings import Recordings
from app.window.sessions import Sessions


class FileMenu:
    def __init__(
        self, window: QMainWindow, models: ModelPicker, recordings: Recordings, sessions: Sessions
    ) -> None:
        menu = window.menuBar().addMenu("&File")
        self.models_action = QAction("&Models…", window)
        self.models_action.setObjectName("modelsAction")
        self.models_action.triggered.connect(lambda: models.open_dialog())
        menu.addAction(self.models_action)
        open_action = QAction("&Open recording…", window)
        open_action.setShortcut(QKeySequence("Ctrl+O"))
        open_action.triggered.connect(lambda: recordings.open_dialog(fast=False))
        menu.addAction(open_action)
        fast_action = QAction("Transcribe recording &fast…", window)
        fast_action.triggered.connect(lambda: recordings.open_dialog(fast=True))
        menu.addAction(fast_action)
        self.export_action = QAction("&Export transcript…", window)
        self.export_action.triggered.connect(sessions.export_dialog)
        menu.addAction(self.export_action)
        self.history_menu = menu.addMenu("Past &sessions")
        self.history_menu.aboutToShow.connect(lambda: sessions.fill_history(self.history_menu))
        quit_action = QAction("&Quit", window)
        quit_action.triggered.connect(window.close)
        menu.addAction(quit_action)
