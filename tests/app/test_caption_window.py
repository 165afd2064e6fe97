"""The caption window end to end: a recording played through the live pipeline, the real worker and the
bundled demo model; real words must appear in the window, the overlay and the exported files."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from app.live.controller import LiveController
from app.live.journal import read_session, sessions_dir, unfinished_sessions
from app.live.sources import ArraySource
from app.main_window import MainWindow
from app.model_choices import AppState
from app.settings import SettingsStore
from inference.audio.io import load_audio_file
from inference.client import WorkerClient
from inference.contract import Delta, Snapshot, SpeechEnd
from inference.paths import AppPaths
from tests.app.windows import caption_window
from tests.conftest import REPO_ROOT

SAMPLES = REPO_ROOT / "resources" / "samples"
FIRST = "emma quickly closed the early bottle and sang"
SECOND = "there are twenty hearts in the garden"


@pytest.fixture
def speech() -> np.ndarray:
    gap = np.zeros(16000, np.float32)
    one, two = (load_audio_file(SAMPLES / f"demo_sample_{i}.wav") for i in (1, 2))
    return np.concatenate([gap, one, gap, two, gap])


@pytest.fixture
def window(qtbot, speech: np.ndarray):  # type: ignore[no-untyped-def]
    win = caption_window(qtbot, lambda _device: ArraySource(speech, "test recording", speed=6.0))
    yield win
    win.close()


def run_session(qtbot, window: MainWindow) -> None:  # type: ignore[no-untyped-def]
    if window.panel.device_combo.currentData() is None:
        window.panel.device_combo.addItem("test recording", "test")
        window.panel.device_combo.setCurrentIndex(window.panel.device_combo.count() - 1)
    with qtbot.waitSignal(window.controller.session_finished, timeout=60000):
        window.captions.start()
        qtbot.waitUntil(lambda: window.controller.state == "running", timeout=30000)


def test_live_captions_from_a_recording_reach_the_window_overlay_and_exports(
    qtbot, window, speech, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    # The demo model captions segment by segment (it drops words in long windows): each pause commits the
    # sentence before it, exactly as the model transcribes that sentence alone.
    expected = f"{FIRST} {SECOND}"
    window.view_menu.set_overlay_visible(True)
    run_session(qtbot, window)
    # committed live, then completed by the final transcript; the pause between the sentences starts a paragraph
    assert window.panel.caption_text() == f"{FIRST}\n{SECOND}"
    assert "garden" in window.overlay.displayed_text()
    session = window.controller.session
    assert session.committed_text.strip() == expected and session.provisional == {}
    assert [s.text.strip() for s in session.segments] == [FIRST, SECOND] and all(
        s.closed for s in session.segments
    )
    assert window.panel.start_button.text() == "Start" and "latency p50" in window.panel.status_label.text()
    p50, p95 = window.controller.latency_summary()  # type: ignore[misc]
    assert 0 < p50 <= p95 < 10

    srt = window.sessions.export_to(tmp_path / "talk.srt").read_text()
    assert srt.startswith("1\n00:00:0") and "emma quickly" in srt
    assert window.sessions.export_to(tmp_path / "talk.txt").read_text() == expected + "\n"
    data = json.loads(window.sessions.export_to(tmp_path / "talk.json").read_text())
    assert data["text"] == expected
    assert data["words"][0]["word"] == "emma" and data["words"][0]["start"] >= 0.9  # stream time, not 0

    saved, model = read_session(next(sessions_dir(window.paths.data).glob("*.jsonl")))
    assert saved.closed and model.committed_text.strip() == expected
    assert unfinished_sessions(window.paths.data) == []


def test_int8_weights_picked_in_the_view_menu_caption_the_recording(qtbot, window) -> None:  # type: ignore[no-untyped-def]
    """Parakeet's int8 weights (ONNX Runtime's CPU kernels) from the menu: saved, loaded by the real worker on the
    CPU backend, and the demo model still captions both sentences exactly."""
    assert window.panel.model_combo.currentData().session_options == ()
    window.view_menu.weights_actions["int8"].trigger()
    choice = window.panel.model_combo.currentData()
    assert dict(choice.session_options) == {"weight_type": "int8", "conv_weight_type": "int8"}
    assert choice.backend == "cpu" and choice.family == "parakeet_tdt"
    assert window.settings_store.load().parakeet_weights == "int8"
    assert (
        window.view_menu.weights_actions["int8"].isChecked()
        and not window.view_menu.weights_actions["native"].isChecked()
    )
    run_session(qtbot, window)
    assert window.panel.caption_text() == f"{FIRST}\n{SECOND}"
    window.view_menu.weights_actions["native"].trigger()
    assert window.panel.model_combo.currentData().session_options == ()


def test_translation_is_offered_only_for_models_that_translate(qtbot, window) -> None:  # type: ignore[no-untyped-def]
    action = window.view_menu.translate_action
    assert window.panel.model_combo.currentData().family == "parakeet_tdt"
    assert not action.isEnabled() and "(Whisper models only)" in action.text()
    assert "does not translate" in action.statusTip()
    action.setEnabled(True)  # as if a Whisper model had been chosen
    action.trigger()
    assert window.settings_store.load().translate_captions
    window.view_menu.update_translate()  # the demo model is still chosen: off again, the choice kept
    assert not action.isEnabled() and window.settings.translate_captions
    run_session(qtbot, window)  # the demo model is not asked to translate: its captions are unchanged
    assert window.panel.caption_text() == f"{FIRST}\n{SECOND}"


def test_a_whisper_model_captions_translated_when_asked(qtbot, window) -> None:  # type: ignore[no-untyped-def]
    import io

    from inference.cli import main as cli_main
    from tests.whisper_ct2.whisper_fixtures import MODEL80

    assert cli_main(["models", "import", str(MODEL80), "--id", "tiny_whisper"], out=io.StringIO()) == 0
    window.models.fill()
    combo = window.panel.model_combo
    combo.setCurrentIndex(next(i for i in range(combo.count()) if combo.itemData(i).family == "whisper_ct2"))
    action = window.view_menu.translate_action
    assert action.isEnabled() and "Whisper models only" not in action.text()
    action.trigger()
    started: list = []
    start = window.controller.start
    window.controller.start = lambda choice, source: (started.append(choice), start(choice, source))
    run_session(qtbot, window)
    assert ("task", "translate") in started[0].request_options  # the live segments are translated
    assert window.controller.state == "idle"


def test_provisional_text_is_styled_apart_and_replaced_in_place(qtbot, window) -> None:  # type: ignore[no-untyped-def]
    session = window.controller.session
    window.captions.bind(session)
    session.apply([Delta("hello", 0, 0.0, 0.5), Snapshot(" wor", 1, 0.5, None)])
    assert window.panel.caption_text() == "hello wor"
    session.apply([Snapshot(" world and", 1, 0.5, None)])
    assert window.panel.caption_text() == "hello world and"
    cursor = window.panel.text_view.textCursor()
    cursor.setPosition(len("hello w"))
    assert cursor.charFormat().fontItalic()  # provisional: italic
    cursor.setPosition(len("hel"))
    assert not cursor.charFormat().fontItalic()  # committed: plain
    session.apply(
        [Delta(" world", 1, 0.5, 1.0), Snapshot(" and", 1, 1.0, None), SpeechEnd(1, 0.5, 1.2, "world and")]
    )
    assert window.panel.caption_text() == "hello world and"
    assert session.provisional == {}


def test_the_controls_fit_their_text_at_the_default_window_size(qtbot, window) -> None:  # type: ignore[no-untyped-def]
    from PySide6.QtWidgets import QStyle, QStyleOptionComboBox

    panel = window.panel
    panel.model_combo.addItem("Demo: synthetic English only (bundled) with a very long package name", None)
    panel.model_combo.setCurrentIndex(panel.model_combo.count() - 1)
    qtbot.waitUntil(lambda: panel.context_edit.width() > 0 and window.isVisible())
    assert (window.width(), window.height()) == (820, 480)  # the default size
    for edit in (panel.language_edit, panel.context_edit):  # the hint is read whole, not "context: n…"
        hint = edit.fontMetrics().horizontalAdvance(edit.placeholderText())
        assert edit.width() >= hint + 8, (edit.placeholderText(), edit.width(), hint)
    for combo in (panel.device_combo, panel.model_combo):
        option = QStyleOptionComboBox()
        combo.initStyleOption(option)
        field = combo.style().subControlRect(
            QStyle.ComplexControl.CC_ComboBox, option, QStyle.SubControl.SC_ComboBoxEditField, combo
        )
        shown = combo.shown_text()
        assert combo.fontMetrics().horizontalAdvance(shown) <= field.width(), shown
        if shown != combo.currentText():  # too long: elided in the middle, its start and end kept whole
            head, tail = shown.split("…")
            assert combo.currentText().startswith(head) and combo.currentText().endswith(tail), shown
            assert combo.currentText() in combo.toolTip()
    name = "Demo: synthetic English only (bundled) with a very long package name"
    assert panel.model_combo.shown_text() != name and panel.model_combo.toolTip() == f"Model: {name}"
    button = panel.start_button
    assert button.fontMetrics().horizontalAdvance("Loading…") < button.width()  # its longest label


def test_autoscroll_pauses_while_the_user_reads_back(qtbot, window) -> None:  # type: ignore[no-untyped-def]
    session = window.controller.session
    window.captions.bind(session)
    for i in range(200):
        session.apply([Delta(f" line {i} " + "word " * 12, i)])
    bar = window.panel.text_view.verticalScrollBar()
    assert bar.maximum() > 0 and bar.value() == bar.maximum()
    bar.setValue(0)
    session.apply([Delta(" more text", 500)])
    assert bar.value() == 0  # the reader's position is kept
    bar.setValue(bar.maximum())
    session.apply([Delta(" and more", 501)])
    assert bar.value() == bar.maximum()


def test_a_session_cut_by_a_crash_is_offered_back(qtbot, window, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    from PySide6.QtWidgets import QMessageBox

    from app.live.journal import SessionJournal

    journal = SessionJournal(sessions_dir(window.paths.data), "Demo", "microphone")
    journal.record(
        [Delta("saved before the crash", 0, 0.0, 1.0), SpeechEnd(0, 0.0, 1.0, "saved before the crash")]
    )
    # no close(): the process died here; a half-written last line is what a power cut leaves
    with journal.path.open("a") as handle:
        handle.write('{"type": "delta", "segm')
    asked: list[str] = []
    monkeypatch.setattr(
        QMessageBox, "question", lambda *args, **_kw: asked.append(args[2]) or QMessageBox.StandardButton.Yes
    )
    window.sessions.offer_recovery()
    assert asked and "did not end cleanly" in asked[0]
    assert window.panel.caption_text() == "saved before the crash"
    assert unfinished_sessions(window.paths.data) == []  # offered once
    window.sessions.offer_recovery()
    assert len(asked) == 1


def test_a_saved_session_gone_before_it_is_opened_is_explained_not_raised(qtbot, window) -> None:  # type: ignore[no-untyped-def]
    gone = (
        sessions_dir(window.paths.data) / "2026-12-01T11-52-03.jsonl"
    )  # listed, then deleted: was an OSError
    window.sessions.open_saved(gone)
    assert window.panel.status_label.text().startswith("Could not open 2026-12-01T11-52-03.jsonl")


def test_a_missing_model_or_input_is_explained_not_raised(qtbot, window) -> None:  # type: ignore[no-untyped-def]
    window.panel.model_combo.clear()
    window.panel.model_combo.addItem("(no model)", None)
    window.captions.start()
    assert "no model" in window.panel.status_label.text() and window.controller.state == "idle"


def test_input_file_option(capsys) -> None:  # type: ignore[no-untyped-def]
    from app.launcher import main

    assert main(["--input-file", "/no/such/recording.wav"]) == 2
    assert "input file not found: /no/such/recording.wav" in capsys.readouterr().err


def test_paragraphs_at_pauses_times_text_size_and_theme(qtbot, window) -> None:  # type: ignore[no-untyped-def]
    session = window.controller.session
    window.captions.bind(session)
    session.apply(
        [
            Delta("first part", 0, 0.0, 1.0),
            SpeechEnd(0, 0.0, 1.0, "first part"),
            Delta(" goes on", 1, 1.2, 2.0),
            SpeechEnd(1, 1.2, 2.0, "goes on"),  # 0.2 s later: same paragraph
            Delta(" after a pause", 2, 4.0, 5.0),
            Snapshot(" and", 2),
        ]
    )
    assert window.panel.caption_text() == "first part goes on\nafter a pause and"
    window.view_menu.timestamps_action.setChecked(True)
    assert window.panel.caption_text() == "[00:00] first part\n[00:01] goes on\n[00:04] after a pause and"
    window.view_menu.timestamps_action.setChecked(False)
    size = window.panel.text_view.font().pointSize()
    window.view_menu.change_font_size(4)
    assert (
        window.panel.text_view.font().pointSize() == size + 4
        and window.settings_store.load().caption_font_size == size + 4
    )
    window.view_menu.set_caption_theme("dark")
    assert (
        "#1e1e1e" in window.panel.text_view.styleSheet()
        and window.settings_store.load().caption_theme == "dark"
    )
    assert (
        window.panel.caption_text() == "first part goes on\nafter a pause and"
    )  # the text survives the redraw


def test_a_recording_opened_or_dropped_is_captioned_fast_with_progress(qtbot, speech, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    import soundfile
    from PySide6.QtCore import QMimeData, QPoint, QPointF, Qt, QUrl
    from PySide6.QtGui import QDropEvent

    wav = tmp_path / "talk.wav"
    soundfile.write(wav, speech, 16000)
    paths = AppPaths.from_environment().ensure()
    win = MainWindow(AppState.load(paths), SettingsStore(paths), LiveController(WorkerClient, paths.data))
    qtbot.addWidget(win)
    win.show()
    seen: list[tuple[str, bool, str]] = []

    def running(state: str, _message: str) -> None:  # the pipeline exists: what a progress tick shows now
        if state == "running" and not seen:
            win.progress.update()
            pipeline = win.controller.pipeline
            seen.append(
                (
                    win.progress.bar.format(),
                    win.progress.bar.isVisible(),
                    pipeline.backlog.mode if pipeline else "",
                )
            )

    win.controller.state_changed.connect(running)
    with qtbot.waitSignal(win.controller.session_finished, timeout=120000):
        win.recordings.open(wav, fast=True)
    assert win.panel.caption_text() == f"{FIRST}\n{SECOND}"
    assert win.panel.device_combo.currentText() == "Recording: talk.wav (fast)"
    assert "talk.wav" not in str(
        win.settings.input_device
    )  # a recording does not replace the remembered microphone
    ((text, visible, backlog),) = seen
    # Paced by the model (the source waits, nothing is refused), with its progress shown.
    assert (
        backlog == "block" and visible and text.split(" · ")[0].endswith(f" of {speech.size / 16000:.0f} s")
    ), seen
    assert not win.progress.bar.isVisible() and not win.progress.timer.isActive()  # finished: gone
    saved, model = read_session(max(sessions_dir(paths.data).glob("*.jsonl")))
    assert saved.closed and model.committed_text.strip() == f"{FIRST} {SECOND}"
    # Dropping the file on the window captions it again (in real time).
    mime = QMimeData()
    mime.setUrls([QUrl.fromLocalFile(str(wav))])
    drop = QDropEvent(
        QPointF(QPoint(10, 10)),
        Qt.DropAction.CopyAction,
        mime,
        Qt.MouseButton.NoButton,
        Qt.KeyboardModifier.NoModifier,
    )
    win.dropEvent(drop)
    assert win.panel.device_combo.currentText() == "Recording: talk.wav"
    qtbot.waitUntil(lambda: win.controller.state == "running", timeout=30000)
    win.controller.stop()
    qtbot.waitUntil(lambda: win.controller.state == "idle", timeout=30000)
    win.close()


def test_about_names_the_native_build_read_in_a_child_process(qtbot, window) -> None:  # type: ignore[no-untyped-def]
    about = next(a for a in window.menuBar().actions() if a.text() == "&Help").menu().actions()[0]
    about.trigger()
    dialog = window.about
    qtbot.waitUntil(
        lambda: "ggml" in dialog.build.text() or "could not" in dialog.build.text(), timeout=60000
    )
    assert "ggml CPU backend:" in dialog.build.text() and dialog.process.exitCode() == 0
    dialog.close()
