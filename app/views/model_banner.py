"""The first-run banner: a strip above the captions offering a real model when only the demo is installed.

It never blocks anything (Start, ``--input-file`` and dictation work with the demo meanwhile); its buttons ask the
window to open the model list, and dismissing it is remembered by the window's settings.
"""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtWidgets import QFrame, QHBoxLayout, QLabel, QPushButton, QWidget


class ModelBanner(QFrame):
    def __init__(self, parent: QWidget, on_download: Callable[[], None], on_choose: Callable[[], None],
                 on_dismiss: Callable[[], None]) -> None:  # fmt: skip
        super().__init__(parent)
        self.setObjectName("modelBanner")
        self.setFrameShape(QFrame.Shape.StyledPanel)
        self.setStyleSheet("#modelBanner { background: palette(alternate-base); }")
        layout = QHBoxLayout(self)
        layout.setContentsMargins(8, 4, 8, 4)
        self.text = QLabel(self)
        self.text.setWordWrap(True)
        layout.addWidget(self.text, 1)
        self.download_button = QPushButton("Download", self)
        self.choose_button = QPushButton("Choose a model…", self)
        self.dismiss_button = QPushButton("Dismiss", self)
        for button, action in ((self.download_button, on_download), (self.choose_button, on_choose),
                               (self.dismiss_button, on_dismiss)):  # fmt: skip
            button.clicked.connect(lambda _checked=False, act=action: act())
            layout.addWidget(button)
        self.hide()

    def offer(self, suggestion: str | None) -> None:
        """Show the offer; ``suggestion``: the package to download in words (None: no download to suggest)."""
        text = "Only the small English demo model is installed: captions will be rough."
        if suggestion:
            text += f" Download {suggestion} for real captions?"
        self.text.setText(text)
        self.download_button.setVisible(bool(suggestion))
        self.show()
