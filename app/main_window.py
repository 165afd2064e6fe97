"""The main window (thin view): which model is active, and the Models dialog.

The caption view arrives with the app issue; until then the window shows the model state and lets
the user manage models.
"""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtGui import QAction
from PySide6.QtWidgets import QLabel, QMainWindow, QVBoxLayout, QWidget

from app.state import AppState


class MainWindow(QMainWindow):
    def __init__(self, state: AppState) -> None:
        super().__init__()
        self.state = state
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

        self.models_action = QAction("&Models…", self)
        self.models_action.setObjectName("modelsAction")
        self.models_action.triggered.connect(self.open_models)
        menu = self.menuBar().addMenu("&File")
        menu.addAction(self.models_action)
        quit_action = QAction("&Quit", self)
        quit_action.triggered.connect(self.close)
        menu.addAction(quit_action)
        self.models_dialog = None

    def open_models(self) -> None:
        from app.models_dialog import open_models_dialog

        self.models_dialog = open_models_dialog(self, self.state.paths)
        self.models_dialog.finished.connect(self.refresh_model_state)

    def offer_models_on_first_run(self) -> None:
        from app.models_dialog import offer_models_on_first_run

        dialog = offer_models_on_first_run(self, self.state.paths)
        if dialog is not None:
            self.models_dialog = dialog
            dialog.finished.connect(self.refresh_model_state)

    def refresh_model_state(self) -> None:
        self.state = AppState.load(self.state.paths)
        self.model_label.setText(self.state.model_summary)
