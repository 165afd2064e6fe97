"""The caption text in the window: a thin view over the session model.

Committed text is plain, provisional text grey italics after it and replaced in place (no redraw, no flicker).
A segment that starts after a pause begins a new paragraph (``app.live.paragraphs``), and so does provisional
text after a pause, at once; with timestamps on, each paragraph starts with its time. Auto-scroll follows new
text unless the reader scrolled back. Text size and theme come from settings.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from PySide6.QtCore import Qt
from PySide6.QtGui import QFont, QTextCharFormat, QTextCursor
from PySide6.QtWidgets import QTextEdit, QWidget

from app.live.paragraphs import (
    paragraph_lead,
    provisional_opens_segment,
    provisional_start_s,
    provisional_starts_paragraph,
    starts_paragraph,
)
from app.live.session import SessionChange, SessionModel

THEMES = {
    "system": "",
    "dark": "QTextEdit#captionText { background: #1e1e1e; color: #e8e8e8; }",
    "high_contrast": "QTextEdit#captionText { background: #000000; color: #ffff00; }",
}
PROVISIONAL_COLOURS = {
    "system": Qt.GlobalColor.gray,
    "dark": Qt.GlobalColor.gray,
    "high_contrast": Qt.GlobalColor.cyan,
}


class CaptionView(QTextEdit):
    def __init__(self, parent: QWidget, font_size: int, theme: str, timestamps: bool) -> None:
        super().__init__(parent)
        self.setObjectName("captionText")
        self.setReadOnly(True)
        self.timestamps = timestamps
        self.theme = "system"
        self._session: SessionModel | None = None
        self._provisional_start: int | None = None
        self.set_font_size(font_size)
        self.set_theme(theme)

    # ------------------------------------------------------------------ settings
    def set_font_size(self, points: int) -> None:
        font = QFont(self.font())
        font.setPointSize(max(8, min(72, points)))
        self.setFont(font)

    def set_theme(self, theme: str) -> None:
        self.theme = theme if theme in THEMES else "system"
        self.setStyleSheet(THEMES[self.theme])
        self.render_all()

    def set_timestamps(self, enabled: bool) -> None:
        self.timestamps = enabled
        self.render_all()

    # ------------------------------------------------------------------ model
    def show_session(self, session: SessionModel | None) -> None:
        self._session = session
        self.render_all()

    def on_change(self, change: SessionChange) -> None:
        if change.rewritten:
            self.render_all()
        elif change.committed or change.provisional:
            self.render_tail(change.committed, change.opened_segment)

    def plain_text(self) -> str:
        return self.toPlainText()

    # ------------------------------------------------------------------ rendering
    def render_all(self) -> None:
        with self._keeping_scroll():
            self.clear()
            self._provisional_start = None
            session = self._session
            if session is None:
                return
            cursor = self.textCursor()
            cursor.movePosition(QTextCursor.MoveOperation.End)
            for index, segment in enumerate(session.segments):
                if segment.text.strip():
                    self._insert_segment_text(cursor, index, segment.text)
            self._insert_provisional(cursor)

    def render_tail(self, committed: str, opened_segment: int | None = None) -> None:
        """Append committed text (``opened_segment``: the segment it begins) and replace the provisional tail."""
        with self._keeping_scroll():
            cursor = self.textCursor()
            if self._provisional_start is not None:
                cursor.setPosition(self._provisional_start)
                cursor.movePosition(QTextCursor.MoveOperation.End, QTextCursor.MoveMode.KeepAnchor)
                cursor.removeSelectedText()
            cursor.movePosition(QTextCursor.MoveOperation.End)
            if committed and opened_segment is not None and self._session is not None:
                self._insert_segment_text(cursor, opened_segment, committed)
            elif committed:
                cursor.insertText(committed if cursor.position() else committed.lstrip(), QTextCharFormat())
            self._insert_provisional(cursor)

    def _insert_segment_text(self, cursor: QTextCursor, index: int, text: str) -> None:
        session = self._session
        assert session is not None
        segment = session.segments[index]
        paragraph = cursor.position() > 0 and (starts_paragraph(session, index) or self.timestamps)
        if cursor.position() == 0 or paragraph:
            text = text.lstrip()
        lead = "\n" if paragraph else ""
        if self.timestamps and (cursor.position() == 0 or paragraph):
            lead += f"[{_clock(segment.start_s)}] "
        if cursor.position() == 0 or paragraph:
            lead += paragraph_lead(session, index)  # meeting mode: who speaks
        cursor.insertText(lead + text, QTextCharFormat())

    def _insert_provisional(self, cursor: QTextCursor) -> None:
        session = self._session
        cursor.movePosition(QTextCursor.MoveOperation.End)
        self._provisional_start = cursor.position()
        if session is None or not session.provisional_text:
            return
        # Provisional text of a segment of its own is laid out as that segment will be once committed.
        new_segment = provisional_opens_segment(session)
        paragraph = (
            cursor.position() > 0
            and new_segment
            and (self.timestamps or provisional_starts_paragraph(session))
        )
        lead = "\n" if paragraph else (" " if cursor.position() else "")
        if self.timestamps and new_segment and (paragraph or not cursor.position()):
            lead += f"[{_clock(provisional_start_s(session))}] "
        styled = QTextCharFormat()
        styled.setFontItalic(True)
        styled.setForeground(PROVISIONAL_COLOURS[self.theme])
        cursor.insertText(lead + session.provisional_text, styled)

    @contextlib.contextmanager
    def _keeping_scroll(self) -> Iterator[None]:
        """Follow new text at the bottom; leave the view where it is when the reader scrolled back."""
        bar = self.verticalScrollBar()
        at_bottom = bar.value() >= bar.maximum() - 4
        yield
        if at_bottom:
            bar.setValue(bar.maximum())


def _clock(seconds: float | None) -> str:
    if seconds is None:
        return "--:--"
    minutes, secs = divmod(int(seconds), 60)
    return f"{minutes:02d}:{secs:02d}"
