"""A combo box that shows a name too long for it elided in the middle ("Demo: synthetic…(bundled)"), never cut
off mid-word at its right edge; the whole name is in its tooltip."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtGui import QPaintEvent
from PySide6.QtWidgets import QComboBox, QStyle, QStyleOptionComboBox, QStylePainter, QWidget

LABEL_INSET = 4


class ElidedComboBox(QComboBox):
    def __init__(self, parent: QWidget | None = None, what: str = "") -> None:
        super().__init__(parent)
        self.what = what  # the tooltip's lead, e.g. "Model"
        self.currentTextChanged.connect(self._update_tooltip)

    def _update_tooltip(self, text: str) -> None:
        self.setToolTip(f"{self.what}: {text}" if self.what else text)

    def shown_text(self) -> str:
        """The current text as it fits the box now (elided in the middle when it does not)."""
        option = QStyleOptionComboBox()
        self.initStyleOption(option)
        field = self.style().subControlRect(
            QStyle.ComplexControl.CC_ComboBox, option, QStyle.SubControl.SC_ComboBoxEditField, self
        )
        # The label is drawn inset in that field (a few pixels each side in Fusion and Windows styles).
        room = max(0, field.width() - 2 * LABEL_INSET)
        return self.fontMetrics().elidedText(self.currentText(), Qt.TextElideMode.ElideMiddle, room)

    def paintEvent(self, _event: QPaintEvent) -> None:  # noqa: N802 - Qt naming
        painter = QStylePainter(self)
        option = QStyleOptionComboBox()
        self.initStyleOption(option)
        option.currentText = self.shown_text()
        painter.drawComplexControl(QStyle.ComplexControl.CC_ComboBox, option)
        painter.drawControl(QStyle.ControlElement.CE_ComboBoxLabel, option)
