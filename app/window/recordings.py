"""Captioning a recording in the window: open one (in real time or fast), drop one on the window, and its
progress in the status bar while it plays."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from PySide6.QtCore import QTimer
from PySide6.QtWidgets import QFileDialog, QProgressBar, QWidget

from app.live.controller import LiveController
from app.live.time_left import TimeLeftEstimate
from app.views.caption_panel import CaptionPanel
from app.window.inputs import InputPicker
from inference.contract import SAMPLE_RATE

AUDIO_FILTER = (
    "Audio and video (*.wav *.flac *.ogg *.oga *.opus *.mp3 *.aif *.aiff *.w64 *.rf64 *.m4a *.mp4 *.aac *.webm "
    "*.mkv *.mka *.mov);;All files (*)"
)


class RecordingProgress:
    """A recording's progress bar (hidden for live input): how much of it was captioned, and the time left at the
    rate measured since audio began to flow (``TimeLeftEstimate``)."""

    def __init__(
        self, parent: QWidget, controller: LiveController, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.controller = controller
        self.clock = clock
        self.bar = QProgressBar(parent)
        self.bar.setTextVisible(True)
        self.bar.hide()
        self.estimate: TimeLeftEstimate | None = None
        self.timer = QTimer(parent)
        self.timer.setInterval(250)
        self.timer.timeout.connect(self.update)  # runs while a recording is captioned

    def follow(self, source: object) -> None:
        """Captions just started on ``source``: tick while it is a recording."""
        total = int(getattr(source, "total_samples", 0))
        self.estimate = TimeLeftEstimate(total, self.clock) if total else None
        if total:
            self.timer.start()

    def update(self) -> None:
        pipeline = self.controller.pipeline
        if self.controller.state == "loading":
            return  # the pipeline (and its source) exists once the model is loaded
        estimate = self.estimate
        if estimate is None or pipeline is None or self.controller.state not in ("running", "stopping"):
            self.finish()
            return
        # What the model has captioned, not what the source has read ahead into the backlog.
        stream = pipeline.stream
        done = round(stream.stats().audio_s * SAMPLE_RATE) if stream is not None else 0
        done = max(0, min(done, estimate.total_samples))
        estimate.observe(done)
        self.bar.setMaximum(estimate.total_samples)
        self.bar.setValue(done)
        self.bar.setFormat(estimate.describe())
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
