"""The caption window: builds its parts (``app.window``) over the controller, the settings and the views, and
connects them.

Each part has one concern: the input and model pickers, live captions, recordings, saved sessions, the View
menu, push-to-talk, the File menu. The parts share one evented ``Settings``: a part assigns a setting, the parts
that show it follow, and ``SettingsAutosave`` writes it. The window itself only composes them, takes dropped
files and closes them.
"""

from __future__ import annotations

from pathlib import Path

from PySide6.QtGui import QCloseEvent, QDragEnterEvent, QDropEvent
from PySide6.QtWidgets import QMainWindow

from app.live.controller import LiveController
from app.model_choices import AppState
from app.settings import Settings, SettingsAutosave, SettingsStore
from app.views.caption_panel import CaptionPanel
from app.views.overlay import CaptionOverlay
from app.views.session_figures import SessionFigures
from app.views.tray import make_tray
from app.window.captions import LiveCaptions
from app.window.file_menu import FileMenu
from app.window.inputs import InputPicker, SourceFactory, source_factory_for
from app.window.models import ModelPicker
from app.window.push_to_talk import PushToTalk
from app.window.recordings import RecordingProgress, Recordings, dropped_file
from app.window.sessions import Sessions
from app.window.view_menu import ViewMenu
from inference.client import WorkerClient


class MainWindow(QMainWindow):
    def __init__(
        self,
        state: AppState,
        settings_store: SettingsStore | None = None,
        controller: LiveController | None = None,
        source_factory: SourceFactory | None = None,  # default: recordings and sound cards, as settings say
        input_file: Path | None = None,
    ) -> None:
        super().__init__()
        self.paths = state.paths
        self.settings_store = settings_store or SettingsStore(state.paths)
        self.settings: Settings = self.settings_store.load()
        self.autosave = SettingsAutosave(
            self.settings, self.settings_store
        )  # the one place settings are saved
        self.controller = controller or LiveController(WorkerClient, state.paths.data, self)
        settings = self.settings
        self.setWindowTitle("Captioneer")
        self.resize(820, 480)
        self.panel = CaptionPanel(self, settings, state.model_summary)
        self.setCentralWidget(self.panel)
        self.progress = RecordingProgress(self, self.controller)
        self.figures = SessionFigures(self)
        self.statusBar().addWidget(self.progress.bar, 1)
        self.statusBar().addPermanentWidget(self.figures)
        self.setAcceptDrops(True)  # drop a recording on the window to caption it
        self.overlay = CaptionOverlay(settings)
        self._closed = False

        self.inputs = InputPicker(self.panel, settings, source_factory or source_factory_for(settings))
        self.models = ModelPicker(self, state, settings, self.panel)
        self.captions = LiveCaptions(
            self,
            self.controller,
            settings,
            self.panel,
            self.overlay,
            self.figures,
            self.inputs,
            self.models,
            self.progress,
        )
        self.recordings = Recordings(self, self.controller, self.inputs, self.panel, self.captions.start)
        self.sessions = Sessions(self, state.paths.data, self.controller, self.captions, self.panel)
        self.file_menu = FileMenu(self, self.models, self.recordings, self.sessions)
        self.view_menu = ViewMenu(self, settings, self.overlay, self.captions, self.models.can_translate)
        self.panel.model_combo.currentIndexChanged.connect(lambda _index: self.view_menu.update_translate())
        self.push_to_talk = PushToTalk(self, settings, self.controller, self.models, self.inputs, self.panel)
        help_menu = self.menuBar().addMenu("&Help")
        help_menu.addAction("&About Captioneer", self._show_about)
        self.inputs.fill(input_file)
        self.tray = make_tray(self)
        if self.tray is not None:
            self.controller.state_changed.connect(self.tray.show_captions_state)
        self.captions.render()
        if settings.overlay_enabled:  # it was on when the app last closed
            self.overlay.show_captions()

    def dragEnterEvent(self, event: QDragEnterEvent) -> None:  # noqa: N802 - Qt naming
        if dropped_file(event.mimeData()) is not None:
            event.acceptProposedAction()

    def dropEvent(self, event: QDropEvent) -> None:  # noqa: N802 - Qt naming
        path = dropped_file(event.mimeData())
        if path is not None:
            event.acceptProposedAction()
            self.recordings.open(path)

    def _show_about(self) -> None:
        from app.views.about import AboutDialog

        self.about = AboutDialog(self)
        self.about.show()

    def closeEvent(self, event: QCloseEvent) -> None:  # noqa: N802 - Qt naming
        if self._closed:  # a second close (the tray's Quit after the window's): the overlay is already gone
            super().closeEvent(event)
            return
        self._closed = True
        self.autosave.close()  # a last write, as every quit did
        self.captions.unbind()  # the session outlives the window: stop calling into it
        self.push_to_talk.close()
        self.inputs.close()  # the sound server's change watch
        self.overlay.fade_timer.stop()
        self.overlay.detach()
        self.overlay.close()
        self.overlay.deleteLater()  # a top-level widget: nothing else deletes it
        self.controller.shutdown()
        if self.tray is not None:
            self.tray.hide()
        super().closeEvent(event)
