"""The window's parts follow the one settings model: a change made anywhere shows in every part that displays it,
and is on disk at once."""

from __future__ import annotations

import pytest
from PySide6.QtCore import QPoint, Qt

from app.live.controller import LiveController
from app.main_window import MainWindow
from app.model_choices import AppState
from app.settings import SettingsStore
from inference.client import WorkerClient
from inference.paths import AppPaths


@pytest.fixture
def window(qtbot):  # type: ignore[no-untyped-def]
    paths = AppPaths.from_environment().ensure()
    win = MainWindow(AppState.load(paths), SettingsStore(paths), LiveController(WorkerClient, paths.data))
    qtbot.addWidget(win)
    yield win
    win.close()


def test_a_setting_changed_elsewhere_shows_in_the_menu_and_the_views(window) -> None:  # type: ignore[no-untyped-def]
    menu = window.view_menu
    window.settings.update({"overlay_click_through": True, "caption_theme": "high_contrast"})  # e.g. a dialog
    assert menu.click_through_action.isChecked()
    assert window.overlay.windowFlags() & Qt.WindowType.WindowTransparentForInput
    assert menu.theme_actions["high_contrast"].isChecked() and not menu.theme_actions["system"].isChecked()
    assert window.panel.text_view.theme == "high_contrast"
    saved = window.settings_store.load()
    assert saved.overlay_click_through and saved.caption_theme == "high_contrast"
    menu.click_through_action.trigger()  # and back from the menu
    assert not window.settings.overlay_click_through
    assert not window.overlay.windowFlags() & Qt.WindowType.WindowTransparentForInput


def test_a_dragged_overlay_keeps_its_place_on_disk_at_once(qtbot, window) -> None:  # type: ignore[no-untyped-def]
    window.view_menu.overlay_action.trigger()
    overlay = window.overlay
    qtbot.waitUntil(overlay.isVisible)
    overlay.move(70, 80)
    qtbot.mousePress(overlay, Qt.MouseButton.LeftButton, pos=QPoint(5, 5))
    qtbot.mouseRelease(overlay, Qt.MouseButton.LeftButton, pos=QPoint(5, 5))
    saved = window.settings_store.load()
    screen = overlay.screen().name()
    assert saved.overlay_position == "custom" and saved.overlay_custom_positions == {screen: [70, 80]}
    assert (overlay.x(), overlay.y()) == (70, 80)


def test_the_hotkey_shows_in_the_dictation_menu_when_it_changes(window) -> None:  # type: ignore[no-untyped-def]
    window.settings.push_to_talk_hotkey = "<ctrl>+<f9>"
    assert "Ctrl+F9" in window.push_to_talk.action.text()
