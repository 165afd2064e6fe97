"""Overlay settings (thin view): opacity, font, colours, lines, hold time, what shows after a fade, position,
click-through.

The controls edit a draft of the settings, which the overlay previews at once (so the user sees the changes);
OK makes the draft's overlay settings the settings' (one change, saved once); Cancel shows the settings again.
"""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtGui import QColor, QFont
from PySide6.QtWidgets import (
    QCheckBox,
    QColorDialog,
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QDoubleSpinBox,
    QFontComboBox,
    QFormLayout,
    QLabel,
    QPushButton,
    QSlider,
    QSpinBox,
    QWidget,
)

from app.live.overlay_text import AFTER_FADE
from app.settings import Settings
from app.views.overlay import LOOK, wayland_note

POSITIONS = {"bottom": "Bottom of the screen", "top": "Top of the screen", "custom": "Where I drag it"}


class OverlaySettingsDialog(QDialog):
    def __init__(
        self, settings: Settings, preview: Callable[[Settings], None], parent: QWidget | None = None
    ) -> None:
        """``preview(settings)``: show the overlay with these settings (the draft, or the settings again)."""
        super().__init__(parent)
        self.setWindowTitle("Caption overlay")
        self.settings = settings
        self.draft = settings.copy()
        self._preview = preview
        form = QFormLayout(self)
        self.opacity = QSlider()
        self.opacity.setOrientation(self.opacity.orientation().Horizontal)
        self.opacity.setRange(10, 100)
        self.opacity.setValue(round(settings.overlay_opacity * 100))
        form.addRow("Opacity", self.opacity)
        self.font_family = QFontComboBox()
        if settings.overlay_font_family:
            self.font_family.setCurrentFont(QFont(settings.overlay_font_family))
        form.addRow("Font", self.font_family)
        self.font_size = QSpinBox()
        self.font_size.setRange(8, 96)
        self.font_size.setValue(settings.overlay_font_size)
        form.addRow("Font size", self.font_size)
        self.lines = QSpinBox()
        self.lines.setRange(1, 6)
        self.lines.setValue(settings.overlay_lines)
        form.addRow("Lines", self.lines)
        self.hold = QDoubleSpinBox()
        self.hold.setRange(0.5, 120.0)
        self.hold.setSuffix(" s")
        self.hold.setValue(settings.overlay_hold_s)
        form.addRow("Fade after", self.hold)
        self.after_fade = QComboBox()
        for key, label in AFTER_FADE.items():
            self.after_fade.addItem(label, key)
        self.after_fade.setCurrentIndex(max(0, self.after_fade.findData(settings.overlay_after_fade)))
        form.addRow("Back after a fade", self.after_fade)
        self.position = QComboBox()
        for key, label in POSITIONS.items():
            self.position.addItem(label, key)
        self.position.setCurrentIndex(max(0, self.position.findData(settings.overlay_position)))
        form.addRow("Position", self.position)
        self.click_through = QCheckBox("Clicks go to the window underneath")
        self.click_through.setChecked(settings.overlay_click_through)
        form.addRow("", self.click_through)
        self.colour_buttons: dict[str, QPushButton] = {}
        for key, label in (
            ("overlay_text_color", "Text colour"),
            ("overlay_provisional_color", "Provisional text"),
            ("overlay_background", "Background"),
        ):
            button = QPushButton(getattr(settings, key))
            button.clicked.connect(lambda _checked=False, k=key: self._pick_colour(k))
            self.colour_buttons[key] = button
            form.addRow(label, button)
        note = wayland_note()
        if note:
            note_label = QLabel(note)
            note_label.setWordWrap(True)
            form.addRow(note_label)
        buttons = QDialogButtonBox(
            QDialogButtonBox.StandardButton.Ok | QDialogButtonBox.StandardButton.Cancel
        )
        buttons.accepted.connect(self.accept)
        buttons.rejected.connect(self.reject)
        form.addRow(buttons)
        for signal in (
            self.opacity.valueChanged,
            self.font_size.valueChanged,
            self.lines.valueChanged,
            self.hold.valueChanged,
            self.after_fade.currentIndexChanged,
            self.position.currentIndexChanged,
            self.click_through.toggled,
            self.font_family.currentFontChanged,
        ):
            signal.connect(self._changed)

    def _pick_colour(self, key: str) -> None:
        colour = QColorDialog.getColor(QColor(getattr(self.draft, key)), self, "Choose a colour")
        if colour.isValid():
            self.set_colour(key, colour.name())

    def set_colour(self, key: str, value: str) -> None:
        self.colour_buttons[key].setText(value)
        self._changed()

    def _changed(self, *_args: object) -> None:
        s = self.draft
        s.overlay_opacity = self.opacity.value() / 100
        s.overlay_font_family = self.font_family.currentFont().family()
        s.overlay_font_size = self.font_size.value()
        s.overlay_lines = self.lines.value()
        s.overlay_hold_s = float(self.hold.value())
        s.overlay_after_fade = str(self.after_fade.currentData())
        s.overlay_position = str(self.position.currentData())
        s.overlay_click_through = self.click_through.isChecked()
        for key, button in self.colour_buttons.items():
            setattr(s, key, button.text())
        self._preview(s)

    def accept(self) -> None:
        chosen = {name: getattr(self.draft, name) for name in LOOK}  # with a drag while it was open
        if any(getattr(self.settings, name) != value for name, value in chosen.items()):
            self.settings.update(chosen)  # the overlay follows the settings: it shows them again
        else:
            self._preview(self.settings)  # the same look; its drags move the settings again, not the draft
        super().accept()

    def reject(self) -> None:
        self._preview(self.settings)
        super().reject()
