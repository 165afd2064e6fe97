"""Help → About: the app's version and the native build it runs on (ggml, the CPU backend variant loaded).

The native libraries are loaded in a child process (``captioneer --version``), never in the GUI process.
"""

from __future__ import annotations

import sys

from PySide6.QtCore import QProcess, Qt
from PySide6.QtWidgets import QDialog, QDialogButtonBox, QLabel, QVBoxLayout, QWidget

from inference import __version__


def version_command() -> list[str]:
    """``captioneer --version`` for this installation: the frozen app itself, else this interpreter."""
    if getattr(sys, "frozen", False):
        return [sys.executable, "--version"]
    return [sys.executable, "-m", "app.launcher", "--version"]


class AboutDialog(QDialog):
    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle("About Captioneer")
        layout = QVBoxLayout(self)
        title = QLabel(
            f"<b>Captioneer {__version__}</b><br>Live captions and dictation, on your machine.", self
        )
        layout.addWidget(title)
        self.build = QLabel("Reading the native build…", self)
        self.build.setObjectName("aboutBuild")
        self.build.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.build.setWordWrap(True)
        layout.addWidget(self.build)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close, self)
        buttons.rejected.connect(self.reject)
        layout.addWidget(buttons)
        self.process = QProcess(self)
        self.process.setProcessChannelMode(QProcess.ProcessChannelMode.SeparateChannels)
        self.process.finished.connect(self._show_build)
        self.process.errorOccurred.connect(lambda _error: self._show_build())
        command = version_command()
        self.process.start(command[0], command[1:])

    def _show_build(self) -> None:
        text = bytes(self.process.readAllStandardOutput().data()).decode("utf-8", "replace").strip()
        if not text:
            text = f"the native build could not be read ({self.process.errorString()})"
        self.build.setText(text)
