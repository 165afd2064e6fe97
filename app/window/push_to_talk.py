"""Push-to-talk in the window: the Dictation menu and its settings, and the dictation controller it switches on
(its own microphone stream, the chosen model in the captions' shared worker) with its on-screen indicator."""

from __future__ import annotations

from PySide6.QtGui import QAction, QGuiApplication
from PySide6.QtWidgets import QMainWindow

from app.dictation.capture import CaptureSettings
from app.dictation.controller import DictationController
from app.dictation.output import PynputKeys, TextOutput, TextStyle
from app.dictation.service import DictationResult
from app.live.controller import LiveController
from app.live.sources import AudioSource
from app.model_choices import ModelChoice
from app.settings import Settings
from app.views.caption_panel import CaptionPanel
from app.views.dictation_indicator import DictationIndicator
from app.views.dictation_settings import DictationSettingsDialog, hotkey_label
from app.window.inputs import InputPicker
from app.window.models import ModelPicker
from inference.errors import CaptioneerError

HOTKEY_MODES = (
    ("hold", "Hold to talk"),
    ("toggle", "Press to start, press to stop"),
    ("hybrid", "Tap to toggle, hold to talk"),
)
OUTPUTS = (("paste", "Pasting (clipboard restored)"), ("type", "Typing"), ("copy", "Copying only"))


class PushToTalk:
    def __init__(
        self,
        window: QMainWindow,
        settings: Settings,
        controller: LiveController,
        models: ModelPicker,
        inputs: InputPicker,
        panel: CaptionPanel,
    ) -> None:
        self.window = window
        self.settings = settings
        self.controller = controller
        self.models = models
        self.inputs = inputs
        self.panel = panel
        self.dictation: DictationController | None = None  # while push-to-talk is on
        self.indicator: DictationIndicator | None = None
        menu = window.menuBar().addMenu("&Dictation")
        self.action = QAction(self._action_text(), window, checkable=True)
        self.action.setChecked(False)
        self.action.toggled.connect(self.set_enabled)
        self.action.triggered.connect(self._remember)  # the user's choice, not a failed start
        menu.addAction(self.action)
        mode_menu = menu.addMenu("Hotkey &mode")
        for mode, label in HOTKEY_MODES:
            action = mode_menu.addAction(label)
            action.setCheckable(True)
            action.setChecked(settings.push_to_talk_mode == mode)
            action.triggered.connect(lambda _checked=False, m=mode: self._set_setting("push_to_talk_mode", m))
        output_menu = menu.addMenu("&Insert text by")
        for mode, label in OUTPUTS:
            action = output_menu.addAction(label)
            action.setCheckable(True)
            action.setChecked(settings.dictation_output == mode)
            action.triggered.connect(lambda _checked=False, m=mode: self._set_setting("dictation_output", m))
        self.model_menu = menu.addMenu("Dictation m&odel")
        self.model_menu.aboutToShow.connect(self.fill_model_menu)
        settings_action = menu.addAction("Dictation &settings…")
        settings_action.triggered.connect(self.open_settings)
        self.history_menu = menu.addMenu("&Recent dictations")
        self.history_menu.aboutToShow.connect(self._fill_history)
        settings.subscribe(lambda _changed: self.action.setText(self._action_text()), "push_to_talk_hotkey")

    def _action_text(self) -> str:
        return f"&Push-to-talk ({hotkey_label(self.settings.push_to_talk_hotkey)})"

    def _set_setting(self, name: str, value: object) -> None:
        setattr(self.settings, name, value)
        if self.dictation is not None:  # takes effect when push-to-talk is switched on again
            self.panel.status_label.setText(
                "Dictation settings change when push-to-talk is switched on again."
            )

    def set_enabled(
        self, enabled: bool, source: AudioSource | None = None, output: TextOutput | None = None
    ) -> None:
        """Switch push-to-talk on (its own microphone stream, the chosen model in the shared worker) or off.
        ``source`` and ``output`` replace the microphone and the inserting of text (tests, demos)."""
        if not enabled:
            if self.dictation is not None:
                self.dictation.stop()
                self.dictation = None
            return
        choice = self.choice()
        if choice is None:
            self.panel.show_problem("There is no model for dictation.", "Install one from File → Models….")
            return
        s = self.settings
        try:
            source = source or self.inputs.open_microphone()
            if output is None:
                keys = PynputKeys() if s.dictation_output in ("paste", "type") else None
                output = TextOutput(s.dictation_output, QGuiApplication.clipboard(), keys)
            capture = CaptureSettings(
                s.dictation_pre_roll_ms / 1000, s.trailing_silence_ms / 1000, s.dictation_padding_ms / 1000
            )
            trailing = {"space": " ", "newline": "\n", "none": ""}.get(s.dictation_trailing, " ")
            self.dictation = DictationController(
                lambda: self.controller.engine_for(choice),
                source,
                output,
                mode=s.push_to_talk_mode,
                hotkey=s.push_to_talk_hotkey,
                capture=capture,
                style=TextStyle(s.dictation_capitalize, trailing),
                parent=self.window,
            )
            if self.indicator is None:
                self.indicator = DictationIndicator()
            self.dictation.state_changed.connect(self.indicator.show_state)
            self.dictation.state_changed.connect(
                lambda _state, detail: self.panel.status_label.setText(detail)
            )
            self.dictation.start()
        except CaptioneerError as exc:
            self.dictation = None
            self.panel.show_problem(exc.message, exc.fix or "")
            self.action.setChecked(False)

    def choice(self) -> ModelChoice | None:
        """The model dictation uses: the one chosen for it, else the captions model."""
        for choice in self.models.choices():
            if choice.label == self.settings.dictation_model:
                return choice
        return self.models.current()

    def fill_model_menu(self) -> None:
        """Dictation may use another model than captions (e.g. R2T2 for accuracy, Parakeet for speed)."""
        self.model_menu.clear()
        labels = [None] + [choice.label for choice in self.models.choices()]
        for label in labels:
            action = self.model_menu.addAction(label or "Same as captions")
            action.setCheckable(True)
            action.setChecked(self.settings.dictation_model == label)
            action.triggered.connect(
                lambda _checked=False, value=label: self._set_setting("dictation_model", value)
            )

    def open_settings(self) -> None:
        self.settings_dialog = DictationSettingsDialog(self.settings, self.window)
        self.settings_dialog.accepted.connect(self._settings_accepted)
        self.settings_dialog.show()

    def _settings_accepted(self) -> None:
        if self.dictation is not None:  # restart with the new hotkey and times
            self.set_enabled(False)
            self.set_enabled(True)

    def _remember(self, enabled: bool) -> None:
        self.settings.dictation_enabled = enabled

    def restore(self) -> None:
        """Switch push-to-talk back on when it was on at the last quit (after the window is shown)."""
        if self.settings.dictation_enabled and not self.action.isChecked():
            self.action.setChecked(True)

    def _fill_history(self) -> None:
        self.history_menu.clear()
        history: list[DictationResult] = list(self.dictation.history) if self.dictation is not None else []
        if not history:
            self.history_menu.addAction("(nothing dictated yet)").setEnabled(False)
        for result in history:
            label = result.text or result.error or "(no speech)"
            action = self.history_menu.addAction(f"{label[:70]} — {result.latency_s * 1000:.0f} ms")
            action.triggered.connect(
                lambda _checked=False, t=result.text: QGuiApplication.clipboard().setText(t)
            )

    def close(self) -> None:
        """The window closes: stop listening and take the indicator down (a top-level widget)."""
        if self.dictation is not None:
            self.dictation.stop()
        if self.indicator is not None:
            self.indicator.close()
            self.indicator.deleteLater()
