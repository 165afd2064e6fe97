"""The caption overlay: frameless, always on top, never takes keyboard focus, optionally click-through.

A thin view over the session model: it shows the last ``lines`` lines of committed text, then the
provisional text in another colour, and fades out ``hold_s`` seconds after the last new text. Back after a
fade it shows only what was said since (or, by ``overlay_after_fade``, the last line before it too): the
sentences before the pause are not replayed (``app.live.overlay_text``).

Platform notes (shown in the settings): on X11, Windows and macOS the overlay stays on top and
click-through works. On Wayland, compositors decide stacking and placement: "always on top" and
positions are hints that GNOME ignores (KDE honours them); click-through works where the compositor
supports input regions. ``wayland_note()`` says so in the window instead of failing silently.
"""

from __future__ import annotations

import html
from collections.abc import Callable

from PySide6.QtCore import QPoint, Qt, QTimer
from PySide6.QtGui import QFont, QFontMetrics, QGuiApplication, QMouseEvent
from PySide6.QtWidgets import QLabel, QVBoxLayout, QWidget

from app.live.overlay_text import FadeMark, split_at_mark
from app.live.session import SessionChange, SessionModel
from app.settings import Settings

MARGIN = 24
#: The settings the overlay shows (``overlay_enabled``, whether it is on, is the View menu's).
LOOK = (
    "overlay_opacity",
    "overlay_lines",
    "overlay_click_through",
    "overlay_font_family",
    "overlay_font_size",
    "overlay_text_color",
    "overlay_provisional_color",
    "overlay_background",
    "overlay_hold_s",
    "overlay_after_fade",
    "overlay_position",
    "overlay_custom_positions",
)
PLACEMENT = frozenset(("overlay_position", "overlay_custom_positions"))


def wayland_note() -> str | None:
    platform = QGuiApplication.platformName()
    if platform.startswith("wayland"):
        return (
            "Wayland: the compositor decides whether the overlay stays on top and where it goes "
            "(GNOME ignores both; KDE honours them). Run with QT_QPA_PLATFORM=xcb for X11 behaviour."
        )
    return None


class CaptionOverlay(QWidget):
    def __init__(self, settings: Settings) -> None:
        """Follows ``settings``; ``apply_settings`` shows another (a dialog's draft) until they change again."""
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
        self._enabled = False  # shown from the View menu (it may be faded for the moment)
        self._faded = False
        self._fade_mark: FadeMark | None = None  # how far the committed text reached at the last fade
        self.settings = settings  # what it shows: the settings, or a dialog's draft while it is previewed
        self.apply_settings(settings)
        self._unfollow = settings.subscribe(lambda changed: self._follow(settings, changed), *LOOK)

    def _follow(self, settings: Settings, changed: frozenset[str]) -> None:
        if changed <= PLACEMENT:  # dragged: it is there already; new window flags would make it flicker
            self.settings = settings
            self.place()
        else:
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
        y = (
            area.y() + MARGIN
            if self.settings.overlay_position == "top"
            else area.bottom() - self.height() - MARGIN
        )
        self.move(x, y)

    # ------------------------------------------------------------------ model
    def bind(self, session: SessionModel) -> None:
        if callable(self._unsubscribe):
            self._unsubscribe()
        self._session = session
        self._fade_mark = None
        self._unsubscribe = session.subscribe(self._on_change)
        self.refresh_text()

    def unbind(self) -> None:
        if callable(self._unsubscribe):
            self._unsubscribe()
        self._unsubscribe = None
        self._session = None

    def detach(self) -> None:
        """The window closes: stop following the session and the settings."""
        self.unbind()
        self._unfollow()
        self._unfollow = lambda: None

    @property
    def faded(self) -> bool:
        """Enabled but hidden because no new caption came for the hold time."""
        return self._faded

    def show_captions(self) -> None:
        """Show the overlay (enabled from the View menu): captions appear, and fade after the hold time."""
        self._enabled = True
        self._faded = False
        self._fade_mark = None  # asked for: the latest lines, whenever they were said
        self.refresh_text()
        self.place()
        self.show()
        self.fade_timer.start()

    def hide_captions(self) -> None:
        self._enabled = False
        self.fade_timer.stop()
        self.hide()

    def _on_change(self, change: SessionChange) -> None:
        if change.committed or change.rewritten or change.provisional:
            self.refresh_text()
            if self._enabled and self._faded:
                self._faded = False
                self.show()
            self.fade_timer.start()

    def refresh_text(self) -> None:
        metrics = QFontMetrics(self.label.font())
        width = max(80, self.width() - 2 * 16 - 2 * 8 - 4)  # the layout's and the label's margins and padding

        def fits(line: str) -> bool:
            return metrics.horizontalAdvance(line) <= width

        committed, provisional = "", ""
        if self._session is not None:
            before, committed = split_at_mark(self._session, self._fade_mark)
            if before.strip() and self.settings.overlay_after_fade == "last_line":
                last_line, _ = _last_lines(before, "", 1, fits=fits)
                committed = f"{last_line} {committed}"
            committed, provisional = committed.strip(), self._session.provisional_text
        committed_lines, provisional_lines = _last_lines(
            committed, provisional, self.settings.overlay_lines, fits=fits
        )
        parts = [html.escape(committed_lines)]
        if provisional_lines:
            parts.append(
                f'<i style="color:{self.settings.overlay_provisional_color}">'
                f"{html.escape(provisional_lines)}</i>"
            )
        self.label.setText(" ".join(p for p in parts if p))
        self.place()  # the text may need another line (bottom preset: the overlay grows upwards)

    def displayed_text(self) -> str:
        return self.label.text()

    def _fade(self) -> None:
        # Unmapped, not made transparent: without a compositor (most X11 set-ups, Xvfb) opacity changes nothing on
        # screen. The next caption maps it again where it was, without taking the focus.
        if self._enabled:
            self._faded = True
            if self._session is not None:
                self._fade_mark = FadeMark.of(self._session)
            self.hide()

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
                positions = {**self.settings.overlay_custom_positions, screen.name(): [self.x(), self.y()]}
                self.settings.update({"overlay_position": "custom", "overlay_custom_positions": positions})


def _last_lines(
    committed: str, provisional: str, lines: int, width: int = 60, fits: Callable[[str], bool] | None = None
) -> tuple[str, str]:
    """The tail of committed + provisional text that fills at most ``lines`` wrapped lines, whole words only.

    ``fits(line)``: whether a line fits the overlay in its font (default: at most ``width`` characters). The
    lines are filled greedily from the end, as the text's last lines look when wrapped from its start."""
    fits = fits or (lambda line: len(line) <= width)
    tokens = [(word, False) for word in committed.split()] + [(word, True) for word in provisional.split()]
    kept: list[tuple[str, bool]] = []
    used, line = 0, ""
    for word, is_provisional in reversed(tokens):
        candidate = f"{word} {line}" if line else word
        if line and not fits(candidate):
            used += 1
            if used >= max(1, lines):
                break
            candidate = word
        line = candidate
        kept.insert(0, (word, is_provisional))
    while len(kept) > 1 and _wrapped_lines([w for w, _ in kept], fits) > max(1, lines):
        kept.pop(0)  # wrapped from its start (as the label wraps it) it needs one line more: drop a word
    return " ".join(w for w, p in kept if not p), " ".join(w for w, p in kept if p)


def _wrapped_lines(words: list[str], fits: Callable[[str], bool]) -> int:
    count, line = 0, ""
    for word in words:
        candidate = f"{line} {word}" if line else word
        if line and not fits(candidate):
            count += 1
            candidate = word
        line = candidate
    return count + (1 if line else 0)
