"""The first-run banner: a strip above the captions offering a real model when only the demo is installed.

It never blocks anything (Start, ``--input-file`` and dictation work with the demo meanwhile); the window's model
picker connects its buttons (open the model list, remember a dismissal).
"""

from __future__ import annotations

from PySide6.QtWidgets import QFrame, QHBoxLayout, QLabel, QPushButton, QWidget


class ModelBanner(QFrame):
    def __init__(self, parent: QWidget) -> None:
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
        for button in (self.download_button, self.choose_button, self.dismiss_button):
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
