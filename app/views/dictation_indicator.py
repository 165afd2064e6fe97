"""A small dictation indicator near the bottom-right corner that never takes focus: listening, transcribing,
pasting (until the outcome is known), done (with the latency from key release to text), or what went wrong.

Its icons are Qt's own standard pixmaps, which Qt carries as images: no symbol depends on a font having the
glyph (an emoji in the text showed as a missing-glyph box with the default fonts).
"""

from __future__ import annotations

from dataclasses import dataclass

from PySide6.QtCore import Qt, QTimer
from PySide6.QtGui import QGuiApplication
from PySide6.QtWidgets import QHBoxLayout, QLabel, QStyle, QWidget

Pixmap = QStyle.StandardPixmap


@dataclass(frozen=True)
class Look:
    title: str
    colour: str
    icon: QStyle.StandardPixmap | None = None
    lasts: bool = (
        False  # an outcome: the indicator goes after a moment; otherwise it stays until the next state
    )


LOOKS = {
    "listening": Look("Listening", "#c62828"),  # the red says it; Qt's dark media icons vanish on it
    "transcribing": Look("Transcribing…", "#1565c0", Pixmap.SP_BrowserReload),
    "pasting": Look("Pasting…", "#1565c0", Pixmap.SP_BrowserReload),
    "typing": Look("Typing…", "#1565c0", Pixmap.SP_BrowserReload),
    "copying": Look("Copying…", "#1565c0", Pixmap.SP_BrowserReload),
    "done": Look("Done", "#2e7d32", Pixmap.SP_DialogApplyButton, lasts=True),
    "copied": Look("Not pasted", "#6a1b9a", Pixmap.SP_MessageBoxInformation),
    "nothing": Look("Nothing heard", "#424242", Pixmap.SP_MessageBoxInformation, lasts=True),
    "failed": Look("Dictation failed", "#ef6c00", Pixmap.SP_MessageBoxWarning, lasts=True),
    "idle": Look("Dictation ready", "#424242", None, lasts=True),
}
ICON_PX = 16


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
        self.icon = QLabel(self)
        self.label = QLabel(self)
        layout = QHBoxLayout(self)
        layout.setContentsMargins(10, 6, 10, 6)
        layout.setSpacing(8)
        layout.addWidget(self.icon)
        layout.addWidget(self.label)
        self.hide_timer = QTimer(self)
        self.hide_timer.setSingleShot(True)
        self.hide_timer.setInterval(2500)
        self.hide_timer.timeout.connect(self.hide)
        self.state = "idle"

    def show_state(self, state: str, detail: str) -> None:
        look = LOOKS.get(state, LOOKS["idle"])
        self.state = state if state in LOOKS else "idle"
        self.label.setText(f"{look.title} — {detail}" if detail and state != "listening" else look.title)
        if look.icon is None:
            self.icon.clear()
            self.icon.hide()
        else:
            self.icon.setPixmap(self.style().standardIcon(look.icon).pixmap(ICON_PX, ICON_PX))
            self.icon.show()
        self.setStyleSheet(
            f"QWidget#dictationIndicator {{ background: {look.colour}; border-radius: 6px; }}"
            "QLabel { color: white; background: transparent; }"
        )
        self.setAttribute(Qt.WidgetAttribute.WA_StyledBackground, True)
        self.adjustSize()
        screen = QGuiApplication.primaryScreen()
        if screen is not None:
            area = screen.availableGeometry()
            self.move(area.right() - self.width() - 24, area.bottom() - self.height() - 24)
        self.show()
        if look.lasts:
            self.hide_timer.start()
        else:
            self.hide_timer.stop()
