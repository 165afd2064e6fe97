"""The caption window (thin view): start/stop, input and model pickers, live text, status, export.

It renders the controller's session model: committed text as it grows, the provisional text after it
in grey italics (replaced in place, so nothing flickers), and a status line with latency, real-time
factor, backlog and the worker's state. All work happens in the controller and its threads.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from PySide6.QtCore import Qt, QTimer, Slot
from PySide6.QtGui import QAction, QCloseEvent, QDragEnterEvent, QDropEvent, QGuiApplication, QKeySequence
from PySide6.QtWidgets import (
    QComboBox,
    QFileDialog,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QMainWindow,
    QMessageBox,
    QProgressBar,
    QPushButton,
    QSystemTrayIcon,
    QVBoxLayout,
    QWidget,
)

from app.controller import LiveController, ModelChoice
from app.live.export import EXPORT_FORMATS, export_session, path_for_filter
from app.live.journal import list_sessions, mark_recovered, read_session, unfinished_sessions
from app.live.session import SessionChange, SessionModel
from app.live.sources import AudioSource, AudioSourceError, DeviceSource, FileSource, list_input_devices
from app.models_manager import size_text
from app.settings import Settings, SettingsStore
from app.state import AppState, installed_models
from app.views.caption_view import CaptionView
from app.views.model_banner import ModelBanner
from app.views.overlay import CaptionOverlay, wayland_note
from inference.client import WorkerClient
from inference.contract import SAMPLE_RATE
from inference.errors import CaptioneerError

if TYPE_CHECKING:
    from app.dictation.controller import DictationController
    from app.dictation.service import DictationResult
    from app.views.dictation_indicator import DictationIndicator

log = logging.getLogger("captioneer.app.window")
SourceFactory = Callable[[str | None], AudioSource]
FILE_ITEM = "file:"


FAST_FILE_ITEM = "fastfile:"
FAST_SPEED = 1000.0  # "as fast as the model goes": the model paces the recording (block backlog)
AUDIO_FILTER = "Audio (*.wav *.flac *.ogg *.oga *.opus *.mp3 *.aif *.aiff *.w64 *.rf64);;All files (*)"


def default_source(device: str | None) -> AudioSource:
    if device is not None and device.startswith(FAST_FILE_ITEM):
        return FileSource(Path(device[len(FAST_FILE_ITEM) :]), speed=FAST_SPEED)
    if device is not None and device.startswith(FILE_ITEM):
        return FileSource(Path(device[len(FILE_ITEM) :]))
    return DeviceSource(device)


class MainWindow(QMainWindow):
    def __init__(
        self,
        state: AppState,
        settings_store: SettingsStore | None = None,
        controller: LiveController | None = None,
        source_factory: SourceFactory = default_source,
        input_file: Path | None = None,
    ) -> None:
        super().__init__()
        self.state = state
        self.settings_store = settings_store or SettingsStore(state.paths)
        self.settings: Settings = self.settings_store.load()
        self.controller = controller or LiveController(WorkerClient, state.paths.data, self)
        self.source_factory = source_factory
        self.setWindowTitle("Captioneer")
        self.resize(820, 480)
        self._session: SessionModel | None = None
        self._unsubscribe: Callable[[], None] | None = None

        central = QWidget(self)
        layout = QVBoxLayout(central)
        self._suggested: str | None = None  # the package the first-run banner offers
        self.model_banner = ModelBanner(central, on_download=self._download_suggested,
                                        on_choose=lambda: self.open_models(), on_dismiss=self._dismiss_model_offer)  # fmt: skip
        layout.addWidget(self.model_banner)
        bar = QHBoxLayout()
        self.start_button = QPushButton("Start", central)
        self.start_button.setObjectName("startButton")
        self.start_button.clicked.connect(self.toggle)
        self.device_combo = QComboBox(central)
        self.device_combo.setObjectName("deviceCombo")
        self.device_combo.setToolTip("Audio input")
        self.model_combo = QComboBox(central)
        self.model_combo.setObjectName("modelCombo")
        self.model_combo.setToolTip("Model (File → Models… installs more)")
        self.model_combo.currentIndexChanged.connect(self._model_changed)
        self.language_edit = QLineEdit(central)
        self.language_edit.setPlaceholderText("language (auto)")
        self.language_edit.setMaximumWidth(130)
        self.context_edit = QLineEdit(central)
        self.context_edit.setPlaceholderText("context: names, terms")
        self.level_meter = QProgressBar(central)
        self.level_meter.setObjectName("levelMeter")
        self.level_meter.setRange(-60, 0)
        self.level_meter.setValue(-60)
        self.level_meter.setTextVisible(False)
        self.level_meter.setMaximumWidth(90)
        self.level_meter.setToolTip("Input level")
        for widget in (self.start_button, self.device_combo, self.model_combo, self.language_edit,
                       self.context_edit, self.level_meter):  # fmt: skip
            bar.addWidget(widget)
        layout.addLayout(bar)
        # The model label says which model is in use and how to get real ones (the demo model is a toy).
        self.model_label = QLabel(state.model_summary, central)
        self.model_label.setObjectName("modelLabel")
        self.model_label.setWordWrap(True)
        layout.addWidget(self.model_label)
        self.text_view = CaptionView(central, self.settings.caption_font_size, self.settings.caption_theme,
                                     self.settings.show_timestamps)  # fmt: skip
        layout.addWidget(self.text_view, 1)
        # Below the captions, not in the status bar: a restart's cause and its fix wrap and are read whole.
        self.status_label = QLabel("Ready", central)
        self.status_label.setObjectName("statusLabel")
        self.status_label.setWordWrap(True)
        self.status_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        layout.addWidget(self.status_label)
        self.setCentralWidget(central)
        self.figures_label = QLabel("", self)
        self.figures_label.setObjectName("figuresLabel")
        self.progress = QProgressBar(self)  # a recording's progress (hidden for live input)
        self.progress.setTextVisible(True)
        self.progress.hide()
        self.statusBar().addWidget(self.progress, 1)
        self.statusBar().addPermanentWidget(self.figures_label)
        self._recording_started = 0.0
        self._progress_timer = QTimer(self)
        self._progress_timer.setInterval(250)
        self._progress_timer.timeout.connect(self._update_progress)  # runs while a recording is captioned
        self.setAcceptDrops(True)  # drop a recording on the window to caption it

        self.overlay = CaptionOverlay(self.settings)
        self._closed = False
        self._build_menus()
        self._fill_models()
        self._fill_devices(input_file)
        self.controller.state_changed.connect(self._on_state)
        self.controller.level_changed.connect(self._on_level)
        self.controller.session_finished.connect(self._on_finished)
        self.models_dialog: Any = None  # the models dialog, while open
        self.tray = self._make_tray()
        self._render_all()
        if self.settings.overlay_enabled:  # it was on when the app last closed
            self.overlay.show_captions()

    # ------------------------------------------------------------------ construction
    def _build_menus(self) -> None:
        file_menu = self.menuBar().addMenu("&File")
        self.models_action = QAction("&Models…", self)
        self.models_action.setObjectName("modelsAction")
        self.models_action.triggered.connect(self.open_models)
        file_menu.addAction(self.models_action)
        open_action = QAction("&Open recording…", self)
        open_action.setShortcut(QKeySequence("Ctrl+O"))
        open_action.triggered.connect(lambda: self.open_recording_dialog(fast=False))
        file_menu.addAction(open_action)
        fast_action = QAction("Transcribe recording &fast…", self)
        fast_action.triggered.connect(lambda: self.open_recording_dialog(fast=True))
        file_menu.addAction(fast_action)
        self.export_action = QAction("&Export transcript…", self)
        self.export_action.triggered.connect(self.export_dialog)
        file_menu.addAction(self.export_action)
        self.history_menu = file_menu.addMenu("Past &sessions")
        self.history_menu.aboutToShow.connect(self._fill_history)
        quit_action = QAction("&Quit", self)
        quit_action.triggered.connect(self.close)
        file_menu.addAction(quit_action)
        view_menu = self.menuBar().addMenu("&View")
        self.overlay_action = QAction("Caption &overlay", self, checkable=True)
        self.overlay_action.setChecked(self.settings.overlay_enabled)
        self.overlay_action.toggled.connect(self.set_overlay_visible)
        view_menu.addAction(self.overlay_action)
        self.overlay_settings_action = QAction("Overlay &settings…", self)
        self.overlay_settings_action.triggered.connect(self.open_overlay_settings)
        view_menu.addAction(self.overlay_settings_action)
        self.click_through_action = QAction("Overlay &click-through", self, checkable=True)
        self.click_through_action.setChecked(self.settings.overlay_click_through)
        self.click_through_action.toggled.connect(self._set_click_through)
        view_menu.addAction(self.click_through_action)
        self.segmented_action = QAction("Final text at each &pause (no revisions)", self, checkable=True)
        self.segmented_action.setChecked(self.settings.caption_mode == "segmented")
        self.segmented_action.toggled.connect(self._set_segmented)
        view_menu.addAction(self.segmented_action)
        weights_menu = view_menu.addMenu("Parakeet &weights")
        self.weights_actions: dict[str, QAction] = {}
        for value, label in (("native", "Full precision (f32)"),
                             ("int8", "int8 on the CPU — fastest without a GPU")):  # fmt: skip
            action = weights_menu.addAction(label)
            action.setCheckable(True)
            action.setChecked(self.settings.parakeet_weights == value)
            action.triggered.connect(lambda _checked=False, v=value: self._set_parakeet_weights(v))
            self.weights_actions[value] = action
        self.timestamps_action = QAction("&Timestamps", self, checkable=True)
        self.timestamps_action.setChecked(self.settings.show_timestamps)
        self.timestamps_action.toggled.connect(self._set_timestamps)
        view_menu.addAction(self.timestamps_action)
        size_menu = view_menu.addMenu("Caption text &size")
        for label, step, keys in (("&Larger", 2, "Ctrl++"), ("&Smaller", -2, "Ctrl+-"), ("&Reset", 0, "Ctrl+0")):
            action = size_menu.addAction(label)
            action.setShortcut(QKeySequence(keys))
            action.triggered.connect(lambda _checked=False, d=step: self._change_font_size(d))
        theme_menu = view_menu.addMenu("Caption t&heme")
        self.theme_actions: dict[str, QAction] = {}
        for value, label in (("system", "&System"), ("dark", "&Dark"), ("high_contrast", "&High contrast")):
            action = theme_menu.addAction(label)
            action.setCheckable(True)
            action.setChecked(self.settings.caption_theme == value)
            action.triggered.connect(lambda _checked=False, v=value: self.set_caption_theme(v))
            self.theme_actions[value] = action
        self._build_dictation_menu()
        note = wayland_note()
        if note:
            wayland = QAction(note, self)
            wayland.setEnabled(False)
            view_menu.addAction(wayland)

    def _build_dictation_menu(self) -> None:
        from app.views.dictation_settings import hotkey_label

        menu = self.menuBar().addMenu("&Dictation")
        self.dictation_action = QAction(f"&Push-to-talk ({hotkey_label(self.settings.push_to_talk_hotkey)})", self,
                                        checkable=True)  # fmt: skip
        self.dictation_action.setChecked(False)
        self.dictation_action.toggled.connect(self.set_dictation_enabled)
        self.dictation_action.triggered.connect(self._remember_dictation)  # the user's choice, not a failed start
        menu.addAction(self.dictation_action)
        mode_menu = menu.addMenu("Hotkey &mode")
        for mode, label in (("hold", "Hold to talk"), ("toggle", "Press to start, press to stop"),
                            ("hybrid", "Tap to toggle, hold to talk")):  # fmt: skip
            action = mode_menu.addAction(label)
            action.setCheckable(True)
            action.setChecked(self.settings.push_to_talk_mode == mode)
            action.triggered.connect(lambda _checked=False, m=mode: self._set_setting("push_to_talk_mode", m))
        output_menu = menu.addMenu("&Insert text by")
        for mode, label in (("paste", "Pasting (clipboard restored)"), ("type", "Typing"), ("copy", "Copying only")):
            action = output_menu.addAction(label)
            action.setCheckable(True)
            action.setChecked(self.settings.dictation_output == mode)
            action.triggered.connect(lambda _checked=False, m=mode: self._set_setting("dictation_output", m))
        self.dictation_model_menu = menu.addMenu("Dictation m&odel")
        self.dictation_model_menu.aboutToShow.connect(self._fill_dictation_models)
        settings_action = menu.addAction("Dictation &settings…")
        settings_action.triggered.connect(self.open_dictation_settings)
        self.dictation_history_menu = menu.addMenu("&Recent dictations")
        self.dictation_history_menu.aboutToShow.connect(self._fill_dictation_history)
        self.dictation: DictationController | None = None
        self.indicator: DictationIndicator | None = None

    def _set_setting(self, name: str, value: object) -> None:
        setattr(self.settings, name, value)
        self.settings_store.save(self.settings)
        if self.dictation is not None:  # takes effect when push-to-talk is switched on again
            self.status_label.setText("Dictation settings change when push-to-talk is switched on again.")

    def set_dictation_enabled(self, enabled: bool, source: AudioSource | None = None,
                              output: object | None = None) -> None:  # fmt: skip
        """Switch push-to-talk on (its own microphone stream, the chosen model in the shared worker) or off."""
        from app.dictation.capture import CaptureSettings
        from app.dictation.controller import DictationController
        from app.dictation.output import PynputKeys, TextOutput, TextStyle
        from app.views.dictation_indicator import DictationIndicator

        if not enabled:
            if self.dictation is not None:
                self.dictation.stop()
                self.dictation = None
            return
        choice = self.dictation_choice()
        if choice is None:
            self._show_problem("There is no model for dictation.", "Install one from File → Models….")
            return
        s = self.settings
        try:
            source = source or self.source_factory(self.device_combo.currentData())
            if output is None:
                from PySide6.QtGui import QGuiApplication

                keys = PynputKeys() if s.dictation_output in ("paste", "type") else None
                output = TextOutput(s.dictation_output, QGuiApplication.clipboard(), keys)
            capture = CaptureSettings(s.dictation_pre_roll_ms / 1000, s.trailing_silence_ms / 1000,
                                      s.dictation_padding_ms / 1000)  # fmt: skip
            trailing = {"space": " ", "newline": "\n", "none": ""}.get(s.dictation_trailing, " ")
            self.dictation = DictationController(
                lambda: self.controller.engine_for(choice), source, output,  # type: ignore[arg-type]
                mode=s.push_to_talk_mode, hotkey=s.push_to_talk_hotkey, capture=capture,
                style=TextStyle(s.dictation_capitalize, trailing), parent=self,
            )  # fmt: skip
            if self.indicator is None:
                self.indicator = DictationIndicator()
            self.dictation.state_changed.connect(self.indicator.show_state)
            self.dictation.state_changed.connect(lambda _state, detail: self.status_label.setText(detail))
            self.dictation.start()
        except CaptioneerError as exc:
            self.dictation = None
            self._show_problem(exc.message, exc.fix or "")
            self.dictation_action.setChecked(False)

    def _fill_dictation_models(self) -> None:
        """Dictation may use another model than captions (e.g. R2T2 for accuracy, Parakeet for speed)."""
        self.dictation_model_menu.clear()
        labels = [None] + [self.model_combo.itemData(i).label for i in range(self.model_combo.count())
                           if self.model_combo.itemData(i) is not None]  # fmt: skip
        for label in labels:
            action = self.dictation_model_menu.addAction(label or "Same as captions")
            action.setCheckable(True)
            action.setChecked(self.settings.dictation_model == label)
            action.triggered.connect(lambda _checked=False, value=label: self._set_setting("dictation_model", value))

    def dictation_choice(self) -> ModelChoice | None:
        """The model dictation uses: the one chosen for it, else the captions model."""
        for index in range(self.model_combo.count()):
            choice = self.model_combo.itemData(index)
            if choice is not None and choice.label == self.settings.dictation_model:
                return choice
        return self.model_combo.currentData()

    def open_dictation_settings(self) -> None:
        from app.views.dictation_settings import DictationSettingsDialog

        self.dictation_settings = DictationSettingsDialog(self.settings, self)
        self.dictation_settings.accepted.connect(self._dictation_settings_saved)
        self.dictation_settings.show()

    def _remember_dictation(self, enabled: bool) -> None:
        self.settings.dictation_enabled = enabled
        self.settings_store.save(self.settings)

    def restore_dictation(self) -> None:
        """Switch push-to-talk back on when it was on at the last quit (after the window is shown)."""
        if self.settings.dictation_enabled and not self.dictation_action.isChecked():
            self.dictation_action.setChecked(True)

    def _dictation_settings_saved(self) -> None:
        from app.views.dictation_settings import hotkey_label

        self.settings_store.save(self.settings)
        self.dictation_action.setText(f"&Push-to-talk ({hotkey_label(self.settings.push_to_talk_hotkey)})")
        if self.dictation is not None:  # restart with the new hotkey and times
            self.set_dictation_enabled(False)
            self.set_dictation_enabled(True)

    def _fill_dictation_history(self) -> None:
        self.dictation_history_menu.clear()
        history: list[DictationResult] = list(self.dictation.history) if self.dictation is not None else []
        if not history:
            self.dictation_history_menu.addAction("(nothing dictated yet)").setEnabled(False)
        for result in history:
            label = result.text or result.error or "(no speech)"
            action = self.dictation_history_menu.addAction(f"{label[:70]} — {result.latency_s * 1000:.0f} ms")
            action.triggered.connect(lambda _checked=False, t=result.text: QGuiApplication.clipboard().setText(t))

    def _fill_models(self) -> None:
        self.model_combo.clear()
        try:
            choices = installed_models(self.state.paths, self.settings)
        except CaptioneerError as exc:
            self.model_combo.addItem(f"(no model: {exc.message})", None)
            return
        for choice in choices:
            self.model_combo.addItem(choice.label, choice)
        wanted = self.settings.model
        for index in range(self.model_combo.count()):
            choice = self.model_combo.itemData(index)
            if choice is not None and wanted in (choice.label, str(choice.path)):
                self.model_combo.setCurrentIndex(index)

    def _fill_devices(self, input_file: Path | None) -> None:
        self.device_combo.clear()
        if input_file is not None:
            self.device_combo.addItem(f"Recording: {input_file.name}", FILE_ITEM + str(input_file))
        try:
            devices = list_input_devices()
        except AudioSourceError as exc:
            if input_file is None:
                self.device_combo.addItem(f"(no audio input: {exc.message})", None)
                self.status_label.setText(f"{exc.message} — {exc.fix}")
            return
        if not devices and input_file is None:
            self.device_combo.addItem("(no audio input found)", None)
        for device in devices:
            self.device_combo.addItem(device.name + (" (default)" if device.is_default else ""), device.name)
        if self.settings.input_device:
            index = self.device_combo.findData(self.settings.input_device)
            if index >= 0 and input_file is None:
                self.device_combo.setCurrentIndex(index)

    def _make_tray(self) -> QSystemTrayIcon | None:
        if not QSystemTrayIcon.isSystemTrayAvailable():
            return None
        tray = QSystemTrayIcon(self.windowIcon(), self)
        tray.setToolTip("Captioneer")
        tray.activated.connect(lambda _reason: self.showNormal() if self.isHidden() else self.hide())
        tray.show()
        return tray

    # ------------------------------------------------------------------ start / stop
    @Slot()
    def toggle(self) -> None:
        if self.controller.state in ("idle", "failed"):
            self.start()
        elif self.controller.state == "running":
            self.controller.stop()

    def start(self) -> None:
        choice = self.model_combo.currentData()
        device = self.device_combo.currentData()
        if choice is None:
            self._show_problem("There is no model to caption with.", "Install one from File → Models….")
            return
        if device is None and self.device_combo.count() and self.device_combo.currentText().startswith("(no"):
            self._show_problem(self.device_combo.currentText(), "Connect a microphone or pass --input-file PATH.")
            return
        options = dict(choice.request_options)
        if self.language_edit.isEnabled() and self.language_edit.text().strip():
            options["language"] = self.language_edit.text().strip()
        if self.context_edit.isEnabled() and self.context_edit.text().strip():
            options["context"] = self.context_edit.text().strip()
        # "auto" keeps the model's own preference (the demo model prefers segments); "segmented" forces them.
        mode = "segmented" if self.settings.caption_mode == "segmented" else choice.stream_mode
        choice = ModelChoice(choice.label, choice.path, choice.family, choice.session_options,
                             tuple(sorted(options.items())), choice.backend, choice.threads, mode)  # fmt: skip
        try:
            source = self.source_factory(device)
        except CaptioneerError as exc:
            self._show_problem(exc.message, exc.fix or "")
            return
        self.settings.model = choice.label
        if device is not None and not str(device).startswith(FILE_ITEM):
            self.settings.input_device = str(device)
        self.settings_store.save(self.settings)
        self.controller.start(choice, source)
        self._recording_started = time.monotonic()
        if getattr(source, "total_samples", 0):
            self._progress_timer.start()
        self._bind(self.controller.session)

    # ------------------------------------------------------------------ recordings (open, drop, progress)
    def open_recording_dialog(self, fast: bool) -> None:
        path, _chosen = QFileDialog.getOpenFileName(self, "Caption a recording", str(Path.home()), AUDIO_FILTER)
        if path:
            self.open_recording(Path(path), fast)

    def open_recording(self, path: Path, fast: bool = False) -> None:
        """Caption a recording in the window: in real time (as if it were spoken now) or ``fast`` (as fast as the
        model goes); the same session, autosave and export as live captions."""
        if self.controller.state not in ("idle", "failed"):
            self._show_problem("Captions are running.", "Stop them first, then open the recording.")
            return
        data = (FAST_FILE_ITEM if fast else FILE_ITEM) + str(path)
        label = f"Recording: {path.name}" + (" (fast)" if fast else "")
        index = self.device_combo.findData(data)
        if index < 0:
            self.device_combo.insertItem(0, label, data)
            index = 0
        self.device_combo.setCurrentIndex(index)
        self.start()

    def dragEnterEvent(self, event: QDragEnterEvent) -> None:  # noqa: N802 - Qt naming
        if _dropped_file(event.mimeData()) is not None:
            event.acceptProposedAction()

    def dropEvent(self, event: QDropEvent) -> None:  # noqa: N802 - Qt naming
        path = _dropped_file(event.mimeData())
        if path is not None:
            event.acceptProposedAction()
            self.open_recording(path)

    def _update_progress(self) -> None:
        """A recording's progress and, once the rate is known, the time left."""
        pipeline = self.controller.pipeline
        source = pipeline.source if pipeline is not None else None
        total = getattr(source, "total_samples", 0)
        if self.controller.state == "loading":
            return  # the pipeline (and its source) exists once the model is loaded
        if not total or self.controller.state not in ("running", "stopping"):
            self.progress.hide()
            self._progress_timer.stop()
            return
        played = getattr(source, "played_samples", 0)
        self.progress.setMaximum(total)
        self.progress.setValue(played)
        elapsed = time.monotonic() - self._recording_started
        rate = played / elapsed if elapsed > 0.5 else 0.0  # samples a second, as it really goes (from Start)
        left = f" · about {max(0.0, (total - played) / rate):.0f} s left" if rate > 0 else ""
        self.progress.setFormat(f"{played / SAMPLE_RATE:.0f} of {total / SAMPLE_RATE:.0f} s{left}")
        self.progress.show()

    def _bind(self, session: SessionModel) -> None:
        if self._unsubscribe is not None:
            self._unsubscribe()
        self._session = session
        self._unsubscribe = session.subscribe(self._on_change)
        self.overlay.bind(session)
        self._render_all()

    # ------------------------------------------------------------------ rendering (GUI thread)
    def _on_change(self, change: SessionChange) -> None:
        self.text_view.on_change(change)
        if change.status:
            self._render_status()

    def _render_all(self) -> None:
        self.text_view.show_session(self._session)
        self._render_status()

    def _render_status(self) -> None:
        session = self._session
        if session is None:
            return
        status = session.status
        figures = []
        if status.latency_s is not None:
            figures.append(f"latency {status.latency_s:.2f} s")
        if status.rtf is not None:
            figures.append(f"RTF {status.rtf:.2f}")
        figures.append(f"backlog {status.backlog_s:.1f} s")
        figures.append(f"worker: {status.worker}")
        self.figures_label.setText("  ·  ".join(figures))

    def caption_text(self) -> str:
        return self.text_view.plain_text()

    # ------------------------------------------------------------------ controller signals
    @Slot(str, str)
    def _on_state(self, state: str, message: str) -> None:
        labels = {"idle": "Start", "failed": "Start", "loading": "Loading…", "running": "Stop", "stopping": "Stopping…"}
        self.start_button.setText(labels.get(state, "Start"))
        self.start_button.setEnabled(state in ("idle", "failed", "running"))
        for widget in (self.model_combo, self.device_combo, self.language_edit, self.context_edit):
            widget.setEnabled(state in ("idle", "failed") and (widget is not self.language_edit or
                                                                self._family_takes("language")) and
                              (widget is not self.context_edit or self._family_takes("context")))  # fmt: skip
        if message:
            self.status_label.setText(message)
        if self.tray is not None:
            self.tray.setToolTip(f"Captioneer — {message or state}")

    @Slot(float)
    def _on_level(self, dbfs: float) -> None:
        self.level_meter.setValue(int(max(-60.0, min(0.0, dbfs))))

    @Slot()
    def _on_finished(self) -> None:
        self.level_meter.setValue(-60)
        self.progress.hide()  # a recording's progress ends with its session
        self._progress_timer.stop()
        self._render_all()
        summary = self.controller.latency_summary()
        if summary is not None:
            self.status_label.setText(f"stopped · caption latency p50 {summary[0]:.2f} s, p95 {summary[1]:.2f} s")

    def _model_changed(self, _index: int) -> None:
        self.language_edit.setEnabled(self._family_takes("language"))
        self.context_edit.setEnabled(self._family_takes("context"))

    def _family_takes(self, option: str) -> bool:
        choice = self.model_combo.currentData()
        if choice is None or choice.family is None:
            return False
        from inference.models.spec import load_family_spec

        try:
            return option in load_family_spec(choice.family).request_options
        except CaptioneerError:
            return False

    # ------------------------------------------------------------------ overlay and view settings
    def set_overlay_visible(self, visible: bool) -> None:
        self.settings.overlay_enabled = visible
        self.settings_store.save(self.settings)
        if visible:
            if self._session is not None:
                self.overlay.bind(self._session)
            self.overlay.show_captions()
        else:
            self.overlay.hide_captions()

    def open_overlay_settings(self) -> None:
        from app.views.overlay_settings import OverlaySettingsDialog

        self.overlay_settings = OverlaySettingsDialog(self.settings, self.overlay.apply_settings, self)
        self.overlay_settings.accepted.connect(lambda: self.settings_store.save(self.settings))
        self.overlay_settings.show()

    def _set_click_through(self, enabled: bool) -> None:
        self.settings.overlay_click_through = enabled
        self.settings_store.save(self.settings)
        self.overlay.apply_settings(self.settings)

    def _set_segmented(self, enabled: bool) -> None:
        self.settings.caption_mode = "segmented" if enabled else "auto"  # applies from the next start
        self.settings_store.save(self.settings)

    def _set_parakeet_weights(self, value: str) -> None:
        """Applies from the next start: the model list is rebuilt with the new load options."""
        self.settings.parakeet_weights = value
        self.settings_store.save(self.settings)
        for key, action in self.weights_actions.items():
            action.setChecked(key == value)
        self._fill_models()

    def _change_font_size(self, step: int) -> None:
        size = 14 if step == 0 else max(8, min(72, self.settings.caption_font_size + step))
        self.settings.caption_font_size = size
        self.settings_store.save(self.settings)
        self.text_view.set_font_size(size)

    def set_caption_theme(self, theme: str) -> None:
        self.settings.caption_theme = theme
        self.settings_store.save(self.settings)
        self.text_view.set_theme(theme)
        for value, action in self.theme_actions.items():
            action.setChecked(value == theme)

    def _set_timestamps(self, enabled: bool) -> None:
        self.settings.show_timestamps = enabled
        self.settings_store.save(self.settings)
        self.text_view.set_timestamps(enabled)

    # ------------------------------------------------------------------ export and sessions
    def export_dialog(self) -> None:
        if self._session is None or not self._session.committed_text.strip():
            self._show_problem("There is nothing to export yet.", "Start captions first.")
            return
        labels = {f"{label} (*.{ext})": ext for ext, label in EXPORT_FORMATS.items()}
        suggested = next(name for name, ext in labels.items() if ext == "srt")
        path, chosen = QFileDialog.getSaveFileName(self, "Export transcript", str(Path.home() / "transcript.srt"),
                                                   ";;".join(labels), suggested)  # fmt: skip
        if path:
            with contextlib.suppress(OSError, CaptioneerError):  # export_to showed and logged it
                self.export_to(path_for_filter(Path(path), labels.get(chosen, "txt")))

    def export_to(self, path: Path) -> Path:
        assert self._session is not None
        try:
            return export_session(self._session, path)
        except (OSError, CaptioneerError) as exc:
            log.warning("export to %s failed: %s", path, exc)
            self._show_problem(f"Could not export to {path}: {exc}", "Choose another folder or file name.")
            raise

    def _fill_history(self) -> None:
        self.history_menu.clear()
        sessions = list_sessions(self.state.paths.data)
        if not sessions:
            self.history_menu.addAction("(no past sessions)").setEnabled(False)
        for saved in sessions[:30]:
            action = self.history_menu.addAction(saved.title)
            action.triggered.connect(lambda _checked=False, s=saved: self.open_saved(s.path))

    def open_saved(self, path: Path) -> None:
        """Show a past session read-only (export works on it)."""
        if self.controller.state not in ("idle", "failed"):
            self._show_problem("Stop the live captions first.", "")
            return
        _saved, model = read_session(path)
        self._bind(model)
        self.status_label.setText(f"Past session: {path.name}")

    def offer_recovery(self) -> None:
        """After a crash or power cut: offer the sessions that did not end cleanly."""
        for saved in unfinished_sessions(self.state.paths.data)[:3]:
            answer = QMessageBox.question(
                self, "Recover captions?",
                f"A captioning session did not end cleanly:\n\n{saved.title}\n\nOpen it now? (It stays in "
                "File → Past sessions either way.)",
            )  # fmt: skip
            mark_recovered(saved)
            if answer == QMessageBox.StandardButton.Yes:
                self.open_saved(saved.path)
                return

    # ------------------------------------------------------------------ models dialog
    def open_models(self, select: str | None = None) -> None:
        from app.models_dialog import open_models_dialog

        self.models_dialog = open_models_dialog(self, self.state.paths, select=select)
        self.models_dialog.finished.connect(self.refresh_model_state)

    def offer_models_on_first_run(self) -> None:
        """Without a real model, a banner above the captions offers one; it blocks nothing and, once dismissed,
        stays away."""
        from app.models_dialog import first_run_suggestion

        needed, suggestion = first_run_suggestion(self.state.paths)
        if needed and not self.settings.model_offer_dismissed:
            self._suggested = suggestion.id if suggestion is not None else None
            self.model_banner.offer(f"{suggestion.name} ({size_text(suggestion)})" if suggestion else None)

    def _download_suggested(self) -> None:
        self.open_models(select=self._suggested)

    def _dismiss_model_offer(self) -> None:
        self.model_banner.hide()
        self.settings.model_offer_dismissed = True
        self.settings_store.save(self.settings)

    def refresh_model_state(self) -> None:
        self.state = AppState.load(self.state.paths)
        self.model_label.setText(self.state.model_summary)
        self._fill_models()
        from app.models_dialog import first_run_suggestion

        if not first_run_suggestion(self.state.paths)[0]:
            self.model_banner.hide()  # a real model is installed now

    # ------------------------------------------------------------------ helpers
    def _show_problem(self, message: str, fix: str) -> None:
        self.status_label.setText(f"{message} {fix}".strip())

    def closeEvent(self, event: QCloseEvent) -> None:  # noqa: N802 - Qt naming
        if self._closed:  # a second close (the tray's Quit after the window's): the overlay is already gone
            super().closeEvent(event)
            return
        self._closed = True
        self.settings_store.save(self.settings)
        if self._unsubscribe is not None:  # the session outlives the window: stop calling into it
            self._unsubscribe()
            self._unsubscribe = None
        if self.dictation is not None:
            self.dictation.stop()
        if self.indicator is not None:
            self.indicator.close()
            self.indicator.deleteLater()
        self.overlay.fade_timer.stop()
        self.overlay.unbind()
        self.overlay.close()
        self.overlay.deleteLater()  # a top-level widget: nothing else deletes it
        self.controller.shutdown()
        if self.tray is not None:
            self.tray.hide()
        super().closeEvent(event)


def _dropped_file(mime: Any) -> Path | None:
    """The first local file among dropped URLs, if any."""
    if mime is None or not mime.hasUrls():
        return None
    for url in mime.urls():
        if url.isLocalFile() and Path(url.toLocalFile()).is_file():
            return Path(url.toLocalFile())
    return None
