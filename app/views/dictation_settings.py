"""Dictation settings (thin view): the hotkey (captured from a key press), capture times, text style."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtGui import QKeyEvent, QKeySequence
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QFormLayout,
    QKeySequenceEdit,
    QLabel,
    QSpinBox,
    QWidget,
)

from app.dictation.global_hotkey import choose_backend, parse_hotkey, session_kind
from app.dictation.key_filters import split_hotkey
from app.settings import Settings
from inference.errors import UsageError

_QT_TO_HOTKEY = {"Ctrl": "<ctrl>", "Alt": "<alt>", "Shift": "<shift>", "Meta": "<cmd>", "Space": "<space>"}


def hotkey_from_sequence(sequence: QKeySequence) -> str:
    """``Ctrl+Alt+Space`` (Qt) → ``<ctrl>+<alt>+<space>`` (the hotkey format); "" for an empty sequence."""
    text = sequence.toString(QKeySequence.SequenceFormat.PortableText).split(",")[0].strip()
    if not text:
        return ""
    parts = []
    for part in text.split("+"):
        if part in _QT_TO_HOTKEY:
            parts.append(_QT_TO_HOTKEY[part])
        elif len(part) == 1:
            parts.append(part.lower())
        else:
            parts.append(f"<{part.lower()}>")
    return "+".join(parts)


def sequence_from_hotkey(hotkey: str) -> QKeySequence:
    reverse = {v: k for k, v in _QT_TO_HOTKEY.items()}
    parts = [
        reverse.get(p, p.strip("<>").capitalize() if p.startswith("<") else p.upper())
        for p in hotkey.split("+")
    ]
    return QKeySequence("+".join(parts))


def hotkey_label(hotkey: str) -> str:
    """How menus show a hotkey: ``<ctrl>+<alt>+<space>`` -> ``Ctrl+Alt+Space``."""
    return sequence_from_hotkey(hotkey).toString(QKeySequence.SequenceFormat.NativeText) or hotkey


class HotkeyEdit(QKeySequenceEdit):
    """Captures the hotkey from a key press; a bare Esc is not a hotkey but the usual "cancel" (the dialog's)."""

    def keyPressEvent(self, event: QKeyEvent) -> None:  # noqa: N802 - Qt naming
        if event.key() == Qt.Key.Key_Escape and not event.modifiers():
            event.ignore()  # to the dialog, which closes without saving
            return
        super().keyPressEvent(event)


class DictationSettingsDialog(QDialog):
    def __init__(self, settings: Settings, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle("Dictation")
        self.settings = settings
        form = QFormLayout(self)
        self.hotkey = HotkeyEdit(sequence_from_hotkey(settings.push_to_talk_hotkey))
        self.hotkey.setMaximumSequenceLength(1)
        form.addRow("Hotkey (press it)", self.hotkey)
        self.backend_note = QLabel(choose_backend(session_kind(), settings.push_to_talk_hotkey).note)
        self.backend_note.setWordWrap(True)
        form.addRow("", self.backend_note)  # which global hotkey works in this session, and why
        self.pre_roll = self._ms(settings.dictation_pre_roll_ms)
        form.addRow("Audio kept from before the key", self.pre_roll)
        self.trailing = self._ms(settings.trailing_silence_ms)
        form.addRow("Audio kept after release", self.trailing)
        self.padding = self._ms(settings.dictation_padding_ms)
        form.addRow("Silence added at the end", self.padding)
        self.capitalize = QCheckBox("Capitalise the first word")
        self.capitalize.setChecked(settings.dictation_capitalize)
        form.addRow("", self.capitalize)
        self.separator = QComboBox()
        for key, label in (("space", "a space"), ("newline", "a new line"), ("none", "nothing")):
            self.separator.addItem(label, key)
        self.separator.setCurrentIndex(max(0, self.separator.findData(settings.dictation_trailing)))
        form.addRow("After the text, add", self.separator)
        self.error = QLabel("")
        self.error.setStyleSheet("color: #c62828")
        form.addRow(self.error)
        buttons = QDialogButtonBox(
            QDialogButtonBox.StandardButton.Ok | QDialogButtonBox.StandardButton.Cancel
        )
        buttons.accepted.connect(self.accept)
        buttons.rejected.connect(self.reject)
        form.addRow(buttons)

    @staticmethod
    def _ms(value: int) -> QSpinBox:
        box = QSpinBox()
        box.setRange(0, 2000)  # CaptureSettings' bounds
        box.setSingleStep(50)
        box.setSuffix(" ms")
        box.setValue(value)
        return box

    def accept(self) -> None:
        hotkey = hotkey_from_sequence(self.hotkey.keySequence())
        try:
            split_hotkey(
                parse_hotkey(hotkey), hotkey
            )  # modifiers and exactly one key, as every backend needs
        except UsageError as exc:
            self.error.setText(f"{exc.message} — {exc.fix}")
            return
        self.settings.update(  # one change: saved once
            {
                "push_to_talk_hotkey": hotkey,
                "dictation_pre_roll_ms": self.pre_roll.value(),
                "trailing_silence_ms": self.trailing.value(),
                "dictation_padding_ms": self.padding.value(),
                "dictation_capitalize": self.capitalize.isChecked(),
                "dictation_trailing": str(self.separator.currentData()),
            }
        )
        super().accept()
