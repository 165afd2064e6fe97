"""Overlay settings and placement, audio-source failures, and the session model's rules, headless."""

from __future__ import annotations

import numpy as np
import pytest
from PySide6.QtCore import Qt
from PySide6.QtGui import QGuiApplication

from app.live.overlay_text import FadeMark, split_at_mark
from app.live.pipeline import LivePipeline, level_dbfs
from app.live.session import SessionModel
from app.live.sources import ArraySource, AudioSourceError, DeviceSource
from app.settings import Settings
from app.views.overlay import CaptionOverlay, _last_lines
from inference.contract import Delta, Done, ErrorEvent, Snapshot, SpeechEnd, Transcript


@pytest.fixture
def overlay(qtbot):  # type: ignore[no-untyped-def]
    widget = CaptionOverlay(Settings(overlay_lines=2, overlay_hold_s=0.5))
    qtbot.addWidget(widget)
    return widget


def test_overlay_never_takes_focus_and_stays_on_top(overlay) -> None:  # type: ignore[no-untyped-def]
    flags = overlay.windowFlags()
    for flag in (
        Qt.WindowType.FramelessWindowHint,
        Qt.WindowType.WindowStaysOnTopHint,
        Qt.WindowType.WindowDoesNotAcceptFocus,
        Qt.WindowType.Tool,
    ):
        assert flags & flag
    assert overlay.testAttribute(Qt.WidgetAttribute.WA_ShowWithoutActivating)
    assert not flags & Qt.WindowType.WindowTransparentForInput
    settings = Settings(
        overlay_click_through=True, overlay_opacity=0.5, overlay_font_size=30, overlay_text_color="#ffff00"
    )
    overlay.apply_settings(settings)
    assert overlay.windowFlags() & Qt.WindowType.WindowTransparentForInput
    assert overlay.windowOpacity() == pytest.approx(0.5, abs=0.01)
    assert overlay.label.font().pointSize() == 30 and "#ffff00" in overlay.label.styleSheet()


def test_overlay_position_presets(overlay) -> None:  # type: ignore[no-untyped-def]
    area = (overlay.screen() or QGuiApplication.primaryScreen()).availableGeometry()
    overlay.apply_settings(Settings(overlay_position="top"))
    assert overlay.y() == area.y() + 24
    overlay.apply_settings(Settings(overlay_position="bottom"))
    assert overlay.geometry().bottom() <= area.bottom() - 23 and overlay.y() > area.height() // 2
    name = overlay.screen().name()
    overlay.apply_settings(Settings(overlay_position="custom", overlay_custom_positions={name: [40, 50]}))
    assert (overlay.x(), overlay.y()) == (40, 50)


def test_overlay_shows_the_last_lines_and_fades(qtbot, overlay) -> None:  # type: ignore[no-untyped-def]
    session = SessionModel()
    overlay.bind(session)
    overlay.show()
    session.apply([Delta(" ".join(f"w{i}" for i in range(100)), 0), Snapshot(" maybe", 1)])
    text = overlay.displayed_text()
    assert "w99" in text and "w0 " not in text and "<i" in text and "maybe" in text
    # Tall enough for both wrapped lines (it was sized for one line when it was created).
    assert overlay.label.height() >= 2 * overlay.label.fontMetrics().lineSpacing()
    overlay.show_captions()
    assert overlay.isVisible()
    # Faded means off the screen (unmapped): without a compositor an opacity change shows nothing.
    qtbot.waitUntil(lambda: not overlay.isVisible(), timeout=3000)  # hold time 0.5 s, then faded
    assert overlay.faded
    session.apply([Delta(" again", 2)])
    assert overlay.isVisible() and not overlay.faded
    overlay.hide_captions()
    session.apply([Delta(" more", 3)])
    assert not overlay.isVisible()  # switched off stays off


def test_back_after_a_fade_the_overlay_shows_only_what_was_said_since(qtbot, overlay) -> None:  # type: ignore[no-untyped-def]
    session = SessionModel()
    overlay.bind(session)
    overlay.show_captions()
    session.apply(
        [Delta("said before the pause", 0, 0.0, 2.0), SpeechEnd(0, 0.0, 2.0, "said before the pause")]
    )
    assert "before the pause" in overlay.displayed_text()
    qtbot.waitUntil(lambda: overlay.faded, timeout=5000)
    session.apply([Snapshot(" and now", 1, 5.0)])  # provisional text brings it back: only the new words
    assert overlay.isVisible() and "and now" in overlay.displayed_text()
    assert "pause" not in overlay.displayed_text()
    session.apply([Delta(" and now this", 1, 5.0, 6.0)])
    assert overlay.displayed_text() == "and now this"
    session.apply(
        [SpeechEnd(0, 0.0, 2.0, "said before the pause, corrected")]
    )  # old text rewritten: not news
    assert overlay.displayed_text() == "and now this"
    overlay.hide_captions()
    overlay.show_captions()  # switched on from the menu: the latest lines, whenever they were said
    assert "pause" in overlay.displayed_text() and "and now this" in overlay.displayed_text()


def test_by_the_setting_the_overlay_keeps_the_last_line_before_a_fade(qtbot, overlay) -> None:  # type: ignore[no-untyped-def]
    overlay.apply_settings(Settings(overlay_lines=3, overlay_hold_s=0.5, overlay_after_fade="last_line"))
    session = SessionModel()
    overlay.bind(session)
    overlay.show_captions()
    old = " ".join(f"old{i}" for i in range(200))
    session.apply([Delta(old, 0, 0.0, 60.0)])  # an open segment that goes on after the fade
    qtbot.waitUntil(lambda: overlay.faded, timeout=5000)
    session.apply([Delta(" new words", 0, 60.0, 61.0)])
    shown = overlay.displayed_text()
    assert shown.endswith("old199 new words") and "old150 " not in shown  # one line of the old text
    assert (
        overlay.label.heightForWidth(overlay.label.width()) <= 2.5 * overlay.label.fontMetrics().lineSpacing()
    )


def test_the_fade_mark_splits_an_open_segment_and_keeps_closed_ones_whole() -> None:
    session = SessionModel()
    session.apply([Delta("one", 0), SpeechEnd(0, 0.0, 1.0, "one"), Delta(" two", 1)])
    mark = FadeMark.of(session)
    session.apply([Delta(" more", 1), SpeechEnd(0, 0.0, 1.0, "one, fixed"), Delta(" three", 2)])
    assert split_at_mark(session, mark) == ("one, fixed two", " more three")
    assert split_at_mark(session, None) == ("", "one, fixed two more three")


def test_last_lines_keeps_whole_words() -> None:
    committed, provisional = _last_lines("alpha beta gamma delta", "eps", lines=1, width=12)
    assert (committed, provisional) == ("delta", "eps")


def test_the_overlay_shows_no_more_lines_than_asked(qtbot, overlay) -> None:  # type: ignore[no-untyped-def]
    session = SessionModel()
    overlay.bind(session)
    overlay.show_captions()
    session.apply([Delta(" ".join(["caption"] * 400), 0)])
    label = overlay.label
    lines = round(label.heightForWidth(label.width()) / label.fontMetrics().lineSpacing())
    assert 1 <= lines <= 2, lines  # Lines: 2 (it showed 3 with a fixed 60-character estimate)


def test_an_overlay_left_on_is_shown_at_the_next_start(qtbot) -> None:  # type: ignore[no-untyped-def]
    from app.live.controller import LiveController
    from app.main_window import MainWindow
    from app.model_choices import AppState
    from app.settings import SettingsStore
    from inference.client import WorkerClient
    from inference.paths import AppPaths

    paths = AppPaths.from_environment().ensure()
    store = SettingsStore(paths)
    store.save(Settings(overlay_enabled=True))
    window = MainWindow(AppState.load(paths), store, LiveController(WorkerClient, paths.data))
    qtbot.addWidget(window)
    assert window.overlay.isVisible() and window.view_menu.overlay_action.isChecked()
    window.close()


def test_session_rules_for_deltas_snapshots_and_speech_ends() -> None:
    session = SessionModel(clock=lambda: 100.0)
    session.apply([Delta(" hello", 0, 0.0, 0.5), Snapshot(" wor", 0)])
    assert session.committed_text == "hello" and session.provisional_text == "wor"
    session.apply([Delta(" world", 0, 0.5, 1.0)])  # a delta drops its segment's snapshot
    assert session.provisional == {}
    session.apply([SpeechEnd(0, 0.0, 1.1, "hello, world")])  # the speech end's text is authoritative
    assert session.committed_text == "hello, world" and session.segments[0].closed
    session.apply([SpeechEnd(1, 2.0, 3.0, "second")])  # text that only a speech end carried
    assert session.committed_text == "hello, world second"
    session.apply([Done(Transcript("hello, world second and a tail"))])  # finish committed a tail
    assert session.committed_text == "hello, world second and a tail"
    assert session.to_transcript().segments[0].text == "hello, world"
    session.apply([ErrorEvent("worker_restarted", "the worker died", fatal=False)])
    assert session.status.worker == "restarting" and "died" in session.status.message


def test_an_unknown_or_missing_device_is_a_plain_error() -> None:
    source = DeviceSource("no such microphone 12345")
    with pytest.raises(AudioSourceError) as info:
        source.start(lambda _block: None, lambda _reason: None)
    assert "no such microphone" in str(info.value) or "PortAudio" in str(info.value)
    assert info.value.fix


def test_level_meter_reads_dbfs() -> None:
    assert level_dbfs(np.zeros(100, np.float32)) == -100.0
    assert level_dbfs(np.full(100, 0.5, np.float32)) == pytest.approx(-6.02, abs=0.01)


class _UnpluggedSource(ArraySource):
    """Delivers half its audio, then reports the device gone (what PortAudio's finished callback does)."""

    def start(self, sink, on_end) -> None:  # type: ignore[no-untyped-def]
        half = self.samples[: self.samples.size // 2]
        super().__init__(half, self.name, self.speed)
        super().start(sink, lambda _reason: on_end("the input device 'USB mic' stopped delivering audio"))


def test_a_device_that_goes_away_ends_the_session_with_its_text_and_a_reason(qtbot) -> None:  # type: ignore[no-untyped-def]
    from pathlib import Path

    from app.live.controller import LiveController
    from app.model_choices import ModelChoice
    from inference.audio.io import load_audio_file
    from inference.client import WorkerClient
    from inference.paths import AppPaths
    from tests.conftest import REPO_ROOT

    audio = load_audio_file(REPO_ROOT / "resources" / "samples" / "demo_sample_1.wav")
    audio = np.concatenate([np.zeros(8000, np.float32), audio, np.zeros(16000, np.float32)] * 2)
    controller = LiveController(WorkerClient, AppPaths.from_environment().ensure().data)
    messages: list[str] = []
    controller.state_changed.connect(lambda _state, message: messages.append(message))
    try:
        with qtbot.waitSignal(controller.session_finished, timeout=60000):
            controller.start(
                ModelChoice("Demo", REPO_ROOT / "resources" / "demo_model", "parakeet_tdt"),
                _UnpluggedSource(audio, "USB mic", speed=8.0),
            )
        assert any("stopped delivering audio" in m for m in messages)
        assert controller.session.committed_text.startswith("emma quickly")  # what was said before is kept
        assert controller.state == "idle"
        assert Path(controller.data_dir).exists()
    finally:
        controller.shutdown()


def test_pipeline_capture_times_follow_the_stream() -> None:
    class _Engine:
        def open_stream(self, **_kwargs):  # type: ignore[no-untyped-def]
            raise AssertionError("not used")

    clock = iter([10.0, 10.02, 10.04])
    pipeline = LivePipeline(_Engine(), ArraySource(np.zeros(1)), lambda _e: None, clock=lambda: next(clock))  # type: ignore[arg-type]
    pipeline.running = True
    for _ in range(3):
        pipeline._on_audio(np.zeros(320, np.float32))  # 20 ms blocks, captured 20 ms apart
    assert pipeline.capture_time(0.0) == pytest.approx(10.0 - 0.02)
    assert pipeline.capture_time(0.05) == pytest.approx(10.04 - 0.02 + 0.01)


def test_overlay_settings_apply_live_save_on_ok_and_restore_on_cancel(qtbot) -> None:  # type: ignore[no-untyped-def]
    from app.main_window import MainWindow
    from app.model_choices import AppState
    from app.settings import SettingsStore
    from inference.paths import AppPaths

    paths = AppPaths.from_environment().ensure()
    window = MainWindow(AppState.load(paths), SettingsStore(paths))
    qtbot.addWidget(window)
    window.view_menu.open_overlay_settings()
    dialog = window.view_menu.overlay_settings
    dialog.font_size.setValue(40)
    dialog.lines.setValue(3)
    dialog.set_colour("overlay_background", "#123456")
    assert window.overlay.label.font().pointSize() == 40  # applied while the dialog is open
    assert "#123456" in window.overlay.label.styleSheet()
    dialog.accept()
    saved = SettingsStore(paths).load()
    assert (saved.overlay_font_size, saved.overlay_lines, saved.overlay_background) == (40, 3, "#123456")
    window.view_menu.open_overlay_settings()
    window.view_menu.overlay_settings.font_size.setValue(12)
    window.view_menu.overlay_settings.reject()
    assert window.overlay.label.font().pointSize() == 40 and window.settings.overlay_font_size == 40


def test_changing_the_model_offers_that_family_s_options(qtbot, tmp_path) -> None:  # type: ignore[no-untyped-def]
    from pathlib import Path

    from app.main_window import MainWindow
    from app.model_choices import AppState, ModelChoice
    from app.settings import SettingsStore
    from inference.paths import AppPaths

    paths = AppPaths.from_environment().ensure()
    window = MainWindow(AppState.load(paths), SettingsStore(paths))
    qtbot.addWidget(window)
    window.panel.model_combo.addItem("R2T2", ModelChoice("R2T2", Path(tmp_path), "confucius4_r2t2"))
    window.panel.model_combo.setCurrentIndex(0)
    assert not window.panel.language_edit.isEnabled()  # Parakeet picks its language itself
    window.panel.model_combo.setCurrentIndex(window.panel.model_combo.count() - 1)
    assert window.panel.language_edit.isEnabled() and window.panel.context_edit.isEnabled()  # R2T2 takes both


def test_a_device_that_goes_away_is_replaced_and_the_session_goes_on(qtbot) -> None:  # type: ignore[no-untyped-def]
    from app.live.controller import LiveController
    from app.model_choices import ModelChoice
    from inference.audio.io import load_audio_file
    from inference.client import WorkerClient
    from inference.paths import AppPaths
    from tests.conftest import REPO_ROOT

    one = load_audio_file(REPO_ROOT / "resources" / "samples" / "demo_sample_1.wav")
    two = load_audio_file(REPO_ROOT / "resources" / "samples" / "demo_sample_2.wav")
    gap = np.zeros(16000, np.float32)
    replacements: list[ArraySource] = []

    def reconnect(_lost):  # type: ignore[no-untyped-def]
        replacements.append(ArraySource(np.concatenate([two, gap, gap]), "built-in microphone", speed=8.0))
        return replacements[-1]

    controller = LiveController(WorkerClient, AppPaths.from_environment().ensure().data, reconnect=reconnect)
    messages: list[str] = []
    controller.state_changed.connect(lambda _state, message: messages.append(message))

    class Unplugged(ArraySource):
        def start(self, sink, on_end) -> None:  # type: ignore[no-untyped-def]
            super().start(sink, lambda _reason: on_end("the input device 'USB mic' stopped delivering audio"))

    try:
        with qtbot.waitSignal(controller.session_finished, timeout=90000):
            controller.start(
                ModelChoice(
                    "Demo", REPO_ROOT / "resources" / "demo_model", "parakeet_tdt", stream_mode="segmented"
                ),
                Unplugged(np.concatenate([gap, one, gap]), "USB mic", speed=8.0),
            )
        assert any("now listening on built-in microphone" in m for m in messages)
        assert replacements and replacements[0].played_samples == replacements[0].samples.size
        text = controller.session.committed_text.strip()
        words_said = text.replace(
            text[text.index(" […") : text.index("…]") + 2], ""
        )  # the gap marker (test_device_gap)
        assert (
            words_said
            == "emma quickly closed the early bottle and sang there are twenty hearts in the garden"
        )
    finally:
        controller.shutdown()


def test_exports_take_the_filter_s_extension_and_the_user_s_umask(tmp_path) -> None:  # type: ignore[no-untyped-def]
    import os
    import stat

    from app.live.export import export_session, path_for_filter
    from app.live.session import SessionModel
    from inference.contract import Delta, SpeechEnd

    assert path_for_filter(tmp_path / "notes", "txt") == tmp_path / "notes.txt"
    assert path_for_filter(tmp_path / "notes.srt", "txt") == tmp_path / "notes.srt"  # typed on purpose
    assert path_for_filter(tmp_path / "v1.2", "vtt") == tmp_path / "v1.2.vtt"
    session = SessionModel()
    session.apply([Delta("hello there", 0, 0.0, 1.0), SpeechEnd(0, 0.0, 1.0, "hello there")])
    previous = os.umask(0o022)
    try:
        written = export_session(session, path_for_filter(tmp_path / "notes", "txt"))
    finally:
        os.umask(previous)
    assert written.read_text() == "hello there\n"
    assert stat.S_IMODE(written.stat().st_mode) == 0o644
