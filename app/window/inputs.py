"""The audio input picker: microphones and system audio, the recordings opened in the window, and the source
each one opens.

An item's data names its input: an input id from ``inference.audio.devices`` (``pulse:source:NAME``,
``system:default``, ...), ``meeting:default`` (meeting mode: the microphone and system audio as two labelled
streams), a PortAudio device name where no sound server answers, ``file:PATH`` (a recording played in real time)
or ``fastfile:PATH`` (a recording played as fast as the model goes). Group headings (*Microphones*, *System
audio*, *Meeting: microphone + system audio*) are disabled items with no data.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from PySide6.QtCore import QObject, Signal, Slot
from PySide6.QtGui import QStandardItemModel

from app.live.meeting import MeetingInput
from app.live.sources import AudioSource, AudioSourceError, DeviceSource, FileSource, list_input_devices
from app.settings import Settings
from app.views.caption_panel import CaptionPanel
from inference.audio.bleed import BleedFilter
from inference.audio.devices import (
    MEETING,
    MEETING_DEFAULT,
    MIC_DEFAULT,
    MICROPHONES,
    SYSTEM_AUDIO,
    SYSTEM_DEFAULT,
    InputChoice,
    InputDeviceError,
    SoundServerCapture,
    fallback_for,
    find_choice,
    is_input_id,
    list_inputs,
    meeting_choices,
)
from inference.audio.devices.listing import uses_pulse
from inference.audio.devices.pulse import PulseWatcher
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
    if device == MEETING_DEFAULT:
        # The bleed filter keeps the far end heard through the speakers out of "You".
        microphone, system = SoundServerCapture(MIC_DEFAULT), SoundServerCapture(SYSTEM_DEFAULT)
        return MeetingInput(microphone, system, BleedFilter())
    if device is not None and is_input_id(device):
        return SoundServerCapture(device)
    return DeviceSource(device)


def source_factory_for(settings: Settings) -> SourceFactory:
    """``default_source`` with the recording length limit the settings hold when the source opens."""
    return lambda device: default_source(device, settings.max_file_audio_s)


class _ServerChanged(QObject):
    """Hops the sound server's change events (the watcher's thread) to the GUI thread."""

    changed = Signal()

    def __init__(self, refresh: Callable[[], None]) -> None:
        super().__init__()
        self._refresh = refresh
        self.changed.connect(self._on_changed)

    @Slot()
    def _on_changed(self) -> None:
        self._refresh()


class InputPicker:
    def __init__(self, panel: CaptionPanel, settings: Settings, source_factory: SourceFactory) -> None:
        self.panel = panel
        self.combo = panel.device_combo
        self.settings = settings
        self.source_factory = source_factory
        self._bridge = _ServerChanged(self.refresh)
        self._watcher: PulseWatcher | None = None

    def fill(self, input_file: Path | None) -> None:
        """The recording given on the command line first, then the inputs (the remembered one chosen)."""
        self.combo.clear()
        if input_file is not None:
            self.combo.addItem(f"Recording: {input_file.name}", FILE_ITEM + str(input_file))
        try:
            choices = list_inputs()
        except InputDeviceError as exc:  # no sound server: PortAudio's devices, as before
            self.panel.status_label.setToolTip(f"{exc.message} — {exc.fix}")
        else:
            self._fill_choices(choices, input_file)
            self._watch()
            return
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

    def _watch(self) -> None:
        """Keep the list current while the window is open: a device plugged in or removed, a new default."""
        if self._watcher is not None or not uses_pulse():
            return
        watcher = PulseWatcher(lambda _state: self._bridge.changed.emit())
        try:
            watcher.start()
        except InputDeviceError:
            return
        self._watcher = watcher

    def refresh(self) -> None:
        """The sound server's inputs listed again; the recordings and the current choice are kept (a choice that
        is gone gives way to the default of its kind; a running session says so itself)."""
        try:
            choices = list_inputs()
        except InputDeviceError:
            return
        current = self.current()
        recordings = [
            (self.combo.itemText(i), self.combo.itemData(i))
            for i in range(self.combo.count())
            if str(self.combo.itemData(i)).startswith((FILE_ITEM, FAST_FILE_ITEM))
        ]
        self.combo.blockSignals(True)
        self.combo.clear()
        for text, data in recordings:
            self.combo.addItem(text, data)
        self._fill_choices(choices, None, announce=False)
        if current is not None and self.combo.findData(current) >= 0:
            self.combo.setCurrentIndex(self.combo.findData(current))
        elif current is not None and is_input_id(current):
            fallback = self._default_of_kind(choices, fallback_for(current))
            if fallback is not None:
                self.combo.setCurrentIndex(self.combo.findData(fallback.id))
        self.combo.blockSignals(False)

    def close(self) -> None:
        if self._watcher is not None:
            self._watcher.stop()
            self._watcher = None

    def _fill_choices(
        self, choices: list[InputChoice], input_file: Path | None, announce: bool = True
    ) -> None:
        """Grouped under headings; the remembered id chosen, or, when it is gone, the default of its kind
        with a sentence saying so."""
        choices = choices + meeting_choices(choices)
        for group in (MICROPHONES, SYSTEM_AUDIO, MEETING):
            members = [choice for choice in choices if choice.group == group]
            if not members:
                continue
            self._add_heading(group)
            for choice in members:
                label = choice.label + (" (default)" if choice.is_default and group == MICROPHONES else "")
                self.combo.addItem("    " + label, choice.id)
        if not choices and input_file is None:
            self.combo.addItem("(no audio input found)", None)
            return
        remembered = self.settings.input_device
        wanted = remembered if remembered and find_choice(choices, remembered) else None
        if remembered and wanted is None and input_file is None and announce:
            fallback = self._default_of_kind(choices, fallback_for(remembered))
            gone = remembered.removeprefix("pulse:source:")
            if fallback is not None:
                self.panel.status_label.setText(
                    f"The input you used last ({gone}) is not there; using {fallback.label}"
                )
                wanted = fallback.id
        if wanted is None:
            default_mic = self._default_of_kind(choices, "mic:default")
            wanted = default_mic.id if default_mic is not None else None
        if input_file is None and wanted is not None:
            self.combo.setCurrentIndex(self.combo.findData(wanted))
        elif input_file is None:
            self._select_first_input()

    @staticmethod
    def _default_of_kind(choices: list[InputChoice], default_id: str) -> InputChoice | None:
        """The default microphone, or "What this computer plays", from the list."""
        group = SYSTEM_AUDIO if default_id == "system:default" else MICROPHONES
        members = [choice for choice in choices if choice.group == group]
        return next((c for c in members if c.is_default), members[0] if members else None)

    def _add_heading(self, text: str) -> None:
        self.combo.addItem(text, None)
        model = self.combo.model()
        if isinstance(model, QStandardItemModel):
            item = model.item(self.combo.count() - 1)
            if item is not None:
                item.setEnabled(False)  # a heading, not an input

    def _select_first_input(self) -> None:
        for index in range(self.combo.count()):
            if self.combo.itemData(index) is not None:
                self.combo.setCurrentIndex(index)
                return

    def current(self) -> str | None:
        return self.combo.currentData()

    def unavailable(self) -> str | None:
        """The placeholder's text when the list holds no input to open (None: there is one)."""
        if self.current() is None and self.combo.count() and self.combo.currentText().startswith("(no"):
            return self.combo.currentText()
        return None

    def open_source(self) -> AudioSource:
        return self.source_factory(self.current())

    def open_microphone(self) -> AudioSource:
        """Dictation's input: the chosen one when it is a microphone (or a recording), the default microphone
        when system audio or a meeting is chosen for captions (dictating what the computer plays makes no
        sense, and a meeting's microphone is the default one)."""
        current = self.current()
        if current == MEETING_DEFAULT:
            return self.source_factory(MIC_DEFAULT)
        if current is not None and is_input_id(current) and fallback_for(current) == SYSTEM_DEFAULT:
            return self.source_factory(MIC_DEFAULT)
        return self.source_factory(current)

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
