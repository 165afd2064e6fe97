"""The caption window's central area (thin view): the first-run banner, the control bar (Start, input, model,
language, context, level), the model line, the caption text and the status line under it."""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import Qt, Slot
from PySide6.QtWidgets import (
    QComboBox,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPushButton,
    QStyle,
    QVBoxLayout,
    QWidget,
)

from app.settings import Settings
from app.views.caption_view import CaptionView
from app.views.elided_combo import ElidedComboBox
from app.views.level_meter import LevelMeter
from app.views.model_banner import ModelBanner

START_LABELS = {
    "idle": "Start",
    "failed": "Start",
    "loading": "Loading…",
    "running": "Stop",
    "stopping": "Stopping…",
}


def fit_placeholder(edit: QLineEdit) -> None:
    """At least as wide as its placeholder, so the hint is read whole (it was cut to "context: n…")."""
    margins = edit.textMargins()
    frame = 2 * edit.style().pixelMetric(QStyle.PixelMetric.PM_DefaultFrameWidth, None, edit)
    text = edit.fontMetrics().horizontalAdvance(edit.placeholderText())
    edit.setMinimumWidth(text + margins.left() + margins.right() + frame + 12)  # 12: QLineEdit's own padding


class CaptionPanel(QWidget):
    def __init__(self, parent: QWidget, settings: Settings, model_summary: str) -> None:
        super().__init__(parent)
        layout = QVBoxLayout(self)
        self.model_banner = ModelBanner(self)
        layout.addWidget(self.model_banner)
        bar = QHBoxLayout()
        self.start_button = QPushButton("Start", self)
        self.start_button.setObjectName("startButton")
        self.device_combo = ElidedComboBox(self, "Audio input")
        self.device_combo.setObjectName("deviceCombo")
        self.device_combo.setToolTip("Audio input")
        self.model_combo = ElidedComboBox(self, "Model")
        self.model_combo.setObjectName("modelCombo")
        self.model_combo.setToolTip("Model (File → Models… installs more)")
        self.language_edit = QLineEdit(self)
        self.language_edit.setPlaceholderText("language (auto)")
        self.language_edit.setToolTip("Language of the speech (empty: detected), for models that take it")
        self.context_edit = QLineEdit(self)
        self.context_edit.setPlaceholderText("context: names, terms")
        self.context_edit.setToolTip("Names and terms the model should expect, for models that take context")
        for edit in (self.language_edit, self.context_edit):
            fit_placeholder(edit)
        self.language_edit.setMaximumWidth(self.language_edit.minimumWidth())
        self.level_meter = LevelMeter(self)
        # The input and model names get the room left (a recording's name, a long package name): a name too long
        # is elided in the middle, and the tooltip carries all of it.
        for combo in (self.device_combo, self.model_combo):
            combo.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon)
            combo.setMinimumContentsLength(12)
        for widget, stretch in (
            (self.start_button, 0),
            (self.device_combo, 3),
            (self.model_combo, 3),
            (self.language_edit, 0),
            (self.context_edit, 2),
            (self.level_meter, 0),
        ):
            bar.addWidget(widget, stretch)
        layout.addLayout(bar)
        # The model label says which model is in use and how to get real ones (the demo model is a toy).
        self.model_label = QLabel(model_summary, self)
        self.model_label.setObjectName("modelLabel")
        self.model_label.setWordWrap(True)
        layout.addWidget(self.model_label)
        self.text_view = CaptionView(
            self, settings.caption_font_size, settings.caption_theme, settings.show_timestamps
        )
        settings.subscribe(
            lambda changed: self._follow(settings, changed),
            "caption_font_size",
            "caption_theme",
            "show_timestamps",
        )
        layout.addWidget(self.text_view, 1)
        # Below the captions, not in the status bar: a restart's cause and its fix wrap and are read whole.
        self.status_label = QLabel("Ready", self)
        self.status_label.setObjectName("statusLabel")
        self.status_label.setWordWrap(True)
        self.status_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        layout.addWidget(self.status_label)

    def _follow(self, settings: Settings, changed: frozenset[str]) -> None:
        """The caption text's size, theme and timestamps follow the settings."""
        if "caption_font_size" in changed:
            self.text_view.set_font_size(settings.caption_font_size)
        if "caption_theme" in changed:
            self.text_view.set_theme(settings.caption_theme)
        if "show_timestamps" in changed:
            self.text_view.set_timestamps(settings.show_timestamps)

    def show_problem(self, message: str, fix: str) -> None:
        self.status_label.setText(f"{message} {fix}".strip())

    def show_captions_state(self, state: str, takes: Callable[[str], bool]) -> None:
        """Start/Stop follows the captions' state; the pickers are editable only while idle, language and context
        only for a model whose family ``takes`` them."""
        self.start_button.setText(START_LABELS.get(state, "Start"))
        self.start_button.setEnabled(state in ("idle", "failed", "running"))
        for widget in (self.model_combo, self.device_combo, self.language_edit, self.context_edit):
            widget.setEnabled(
                state in ("idle", "failed")
                and (widget is not self.language_edit or takes("language"))
                and (widget is not self.context_edit or takes("context"))
            )

    def show_family_options(self, takes: Callable[[str], bool]) -> None:
        self.language_edit.setEnabled(takes("language"))
        self.context_edit.setEnabled(takes("context"))

    @Slot(float)
    def show_level(self, dbfs: float) -> None:
        self.level_meter.show_level(dbfs)

    def clear_level(self) -> None:
        self.level_meter.clear()

    def caption_text(self) -> str:
        return self.text_view.plain_text()
