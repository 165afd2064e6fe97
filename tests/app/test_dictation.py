"""Push-to-talk: the hotkey state machine, the padding arithmetic, text output with clipboard restoration,
and a whole dictation through the worker with the bundled demo model."""

from __future__ import annotations

import re
import threading
from pathlib import Path

import numpy as np
import pytest

from app.dictation.capture import CaptureSettings, Utterance, UtteranceRecorder
from app.dictation.global_hotkey import session_kind
from app.dictation.hotkey import HotkeyStateMachine
from app.dictation.output import TextOutput, TextStyle, style_text
from inference.contract import SAMPLE_RATE
from inference.errors import UsageError
from tests.conftest import REPO_ROOT

# ------------------------------------------------------------------------------------------ hotkey


def actions(machine: HotkeyStateMachine, events: list[tuple[str, float]]) -> list[str]:
    out = []
    for kind, t in events:
        decision = getattr(machine, kind)(t)
        out.append(decision.action)
    return out


def test_hold_mode_records_while_the_key_is_down_and_ignores_key_repeat() -> None:
    m = HotkeyStateMachine("hold")
    assert actions(m, [("press", 0.0), ("press", 0.1), ("press", 0.2), ("release", 1.0)]) == [
        "start",
        "none",
        "none",
        "stop",
    ]
    assert actions(m, [("release", 1.1)]) == ["none"]  # a stray release


def test_toggle_mode_starts_and_stops_on_presses() -> None:
    m = HotkeyStateMachine("toggle")
    assert actions(m, [("press", 0), ("release", 0.1), ("press", 2), ("release", 2.1)]) == [
        "start",
        "none",
        "stop",
        "none",
    ]


def test_hybrid_mode_a_tap_toggles_a_hold_is_push_to_talk() -> None:
    tap = HotkeyStateMachine("hybrid", hold_threshold_s=0.35)
    assert actions(tap, [("press", 0), ("release", 0.1), ("press", 3), ("release", 3.1)]) == [
        "start",
        "none",
        "stop",
        "none",
    ]
    hold = HotkeyStateMachine("hybrid", hold_threshold_s=0.35)
    assert actions(hold, [("press", 0), ("press", 0.2), ("release", 1.5)]) == ["start", "none", "stop"]


def test_a_lost_release_is_bounded_and_a_press_while_transcribing_starts_anew() -> None:
    m = HotkeyStateMachine("hold", max_hold_s=10)
    assert actions(m, [("press", 0), ("tick", 5), ("tick", 10)]) == ["start", "none", "stop"]
    assert actions(m, [("press", 11), ("release", 12)]) == ["start", "stop"]  # the next dictation works
    assert m.toggle(20).action == "start" and m.toggle(21).action == "stop"
    with pytest.raises(ValueError, match="unknown push-to-talk mode"):
        HotkeyStateMachine("sometimes")


def test_the_session_kind_decides_how_the_hotkey_works() -> None:
    assert session_kind({"XDG_SESSION_TYPE": "wayland", "WAYLAND_DISPLAY": "wayland-0", "DISPLAY": ":0"}) in (
        "wayland",
        "windows",
        "macos",
    )
    assert session_kind({"DISPLAY": ":1"}) in ("x11", "windows", "macos")


# ------------------------------------------------------------------------------------------ capture


@pytest.mark.parametrize("block", [160, 320, 1000])
def test_an_utterance_is_exactly_pre_roll_plus_held_plus_trailing_plus_padding(block: int) -> None:
    settings = CaptureSettings(pre_roll_s=0.5, trailing_s=0.3, padding_s=0.3)
    done: list[Utterance] = []
    recorder = UtteranceRecorder(settings, done.append)
    signal = np.arange(20 * SAMPLE_RATE, dtype=np.float32) / 1e6  # a ramp: every sample is recognisable
    position = 0

    def feed(seconds: float) -> None:
        nonlocal position
        end = position + int(seconds * SAMPLE_RATE)
        while position < end:
            step = min(block, end - position)
            recorder.feed(signal[position : position + step])
            position += step

    feed(2.0)  # before the key: only the last 0.5 s is kept
    pressed_at = position
    recorder.start()
    feed(1.7)
    released_at = position
    recorder.stop(now=123.0)
    feed(1.0)  # only 0.3 s of this is taken
    (utterance,) = done
    assert utterance.pre_roll_samples == 8000 and utterance.trailing_samples == 4800
    assert utterance.padding_samples == 4800 and utterance.held_samples == released_at - pressed_at
    assert utterance.audio.size == 8000 + (released_at - pressed_at) + 4800 + 4800
    np.testing.assert_array_equal(
        utterance.audio[: utterance.audio.size - 4800], signal[pressed_at - 8000 : released_at + 4800]
    )
    assert not utterance.audio[-4800:].any() and utterance.released_at == 123.0


def test_capture_settings_have_bounds() -> None:
    with pytest.raises(UsageError, match="trailing_s must be between 0 and 2"):
        CaptureSettings(trailing_s=5)


# ------------------------------------------------------------------------------------------ output


class FakeKeys:
    def __init__(self, clipboard) -> None:  # type: ignore[no-untyped-def]
        self.clipboard = clipboard
        self.pasted: list[str] = []
        self.typed: list[str] = []

    def paste(self) -> None:
        self.pasted.append(self.clipboard.text())  # what the focused app reads when it handles Ctrl+V

    def type(self, text: str) -> None:
        self.typed.append(text)


def test_style_capitalises_and_adds_the_separator() -> None:
    assert style_text("  hello there ", TextStyle()) == "Hello there "
    assert style_text("hello", TextStyle(capitalize=False, trailing="\n")) == "hello\n"
    assert style_text("   ", TextStyle()) == ""


def _users_clipboard(clipboard):  # type: ignore[no-untyped-def]
    from PySide6.QtCore import QMimeData

    original = QMimeData()
    original.setText("the user's own text")
    original.setHtml("<b>the user's own text</b>")
    original.setData("application/x-captioneer-test", b"\x00\x01binary")
    clipboard.setMimeData(original)


def _assert_users_clipboard_is_back(clipboard) -> None:  # type: ignore[no-untyped-def]
    restored = clipboard.mimeData()
    assert restored.text() == "the user's own text" and "<b>" in restored.html()
    assert bytes(restored.data("application/x-captioneer-test").data()) == b"\x00\x01binary"


def _deliver(qtbot, output: TextOutput, text: str) -> tuple[str, str]:  # type: ignore[no-untyped-def]
    done: list[tuple[str, str]] = []
    output.deliver(text, lambda how, error: done.append((how, error)))
    qtbot.waitUntil(lambda: bool(done), timeout=10000)
    return done[0]


def test_paste_restores_every_clipboard_format_after_the_paste_was_read(qapp, qtbot) -> None:  # type: ignore[no-untyped-def]
    clipboard = qapp.clipboard()
    _users_clipboard(clipboard)
    keys = FakeKeys(clipboard)
    output = TextOutput("paste", clipboard, keys, timeout_s=5.0)
    assert _deliver(qtbot, output, "Dictated words ") == ("pasted", "")
    assert keys.pasted == ["Dictated words "]  # the app pasted the dictation
    assert output.last_paste["reason"] == "read" and output.last_paste["restored_after_s"] < 2.0
    _assert_users_clipboard_is_back(clipboard)
    assert _deliver(qtbot, TextOutput("copy", clipboard, None), "copied only") == ("copied", "")
    assert clipboard.text() == "copied only"
    typing = TextOutput("type", None, keys)
    assert _deliver(qtbot, typing, "typed words") == ("typed", "") and keys.typed == ["typed words"]


class DelayedReader:
    """Ctrl+V reaches an app that reads the clipboard only ``delay_ms`` later (a busy app)."""

    def __init__(self, clipboard, delay_ms: int) -> None:  # type: ignore[no-untyped-def]
        self.clipboard, self.delay_ms = clipboard, delay_ms
        self.pasted: list[str] = []

    def paste(self) -> None:
        from PySide6.QtCore import QTimer

        QTimer.singleShot(self.delay_ms, lambda: self.pasted.append(self.clipboard.text()))

    def type(self, text: str) -> None:
        raise AssertionError("not used")


def test_the_clipboard_is_not_restored_before_a_slow_app_reads_the_paste(qapp, qtbot) -> None:  # type: ignore[no-untyped-def]
    clipboard = qapp.clipboard()
    _users_clipboard(clipboard)
    slow = DelayedReader(clipboard, delay_ms=900)  # far longer than the grace after a read
    output = TextOutput("paste", clipboard, slow, grace_s=0.1, timeout_s=5.0)
    assert _deliver(qtbot, output, "Dictated words") == ("pasted", "")
    assert slow.pasted == ["Dictated words"]  # a fixed 250 ms wait would have pasted the user's text
    assert output.last_paste["reason"] == "read" and 0.9 <= output.last_paste["restored_after_s"] < 2.0
    _assert_users_clipboard_is_back(clipboard)


def test_a_clipboard_manager_reading_before_the_keys_does_not_count_as_the_paste(qapp, qtbot) -> None:  # type: ignore[no-untyped-def]
    from PySide6.QtCore import QTimer

    clipboard = qapp.clipboard()
    _users_clipboard(clipboard)
    manager_saw: list[str] = []
    clipboard.dataChanged.connect(lambda: QTimer.singleShot(0, lambda: manager_saw.append(clipboard.text())))
    slow = DelayedReader(clipboard, delay_ms=500)
    output = TextOutput("paste", clipboard, slow, settle_s=0.3, grace_s=0.1, timeout_s=5.0)
    assert _deliver(qtbot, output, "Dictated words") == ("pasted", "")
    # Had the manager's read (at once) counted, the clipboard would have been restored 0.1 s later, long
    # before the app read it.
    assert manager_saw[0] == "Dictated words" and slow.pasted == ["Dictated words"]
    assert output.last_paste["restored_after_s"] >= 0.5
    _assert_users_clipboard_is_back(clipboard)


def test_a_paste_nobody_takes_is_not_called_pasted_and_the_text_stays_to_paste(qapp, qtbot) -> None:  # type: ignore[no-untyped-def]
    from app.dictation.output import LEFT_ON_CLIPBOARD

    clipboard = qapp.clipboard()
    _users_clipboard(clipboard)
    deaf = DelayedReader(clipboard, delay_ms=60_000)  # a terminal: Ctrl+V does not paste there
    output = TextOutput("paste", clipboard, deaf, timeout_s=0.4)
    assert _deliver(qtbot, output, "Dictated words") == (LEFT_ON_CLIPBOARD, "")
    assert output.last_paste["reason"] == "timeout" and output.last_paste["reads"] == 0
    assert clipboard.text() == "Dictated words"  # the user pastes it with the terminal's own keys


def _indicated(qtbot, output: TextOutput, text: str) -> list[tuple[str, str]]:  # type: ignore[no-untyped-def]
    """The states a dictation controller shows for one transcribed ``text``, until its outcome is known."""
    from app.dictation.controller import DictationController
    from app.dictation.service import DictationResult
    from app.live.sources import ArraySource

    source = ArraySource(np.zeros(SAMPLE_RATE, np.float32), "unused")
    controller = DictationController(lambda: None, source, output, hotkey=None, listen_for_commands=False)  # type: ignore[arg-type,return-value]
    shown: list[tuple[str, str]] = []
    controller.state_changed.connect(lambda state, detail: shown.append((state, detail)))
    try:
        with qtbot.waitSignal(controller.result_ready, timeout=10000):
            controller.service.on_result(DictationResult(text, 1.0, 0.403))
    finally:
        controller.service.close()
    return shown


def test_the_indicator_says_pasting_until_the_paste_was_read_or_not(qapp, qtbot) -> None:  # type: ignore[no-untyped-def]
    clipboard = qapp.clipboard()
    deaf = DelayedReader(clipboard, delay_ms=60_000)  # no window takes the paste
    shown = _indicated(qtbot, TextOutput("paste", clipboard, deaf, timeout_s=0.5), "lost words")
    assert [state for state, _ in shown] == ["pasting", "copied"]  # never "done" on the way
    assert _indicated(qtbot, TextOutput("paste", clipboard, FakeKeys(clipboard)), "read words") == [
        ("pasting", "2 words"),
        ("done", "pasted · 403 ms after release"),
    ]
    assert _indicated(qtbot, TextOutput("copy", clipboard, None), "") == [("nothing", "no speech heard")]


def test_the_indicator_draws_its_icons_without_font_glyphs(qtbot) -> None:  # type: ignore[no-untyped-def]
    from app.views.dictation_indicator import LOOKS, DictationIndicator

    indicator = DictationIndicator()
    qtbot.addWidget(indicator)
    for state, look in LOOKS.items():
        indicator.show_state(state, "detail")
        text = indicator.label.text()
        # Letters, punctuation and the ellipsis/dash every UI font has; symbols come as pixmaps.
        assert all(ch.isalnum() or ch in " ·…—-,." for ch in text), (state, text)
        pixmap = indicator.icon.pixmap()
        assert (look.icon is None) == (pixmap is None or pixmap.isNull()), state
        assert indicator.hide_timer.isActive() == look.lasts
    indicator.close()


def test_a_clipboard_set_by_someone_else_meanwhile_is_not_overwritten(qapp, qtbot) -> None:  # type: ignore[no-untyped-def]
    clipboard = qapp.clipboard()
    _users_clipboard(clipboard)

    class CopiesDuringThePaste(FakeKeys):
        def paste(self) -> None:
            super().paste()
            self.clipboard.setText("copied by the user meanwhile")

    output = TextOutput("paste", clipboard, CopiesDuringThePaste(clipboard), timeout_s=5.0)
    assert _deliver(qtbot, output, "Dictated words") == ("pasted", "")
    assert output.last_paste["reason"] == "replaced" and clipboard.text() == "copied by the user meanwhile"


def test_deliver_returns_at_once_and_dictations_go_in_one_after_the_other(qapp, qtbot) -> None:  # type: ignore[no-untyped-def]
    import time

    clipboard = qapp.clipboard()
    _users_clipboard(clipboard)
    slow = DelayedReader(clipboard, delay_ms=300)
    output = TextOutput("paste", clipboard, slow, grace_s=0.05, timeout_s=5.0)
    done: list[tuple[str, str]] = []
    started = time.monotonic()
    output.deliver("first", lambda how, error: done.append((how, error)))
    output.deliver("second", lambda how, error: done.append((how, error)))
    assert time.monotonic() - started < 0.1 and output.busy  # the GUI thread is not held while waiting
    qtbot.waitUntil(lambda: len(done) == 2, timeout=10000)
    assert slow.pasted == ["first", "second"] and done == [("pasted", ""), ("pasted", "")]
    _assert_users_clipboard_is_back(clipboard)  # the user's clipboard, not the first dictation


def test_a_failing_key_sender_restores_the_clipboard_and_says_why(qapp, qtbot) -> None:  # type: ignore[no-untyped-def]
    clipboard = qapp.clipboard()
    _users_clipboard(clipboard)

    class NoInjection(FakeKeys):
        def paste(self) -> None:
            raise OSError("no XTest extension")

    how, error = _deliver(qtbot, TextOutput("paste", clipboard, NoInjection(clipboard)), "Dictated words")
    assert how == "" and "could not send the paste keys: no XTest extension" in error
    _assert_users_clipboard_is_back(clipboard)


# ------------------------------------------------------------------------------------------ end to end


def test_a_dictation_through_the_worker_with_the_demo_model() -> None:
    from app.dictation.service import DictationResult, DictationService
    from inference.audio.io import load_audio_file
    from inference.client import WorkerClient

    speech = load_audio_file(REPO_ROOT / "resources" / "samples" / "demo_sample_1.wav")
    with WorkerClient() as client:
        engine = client.load(Path(REPO_ROOT / "resources" / "demo_model"))
        results: list[DictationResult] = []
        got = threading.Event()
        states: list[str] = []

        def on_result(result: DictationResult) -> None:
            results.append(result)
            got.set()

        service = DictationService(
            lambda: engine,
            HotkeyStateMachine("hold"),
            CaptureSettings(),
            lambda state, _detail: states.append(state),
            on_result,
        )
        silence = np.zeros(SAMPLE_RATE, np.float32)
        service.feed(silence)
        service.key_pressed()
        for start in range(0, speech.size, 480):  # 30 ms blocks, as a sound card delivers them
            service.feed(speech[start : start + 480])
        service.key_released()
        service.feed(silence)  # the trailing 0.3 s comes from here
        assert got.wait(60)
        service.close()
    (result,) = results
    assert result.text == "emma quickly closed the early bottle and sang" and not result.error
    assert result.audio_s == pytest.approx(0.5 + speech.size / SAMPLE_RATE + 0.3 + 0.3, abs=0.04)
    assert 0 < result.latency_s < 10
    # The service never says "done": the text is not in before whoever inserts it reports the outcome.
    assert states == ["listening", "transcribing"]


class Watched:
    """The real engine, with a note of each transcription it was asked for (the test kills the worker then)."""

    def __init__(self, engine) -> None:  # type: ignore[no-untyped-def]
        self.engine = engine
        self.calls = 0
        self.asked = threading.Event()

    def transcribe(self, audio, **options):  # type: ignore[no-untyped-def]
        self.calls += 1
        self.asked.set()
        return self.engine.transcribe(audio, **options)


def test_a_dictation_the_worker_dies_under_is_transcribed_again_by_the_next_one(tmp_path: Path) -> None:
    import os
    import signal

    from app.dictation.service import DictationResult, DictationService
    from inference.client import WorkerClient, WorkerPolicy
    from tests.worker.test_worker import FAULTY, wait_until

    hung = tmp_path / "hung"
    with WorkerClient(WorkerPolicy(ping_interval_s=0.2, ping_timeout_s=30.0, backoff_s=(0.0,))) as client:
        watched = Watched(client.load("unused", factory=FAULTY))
        results: list[DictationResult] = []
        got = threading.Event()
        states: list[tuple[str, str]] = []
        service = DictationService(
            lambda: watched,  # type: ignore[arg-type,return-value]
            HotkeyStateMachine("hold"),
            CaptureSettings(),
            lambda state, detail: states.append((state, detail)),
            lambda result: (results.append(result), got.set()),  # type: ignore[func-returns-value]
            # The first worker hangs inside the transcription (and leaves the marker); the next one does not.
            {"fault": "hang", "fault_once": str(hung)},
        )
        speech = np.random.default_rng(1).uniform(-0.3, 0.3, 2 * SAMPLE_RATE).astype(np.float32)
        service.feed(np.zeros(SAMPLE_RATE, np.float32))
        service.key_pressed()
        service.feed(speech)
        service.key_released()
        service.feed(np.zeros(SAMPLE_RATE, np.float32))
        assert watched.asked.wait(60)
        wait_until(hung.exists, timeout=60, what="the first worker to be inside the transcription")
        first = client.pid
        assert first is not None
        os.kill(first, signal.SIGKILL)
        assert got.wait(120)
        service.close()
    (result,) = results
    assert not result.error and re.fullmatch(r"\d+ samples, sum -?\d+\.\d{6}", result.text), result
    assert int(result.text.split()[0]) == round(result.audio_s * SAMPLE_RATE)  # the whole utterance, once
    assert watched.calls == 2 and client.generation == 2
    assert ("transcribing", "the inference worker restarted; transcribing again…") in states


def test_dictation_in_the_window_toggled_from_the_command_line_tool(qtbot) -> None:  # type: ignore[no-untyped-def]
    """The desktop-shortcut path (`captioneer dictate --toggle`, what Wayland users bind) end to end: a
    recording plays as the microphone, two toggles bracket the sentence, the text lands on the clipboard."""
    from PySide6.QtWidgets import QApplication

    from app.dictation.controller import send_toggle
    from app.live.sources import ArraySource
    from app.main_window import MainWindow
    from app.model_choices import AppState
    from app.settings import SettingsStore
    from inference.audio.io import load_audio_file
    from inference.paths import AppPaths

    speech = load_audio_file(REPO_ROOT / "resources" / "samples" / "demo_sample_1.wav")
    silence = np.zeros(SAMPLE_RATE, np.float32)
    source = ArraySource(np.concatenate([silence, speech, *[silence] * 8]), "test microphone", speed=2.0)
    paths = AppPaths.from_environment().ensure()
    window = MainWindow(AppState.load(paths), SettingsStore(paths))
    qtbot.addWidget(window)
    clipboard = QApplication.clipboard()
    window.push_to_talk.set_enabled(True, source=source, output=TextOutput("copy", clipboard, None))
    assert window.push_to_talk.dictation is not None
    qtbot.waitUntil(lambda: source.played_samples >= 0.8 * SAMPLE_RATE, timeout=10000)
    assert send_toggle()  # start: the pre-roll reaches back before the sentence
    qtbot.waitUntil(lambda: window.push_to_talk.dictation.service.recorder.recording, timeout=5000)
    qtbot.waitUntil(lambda: source.played_samples >= SAMPLE_RATE + speech.size + 2000, timeout=20000)
    with qtbot.waitSignal(window.push_to_talk.dictation.result_ready, timeout=60000) as blocker:
        assert send_toggle()  # stop: trailing audio, padding, transcription
    result = blocker.args[0]
    assert result.text == "emma quickly closed the early bottle and sang" and not result.error
    assert clipboard.text() == "Emma quickly closed the early bottle and sang "  # capitalised, spaced
    assert window.push_to_talk.dictation.history[0] is result
    window.push_to_talk.set_enabled(False)
    assert not send_toggle()  # nobody listens any more


def test_the_hotkey_is_captured_from_a_key_press_and_saved(qtbot) -> None:  # type: ignore[no-untyped-def]
    from PySide6.QtGui import QKeySequence

    from app.main_window import MainWindow
    from app.model_choices import AppState
    from app.settings import SettingsStore
    from app.views.dictation_settings import hotkey_from_sequence, sequence_from_hotkey
    from inference.paths import AppPaths

    assert hotkey_from_sequence(QKeySequence("Ctrl+Alt+Space")) == "<ctrl>+<alt>+<space>"
    assert hotkey_from_sequence(QKeySequence("F9")) == "<f9>"
    assert hotkey_from_sequence(QKeySequence("Ctrl+Shift+D")) == "<ctrl>+<shift>+d"
    assert hotkey_from_sequence(sequence_from_hotkey("<ctrl>+<alt>+<space>")) == "<ctrl>+<alt>+<space>"
    paths = AppPaths.from_environment().ensure()
    window = MainWindow(AppState.load(paths), SettingsStore(paths))
    qtbot.addWidget(window)
    window.push_to_talk.open_settings()
    dialog = window.push_to_talk.settings_dialog
    dialog.hotkey.setKeySequence(QKeySequence("Ctrl+F8"))
    dialog.trailing.setValue(450)
    dialog.padding.setValue(5000)  # clamped by the spin box's bounds
    dialog.accept()
    saved = SettingsStore(paths).load()
    assert (saved.push_to_talk_hotkey, saved.trailing_silence_ms, saved.dictation_padding_ms) == (
        "<ctrl>+<f8>",
        450,
        2000,
    )
    assert "Ctrl+F8" in window.push_to_talk.action.text()  # as people write it, not "<ctrl>+<f8>"


def test_dictation_can_use_another_model_than_captions(qtbot) -> None:  # type: ignore[no-untyped-def]
    from app.main_window import MainWindow
    from app.model_choices import AppState, ModelChoice
    from app.settings import SettingsStore
    from inference.paths import AppPaths

    paths = AppPaths.from_environment().ensure()
    window = MainWindow(AppState.load(paths), SettingsStore(paths))
    qtbot.addWidget(window)
    captions = window.panel.model_combo.currentData()
    other = ModelChoice("Other model", REPO_ROOT / "resources" / "demo_model", "parakeet_tdt", threads=1)
    window.panel.model_combo.addItem(other.label, other)
    assert captions is not None
    captions_label = captions.label
    assert window.push_to_talk.choice() is captions  # default: same as captions
    window.push_to_talk.fill_model_menu()
    labels = [a.text() for a in window.push_to_talk.model_menu.actions()]
    assert labels == ["Same as captions", captions_label, "Other model"]
    window.push_to_talk.model_menu.actions()[2].trigger()
    assert (
        window.push_to_talk.choice() is other and SettingsStore(paths).load().dictation_model == "Other model"
    )


def test_an_input_that_ends_mid_utterance_still_delivers_what_was_said() -> None:
    done: list[Utterance] = []
    recorder = UtteranceRecorder(CaptureSettings(pre_roll_s=0.0, trailing_s=0.3, padding_s=0.3), done.append)
    recorder.start()
    recorder.feed(np.ones(1600, np.float32))
    recorder.stop(now=5.0)  # waiting for 0.3 s of trailing audio that will never come
    recorder.feed(np.ones(800, np.float32))
    recorder.finish_now(now=6.0)
    (utterance,) = done
    assert utterance.held_samples == 1600 and utterance.trailing_samples == 800
    assert utterance.audio.size == 1600 + 800 + 4800 and utterance.released_at == 5.0
    recorder.finish_now(now=7.0)  # nothing recording: nothing happens
    assert len(done) == 1


def test_the_dictate_toggle_command_from_another_process_toggles_the_running_app(qtbot) -> None:  # type: ignore[no-untyped-def]
    """`captioneer dictate --toggle` as a desktop shortcut runs it: a separate process, whose line the running
    app reads from its event loop (signals, no waiting on the GUI thread)."""
    import os
    import subprocess
    import sys

    from PySide6.QtWidgets import QApplication

    from app.dictation.controller import DictationController
    from app.live.sources import ArraySource

    source = ArraySource(np.zeros(30 * SAMPLE_RATE, np.float32), "test microphone")
    output = TextOutput("copy", QApplication.clipboard(), None)
    controller = DictationController(lambda: None, source, output, hotkey=None)  # type: ignore[arg-type,return-value]
    controller.start()
    try:
        env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
        command = [sys.executable, "-m", "app.launcher", "dictate", "--toggle"]
        toggle = subprocess.Popen(command, cwd=REPO_ROOT, env=env)
        qtbot.waitUntil(lambda: toggle.poll() is not None, timeout=30000)  # the event loop runs meanwhile
        assert toggle.returncode == 0
        qtbot.waitUntil(
            lambda: controller.service.recorder.recording, timeout=30000
        )  # a loaded machine is slow
    finally:
        controller.service.cancel()
        controller.stop()
    failed = subprocess.run(command, cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert failed.returncode == 1 and "Captioneer is not running with push-to-talk on" in failed.stderr


def test_a_session_that_cannot_send_keys_is_a_clear_error_naming_the_copy_output() -> None:
    """A Wayland session without an X display: pynput cannot load, and the user is told what to pick instead."""
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "PYNPUT_BACKEND", "WAYLAND_DISPLAY")}
    code = (
        "from app.dictation.output import PynputKeys\n"
        "try:\n    PynputKeys()\nexcept Exception as exc:\n    print(type(exc).__name__, exc.message, '|', exc.fix)"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        cwd=REPO_ROOT,
        env={**env, "PYTHONPATH": str(REPO_ROOT)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.stdout.startswith("UsageError this session does not let Captioneer send key presses"), (
        done.stderr
    )
    assert "Copying only" in done.stdout


def test_the_menu_names_the_hotkey_as_people_write_it(qtbot) -> None:  # type: ignore[no-untyped-def]
    from app.views.dictation_settings import hotkey_label

    assert hotkey_label("<ctrl>+<alt>+<space>") == "Ctrl+Alt+Space"
    assert hotkey_label("<ctrl>+<shift>+d") == "Ctrl+Shift+D"


def test_esc_while_capturing_the_hotkey_cancels_instead_of_becoming_the_hotkey(qtbot) -> None:  # type: ignore[no-untyped-def]
    from PySide6.QtCore import Qt

    from app.settings import Settings
    from app.views.dictation_settings import DictationSettingsDialog

    settings = Settings()
    dialog = DictationSettingsDialog(settings)
    qtbot.addWidget(dialog)
    dialog.show()
    dialog.hotkey.setFocus()
    with qtbot.waitSignal(dialog.rejected, timeout=3000):
        qtbot.keyClick(dialog.hotkey, Qt.Key.Key_Escape)
    assert settings.push_to_talk_hotkey == "<ctrl>+<alt>+<space>"
    assert dialog.hotkey.keySequence().toString() == "Ctrl+Alt+Space"


def test_push_to_talk_is_remembered_only_when_the_user_switches_it(qtbot) -> None:  # type: ignore[no-untyped-def]
    from app.live.controller import LiveController
    from app.main_window import MainWindow
    from app.model_choices import AppState
    from app.settings import SettingsStore
    from inference.client import WorkerClient
    from inference.paths import AppPaths

    paths = AppPaths.from_environment().ensure()
    store = SettingsStore(paths)
    window = MainWindow(AppState.load(paths), store, LiveController(WorkerClient, paths.data))
    qtbot.addWidget(window)
    window.push_to_talk.set_enabled = lambda *_args, **_kwargs: None  # type: ignore[method-assign]  # no microphone here
    window.push_to_talk.action.toggled.disconnect()
    window.push_to_talk.action.trigger()  # the user switches it on
    assert store.load().dictation_enabled
    window.push_to_talk.action.setChecked(False)  # a failed start unchecks it: not the user's choice
    assert store.load().dictation_enabled
    again = MainWindow(AppState.load(paths), store, LiveController(WorkerClient, paths.data))
    qtbot.addWidget(again)
    again.push_to_talk.action.toggled.disconnect()
    again.push_to_talk.restore()
    assert again.push_to_talk.action.isChecked()
    assert "Ctrl+Alt+Space" in again.push_to_talk.action.text()
