"""The tray icon (thin view): a click shows or hides the window; the tooltip says what captions are doing."""

from __future__ import annotations

from PySide6.QtCore import Slot
from PySide6.QtWidgets import QSystemTrayIcon, QWidget


class WindowTray(QSystemTrayIcon):
    def __init__(self, window: QWidget) -> None:
        super().__init__(window.windowIcon(), window)
        self.setToolTip("Captioneer")
        self.activated.connect(lambda _reason: window.showNormal() if window.isHidden() else window.hide())

    @Slot(str, str)
    def show_captions_state(self, state: str, message: str) -> None:
        self.setToolTip(f"Captioneer — {message or state}")


def make_tray(window: QWidget) -> WindowTray | None:
    """The window's tray icon, shown; None where the desktop has no tray."""
    if not QSystemTrayIcon.isSystemTrayAvailable():
        return None
    tray = WindowTray(window)
    tray.show()
    return tray
