"""The audio input picker: the sound cards, the recordings opened in the window, and the source each one opens.

An item's data names its input: a device name, ``file:PATH`` (a recording played in real time) or
``fastfile:PATH`` (a recording played as fast as the model goes).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from app.live.sources import AudioSource, AudioSourceError, DeviceSource, FileSource, list_input_devices
from app.settings import Settings
from app.views.caption_panel import CaptionPanel
from inference.audio.limits import DEFAULT_FILE_SECONDS

SourceFactory = Callable[[str | None], AudioSource]
FILE_ITEM = "file:"
FAST_FILE_ITEM = "fastfile:"
FAST_SPEED = 1000.0  # "as fast as the model goes": the model paces the recording (block backlog)


def default_source(device: str | None, max_file_audio_s: float = DEFAULT_FILE_SECONDS) -> AudioSource:
    if device is not None and device.startswith(FAST_FILE_ITEM):
        return FileSource(Path(device[len(FAST_FILE_ITEM) :]), FAST_SPEED, max_file_audio_s)
    if device is not None and device.startswith(FILE_ITEM):
        return FileSource(Path(device[len(FILE_ITEM) :]), max_audio_s=max_file_audio_s)
    return DeviceSource(device)


def source_factory_for(settings: Settings) -> SourceFactory:
    """``default_source`` with the recording length limit the settings hold when the source opens."""
    return lambda device: default_source(device, settings.max_file_audio_s)


class InputPicker:
    def __init__(self, panel: CaptionPanel, settings: Settings, source_factory: SourceFactory) -> None:
        self.panel = panel
        self.combo = panel.device_combo
        self.settings = settings
        self.source_factory = source_factory

    def fill(self, input_file: Path | None) -> None:
        """The recording given on the command line first, then the sound cards (the remembered one chosen)."""
        self.combo.clear()
        if input_file is not None:
            self.combo.addItem(f"Recording: {input_file.name}", FILE_ITEM + str(input_file))
        try:
            devices = list_input_devices()
        except AudioSourceError as exc:
            if input_file is None:
                self.combo.addItem(f"(no audio input: {exc.message})", None)
                self.panel.status_label.setText(f"{exc.message} — {exc.fix}")
            return
        if not devices and input_file is None:
            self.combo.addItem("(no audio input found)", None)
        for device in devices:
            self.combo.addItem(device.name + (" (default)" if device.is_default else ""), device.name)
        if self.settings.input_device:
            index = self.combo.findData(self.settings.input_device)
            if index >= 0 and input_file is None:
                self.combo.setCurrentIndex(index)

    def current(self) -> str | None:
        return self.combo.currentData()

    def unavailable(self) -> str | None:
        """The placeholder's text when the list holds no input to open (None: there is one)."""
        if self.current() is None and self.combo.count() and self.combo.currentText().startswith("(no"):
            return self.combo.currentText()
        return None

    def open_source(self) -> AudioSource:
        return self.source_factory(self.current())

    def remember_current(self) -> None:
        """Keep the chosen input for the next start (not a recording, fast or not)."""
        device = self.current()
        if device is not None and not str(device).startswith((FILE_ITEM, FAST_FILE_ITEM)):
            self.settings.input_device = str(device)

    def select_recording(self, path: Path, fast: bool) -> None:
        """Choose ``path`` as the input, adding it to the top of the list the first time."""
        data = (FAST_FILE_ITEM if fast else FILE_ITEM) + str(path)
        label = f"Recording: {path.name}" + (" (fast)" if fast else "")
        index = self.combo.findData(data)
        if index < 0:
            self.combo.insertItem(0, label, data)
            index = 0
        self.combo.setCurrentIndex(index)
