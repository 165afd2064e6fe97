"""Captioning a recording in the window: open one (in real time or fast), drop one on the window, and its
progress in the status bar while it plays."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from PySide6.QtCore import QTimer
from PySide6.QtWidgets import QFileDialog, QProgressBar, QWidget

from app.controller import LiveController
from app.views.caption_panel import CaptionPanel
from app.window.inputs import InputPicker
from inference.contract import SAMPLE_RATE

AUDIO_FILTER = "Audio (*.wav *.flac *.ogg *.oga *.opus *.mp3 *.aif *.aiff *.w64 *.rf64);;All files (*)"


class RecordingProgress:
    """A recording's progress bar (hidden for live input) and, once the rate is known, the time left."""

    def __init__(self, parent: QWidget, controller: LiveController) -> None:
        self.controller = controller
        self.bar = QProgressBar(parent)
        self.bar.setTextVisible(True)
        self.bar.hide()
        self._started = 0.0
        self.timer = QTimer(parent)
        self.timer.setInterval(250)
        self.timer.timeout.connect(self.update)  # runs while a recording is captioned

    def follow(self, source: object) -> None:
        """Captions just started on ``source``: time it from now, and tick while it is a recording."""
        self._started = time.monotonic()
        if getattr(source, "total_samples", 0):
            self.timer.start()

    def update(self) -> None:
        pipeline = self.controller.pipeline
        source = pipeline.source if pipeline is not None else None
        total = getattr(source, "total_samples", 0)
        if self.controller.state == "loading":
            return  # the pipeline (and its source) exists once the model is loaded
        if not total or self.controller.state not in ("running", "stopping"):
            self.finish()
            return
        played = getattr(source, "played_samples", 0)
        self.bar.setMaximum(total)
        self.bar.setValue(played)
        elapsed = time.monotonic() - self._started
        rate = played / elapsed if elapsed > 0.5 else 0.0  # samples a second, as it really goes (from Start)
        left = f" · about {max(0.0, (total - played) / rate):.0f} s left" if rate > 0 else ""
        self.bar.setFormat(f"{played / SAMPLE_RATE:.0f} of {total / SAMPLE_RATE:.0f} s{left}")
        self.bar.show()

    def finish(self) -> None:
        self.bar.hide()
        self.timer.stop()


class Recordings:
    def __init__(
        self,
        parent: QWidget,
        controller: LiveController,
        inputs: InputPicker,
        panel: CaptionPanel,
        start: Callable[[], None],
    ) -> None:
        self.parent = parent
        self.controller = controller
        self.inputs = inputs
        self.panel = panel
        self.start = start

    def open_dialog(self, fast: bool) -> None:
        path, _chosen = QFileDialog.getOpenFileName(
            self.parent, "Caption a recording", str(Path.home()), AUDIO_FILTER
        )
        if path:
            self.open(Path(path), fast)

    def open(self, path: Path, fast: bool = False) -> None:
        """Caption a recording in the window: in real time (as if it were spoken now) or ``fast`` (as fast as the
        model goes); the same session, autosave and export as live captions."""
        if self.controller.state not in ("idle", "failed"):
            self.panel.show_problem("Captions are running.", "Stop them first, then open the recording.")
            return
        self.inputs.select_recording(path, fast)
        self.start()


def dropped_file(mime: Any) -> Path | None:
    """The first local file among dropped URLs, if any."""
    if mime is None or not mime.hasUrls():
        return None
    for url in mime.urls():
        if url.isLocalFile() and Path(url.toLocalFile()).is_file():
            return Path(url.toLocalFile())
    return None
