"""The caption overlay: frameless, always on top, never takes keyboard focus, optionally click-through.

A thin view over the session model: it shows the last ``lines`` lines of committed text, then the
provisional text in another colour, and fades out ``hold_s`` seconds after the last new text.

Platform notes (shown in the settings): on X11, Windows and macOS the overlay stays on top and
click-through works. On Wayland, compositors decide stacking and placement: "always on top" and
positions are hints that GNOME ignores (KDE honours them); click-through works where the compositor
supports input regions. ``wayland_note()`` says so in the window instead of failing silently.
"""

from __future__ import annotations

import html

from PySide6.QtCore import QPoint, Qt, QTimer
from PySide6.QtGui import QFont, QGuiApplication, QMouseEvent
from PySide6.QtWidgets import QLabel, QVBoxLayout, QWidget

from app.live.session import SessionChange, SessionModel
from app.settings import Settings

MARGIN = 24


def wayland_note() -> str | None:
    platform = QGuiApplication.platformName()
    if platform.startswith("wayland"):
        return ("Wayland: the compositor decides whether the overlay stays on top and where it goes "
                "(GNOME ignores both; KDE honours them). Run with QT_QPA_PLATFORM=xcb for X11 behaviour.")  # fmt: skip
    return None


class CaptionOverlay(QWidget):
    def __init__(self, settings: Settings) -> None:
        super().__init__(None)
        self.setObjectName("captionOverlay")
        self.setAttribute(Qt.WidgetAttribute.WA_ShowWithoutActivating, True)
        self.setAttribute(Qt.WidgetAttribute.WA_TranslucentBackground, True)
        self.setFocusPolicy(Qt.FocusPolicy.NoFocus)
        self.label = QLabel(self)
        self.label.setObjectName("overlayText")
        self.label.setWordWrap(True)
        self.label.setTextFormat(Qt.TextFormat.RichText)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(16, 10, 16, 10)
        layout.addWidget(self.label)
        self.fade_timer = QTimer(self)
        self.fade_timer.setSingleShot(True)
        self.fade_timer.timeout.connect(self._fade)
        self._session: SessionModel | None = None
        self._unsubscribe: object = None
        self._drag_from: QPoint | None = None
        self.settings = settings
        self.apply_settings(settings)

    # ------------------------------------------------------------------ configuration
    def apply_settings(self, settings: Settings) -> None:
        self.settings = settings
        flags = (
            Qt.WindowType.FramelessWindowHint
            | Qt.WindowType.WindowStaysOnTopHint
            | Qt.WindowType.Tool
            | Qt.WindowType.WindowDoesNotAcceptFocus
        )
        if settings.overlay_click_through:
            flags |= Qt.WindowType.WindowTransparentForInput
        visible = self.isVisible()
        self.setWindowFlags(flags)
        self.setWindowOpacity(max(0.1, min(1.0, settings.overlay_opacity)))
        font = QFont(settings.overlay_font_family) if settings.overlay_font_family else QFont()
        font.setPointSize(max(8, settings.overlay_font_size))
        self.label.setFont(font)
        self.label.setStyleSheet(
            f"color: {settings.overlay_text_color}; background-color: {settings.overlay_background};"
            "border-radius: 8px; padding: 8px;"
        )
        self.fade_timer.setInterval(int(max(0.5, settings.overlay_hold_s) * 1000))
        self.refresh_text()
        self.place()
        if visible:
            self.show()

    def place(self) -> None:
        """Position preset on the overlay's screen: bottom or top centre, or where the user dragged it."""
        screen = self.screen() or QGuiApplication.primaryScreen()
        if screen is None:
            return
        area = screen.availableGeometry()
        width = min(area.width() - 2 * MARGIN, 1000)
        layout = self.layout()
        # Tall enough for the wrapped text at this width (the size hint assumes one unwrapped line).
        height = layout.totalHeightForWidth(width) if layout is not None else -1
        self.resize(width, height if height > 0 else self.sizeHint().height())
        custom = self.settings.overlay_custom_positions.get(screen.name())
        if self.settings.overlay_position == "custom" and custom:
            self.move(custom[0], custom[1])
            return
        x = area.x() + (area.width() - width) // 2
        y = area.y() + MARGIN if self.settings.overlay_position == "top" else area.bottom() - self.height() - MARGIN
        self.move(x, y)

    # ------------------------------------------------------------------ model
    def bind(self, session: SessionModel) -> None:
        if callable(self._unsubscribe):
            self._unsubscribe()
        self._session = session
        self._unsubscribe = session.subscribe(self._on_change)
        self.refresh_text()

    def unbind(self) -> None:
        if callable(self._unsubscribe):
            self._unsubscribe()
        self._unsubscribe = None
        self._session = None

    def _on_change(self, change: SessionChange) -> None:
        if change.committed or change.rewritten or change.provisional:
            self.refresh_text()
            if self.isVisible() and self.windowOpacity() < self.settings.overlay_opacity:
                self.setWindowOpacity(self.settings.overlay_opacity)
            self.fade_timer.start()

    def refresh_text(self) -> None:
        committed = self._session.committed_text.strip() if self._session else ""
        provisional = self._session.provisional_text if self._session else ""
        committed_lines, provisional_lines = _last_lines(committed, provisional, self.settings.overlay_lines)
        parts = [html.escape(committed_lines)]
        if provisional_lines:
            parts.append(f'<i style="color:{self.settings.overlay_provisional_color}">'
                         f"{html.escape(provisional_lines)}</i>")  # fmt: skip
        self.label.setText(" ".join(p for p in parts if p))
        self.place()  # the text may need another line (bottom preset: the overlay grows upwards)

    def displayed_text(self) -> str:
        return self.label.text()

    def _fade(self) -> None:
        self.setWindowOpacity(0.0)  # faded, still placed: the next caption shows at once

    # ------------------------------------------------------------------ dragging (custom position)
    def mousePressEvent(self, event: QMouseEvent) -> None:  # noqa: N802 - Qt naming
        if event.button() == Qt.MouseButton.LeftButton:
            self._drag_from = event.globalPosition().toPoint() - self.frameGeometry().topLeft()

    def mouseMoveEvent(self, event: QMouseEvent) -> None:  # noqa: N802
        if self._drag_from is not None:
            self.move(event.globalPosition().toPoint() - self._drag_from)

    def mouseReleaseEvent(self, _event: QMouseEvent) -> None:  # noqa: N802
        if self._drag_from is not None:
            self._drag_from = None
            screen = self.screen()
            if screen is not None:
                self.settings.overlay_position = "custom"
                self.settings.overlay_custom_positions[screen.name()] = [self.x(), self.y()]


def _last_lines(committed: str, provisional: str, lines: int, width: int = 60) -> tuple[str, str]:
    """The tail of committed + provisional text that fits ``lines`` lines of about ``width`` characters."""
    budget = max(1, lines) * width
    text = (committed + (" " if committed and provisional else "") + provisional)[-budget:]
    if len(committed) + len(provisional) + 1 > budget and " " in text:
        text = text[text.index(" ") + 1 :]  # start at a word
    split = max(0, len(text) - len(provisional)) if provisional else len(text)
    return text[:split].strip(), text[split:].strip()
