"""Dictation records a microphone: the one chosen in the input list, or the default microphone when system
audio is chosen for captions; each by its stable id, as the window opens it."""

from __future__ import annotations

from app.live.controller import LiveController
from app.live.sources import ArraySource
from app.main_window import MainWindow
from app.model_choices import AppState
from app.settings import SettingsStore
from inference.client import WorkerClient
from inference.paths import AppPaths


def test_dictation_opens_the_chosen_microphone_or_the_default_one_when_system_audio_is_chosen(qtbot) -> None:  # type: ignore[no-untyped-def]
    import numpy as np

    paths = AppPaths.from_environment().ensure()
    opened: list[str | None] = []

    def factory(device: str | None) -> ArraySource:
        opened.append(device)
        return ArraySource(np.zeros(1, np.float32), str(device))

    window = MainWindow(
        AppState.load(paths),
        SettingsStore(paths),
        LiveController(WorkerClient, paths.data),
        source_factory=factory,
    )
    qtbot.addWidget(window)
    combo = window.panel.device_combo
    for label, data in (
        ("USB headset", "pulse:source:usb"),
        ("Speakers", "pulse:source:speakers.monitor"),
        ("What this computer plays", "system:default"),
    ):
        combo.addItem(label, data)
    for chosen, expected in (
        ("pulse:source:usb", "pulse:source:usb"),
        ("pulse:source:speakers.monitor", "mic:default"),
        ("system:default", "mic:default"),
    ):
        combo.setCurrentIndex(combo.findData(chosen))
        window.inputs.open_microphone()
        assert opened[-1] == expected
        window.inputs.open_source()
        assert opened[-1] == chosen  # captions still open what is chosen
    window.close()
