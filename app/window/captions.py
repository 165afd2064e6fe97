"""Live captions in the window: Start/Stop, which session the caption text, overlay and figures show, and the
controller's state, input level and session end drawn on the views.

All work happens in the controller and its threads; this part runs on the GUI thread and only redraws.
"""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import QObject, Slot

from app.live.controller import LiveController
from app.live.session import SessionChange, SessionModel
from app.model_choices import ModelChoice
from app.settings import Settings
from app.views.caption_panel import CaptionPanel
from app.views.overlay import CaptionOverlay
from app.views.session_figures import SessionFigures
from app.window.inputs import InputPicker
from app.window.models import ModelPicker
from app.window.recordings import RecordingProgress
from inference.errors import CaptioneerError


class LiveCaptions(QObject):
    """A QObject so that the controller's signals reach it through the GUI thread's event loop."""

    def __init__(
        self,
        parent: QObject,
        controller: LiveController,
        settings: Settings,
        panel: CaptionPanel,
        overlay: CaptionOverlay,
        figures: SessionFigures,
        inputs: InputPicker,
        models: ModelPicker,
        progress: RecordingProgress,
    ) -> None:
        super().__init__(parent)
        self.controller = controller
        self.settings = settings
        self.panel = panel
        self.overlay = overlay
        self.figures = figures
        self.inputs = inputs
        self.models = models
        self.progress = progress
        self.session: SessionModel | None = None  # what the views show: the live session or a past one
        self._unsubscribe: Callable[[], None] | None = None
        panel.start_button.clicked.connect(self.toggle)
        controller.state_changed.connect(self._on_state)
        controller.level_changed.connect(panel.show_level)
        controller.session_finished.connect(self._on_finished)

    # ------------------------------------------------------------------ start / stop
    @Slot()
    def toggle(self) -> None:
        if self.controller.state in ("idle", "failed"):
            self.start()
        elif self.controller.state == "running":
            self.controller.stop()

    def start(self) -> None:
        choice = self.models.current()
        if choice is None:
            self.panel.show_problem("There is no model to caption with.", "Install one from File → Models….")
            return
        unavailable = self.inputs.unavailable()
        if unavailable is not None:
            self.panel.show_problem(unavailable, "Connect a microphone or pass --input-file PATH.")
            return
        options = dict(choice.request_options)
        language, context = self.panel.language_edit, self.panel.context_edit
        if language.isEnabled() and language.text().strip():
            options["language"] = language.text().strip()
        if context.isEnabled() and context.text().strip():
            options["context"] = context.text().strip()
        if self.settings.translate_captions and self.models.can_translate():
            options["task"] = "translate"
        # "auto" keeps the model's own preference (the demo model prefers segments); "segmented" forces them.
        mode = "segmented" if self.settings.caption_mode == "segmented" else choice.stream_mode
        choice = ModelChoice(
            choice.label,
            choice.path,
            choice.family,
            choice.session_options,
            tuple(sorted(options.items())),
            choice.backend,
            choice.threads,
            mode,
        )
        try:
            source = self.inputs.open_source()
        except CaptioneerError as exc:
            self.panel.show_problem(exc.message, exc.fix or "")
            return
        with self.settings.batch():  # remembered for the next start
            self.settings.model = choice.label
            self.inputs.remember_current()
        self.controller.start(choice, source)
        self.progress.follow(source)
        self.bind(self.controller.session)

    # ------------------------------------------------------------------ the session on the views
    def bind(self, session: SessionModel) -> None:
        """Show ``session`` in the caption text, the overlay and the figures, following its changes."""
        self.unbind()
        self.session = session
        self._unsubscribe = session.subscribe(self._on_change)
        self.overlay.bind(session)
        self.render()

    def unbind(self) -> None:
        """Stop following the session (it outlives the window)."""
        if self._unsubscribe is not None:
            self._unsubscribe()
            self._unsubscribe = None

    def render(self) -> None:
        self.panel.text_view.show_session(self.session)
        self._render_status()

    def _on_change(self, change: SessionChange) -> None:
        self.panel.text_view.on_change(change)
        if change.status:
            self._render_status()

    def _render_status(self) -> None:
        if self.session is not None:
            self.figures.show_status(self.session.status)

    # ------------------------------------------------------------------ controller signals
    @Slot(str, str)
    def _on_state(self, state: str, message: str) -> None:
        self.panel.show_captions_state(state, self.models.family_takes)
        if message:
            self.panel.status_label.setText(message)

    @Slot()
    def _on_finished(self) -> None:
        self.panel.clear_level()
        self.progress.finish()  # a recording's progress ends with its session
        self.render()
        summary = self.controller.latency_summary()
        if summary is not None:
            p50, p95 = summary
            ended = self.controller.session.status.message or "stopped"  # "stopped", or why it ended so
            self.panel.status_label.setText(f"{ended} · caption latency p50 {p50:.2f} s, p95 {p95:.2f} s")
