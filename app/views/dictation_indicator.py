"""A small dictation indicator near the bottom-right corner that never takes focus: listening,
transcribing, done (with the latency from key release to text), or what went wrong."""

from __future__ import annotations

from PySide6.QtCore import Qt, QTimer
from PySide6.QtGui import QGuiApplication
from PySide6.QtWidgets import QLabel, QVBoxLayout, QWidget

STYLES = {
    "listening": ("● Listening", "#c62828"),
    "transcribing": ("… Transcribing", "#1565c0"),
    "done": ("✓ Done", "#2e7d32"),
    "copied": ("📋 Not pasted", "#6a1b9a"),
    "failed": ("⚠ Dictation", "#ef6c00"),
    "idle": ("Dictation ready", "#424242"),
}


class DictationIndicator(QWidget):
    def __init__(self) -> None:
        super().__init__(None)
        self.setObjectName("dictationIndicator")
        self.setWindowFlags(
            Qt.WindowType.FramelessWindowHint
            | Qt.WindowType.WindowStaysOnTopHint
            | Qt.WindowType.Tool
            | Qt.WindowType.WindowDoesNotAcceptFocus
        )
        self.setAttribute(Qt.WidgetAttribute.WA_ShowWithoutActivating, True)
        self.label = QLabel(self)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.label)
        self.hide_timer = QTimer(self)
        self.hide_timer.setSingleShot(True)
        self.hide_timer.setInterval(2500)
        self.hide_timer.timeout.connect(self.hide)

    def show_state(self, state: str, detail: str) -> None:
        title, colour = STYLES.get(state, STYLES["idle"])
        text = f"{title} — {detail}" if detail and state != "listening" else title
        self.label.setText(text)
        self.label.setStyleSheet(
            f"color: white; background: {colour}; padding: 6px 10px; border-radius: 6px;"
        )
        self.adjustSize()
        screen = QGuiApplication.primaryScreen()
        if screen is not None:
            area = screen.availableGeometry()
            self.move(area.right() - self.width() - 24, area.bottom() - self.height() - 24)
        self.show()
        if state in ("done", "failed", "idle"):
            self.hide_timer.start()
        else:
            self.hide_timer.stop()
