"""The main window (thin view). Shows which model is active; the caption view arrives with the app issue."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QLabel, QMainWindow, QVBoxLayout, QWidget

from app.state import AppState


class MainWindow(QMainWindow):
    def __init__(self, state: AppState) -> None:
        super().__init__()
        self.setWindowTitle("Captioneer")
        self.resize(720, 360)
        central = QWidget(self)
        layout = QVBoxLayout(central)
        self.title_label = QLabel("Captioneer — local live captions and dictation", central)
        self.title_label.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.model_label = QLabel(state.model_summary, central)
        self.model_label.setObjectName("modelLabel")
        self.model_label.setWordWrap(True)
        self.model_label.setAlignment(Qt.AlignmentFlag.AlignCenter)
        layout.addWidget(self.title_label)
        layout.addWidget(self.model_label)
        self.setCentralWidget(central)
