"""Saved sessions in the window: export the transcript shown, open a past session, and offer back the sessions
a crash or power cut left unfinished."""

from __future__ import annotations

import contextlib
import logging
from pathlib import Path

from PySide6.QtWidgets import QFileDialog, QMenu, QMessageBox, QWidget

from app.live.controller import LiveController
from app.live.export import EXPORT_FORMATS, export_session, path_for_filter
from app.live.journal import list_sessions, mark_recovered, read_session, unfinished_sessions
from app.views.caption_panel import CaptionPanel
from app.window.captions import LiveCaptions
from inference.errors import CaptioneerError

log = logging.getLogger("captioneer.app.window")


class Sessions:
    def __init__(
        self,
        parent: QWidget,
        data_dir: Path,
        controller: LiveController,
        captions: LiveCaptions,
        panel: CaptionPanel,
    ) -> None:
        self.parent = parent
        self.data_dir = data_dir
        self.controller = controller
        self.captions = captions
        self.panel = panel

    # ------------------------------------------------------------------ export
    def export_dialog(self) -> None:
        session = self.captions.session
        if session is None or not session.committed_text.strip():
            self.panel.show_problem("There is nothing to export yet.", "Start captions first.")
            return
        labels = {f"{label} (*.{ext})": ext for ext, label in EXPORT_FORMATS.items()}
        suggested = next(name for name, ext in labels.items() if ext == "srt")
        path, chosen = QFileDialog.getSaveFileName(
            self.parent,
            "Export transcript",
            str(Path.home() / "transcript.srt"),
            ";;".join(labels),
            suggested,
        )
        if path:
            with contextlib.suppress(OSError, CaptioneerError):  # export_to showed and logged it
                self.export_to(path_for_filter(Path(path), labels.get(chosen, "txt")))

    def export_to(self, path: Path) -> Path:
        assert self.captions.session is not None
        try:
            return export_session(self.captions.session, path)
        except (OSError, CaptioneerError) as exc:
            log.warning("export to %s failed: %s", path, exc)
            self.panel.show_problem(
                f"Could not export to {path}: {exc}", "Choose another folder or file name."
            )
            raise

    # ------------------------------------------------------------------ past sessions and recovery
    def fill_history(self, menu: QMenu) -> None:
        menu.clear()
        sessions = list_sessions(self.data_dir)
        if not sessions:
            menu.addAction("(no past sessions)").setEnabled(False)
        for saved in sessions[:30]:
            action = menu.addAction(saved.title)
            action.triggered.connect(lambda _checked=False, s=saved: self.open_saved(s.path))

    def open_saved(self, path: Path) -> None:
        """Show a past session read-only (export works on it)."""
        if self.controller.state not in ("idle", "failed"):
            self.panel.show_problem("Stop the live captions first.", "")
            return
        try:
            _saved, model = read_session(path)  # a damaged line is skipped; only an unreadable file fails
        except OSError as exc:
            log.warning("cannot open saved session %s: %s", path, exc)
            self.panel.show_problem(f"Could not open {path.name}: {exc}", "Check that the file still exists.")
            return
        self.captions.bind(model)
        self.panel.status_label.setText(f"Past session: {path.name}")

    def offer_recovery(self) -> None:
        """After a crash or power cut: offer the sessions that did not end cleanly."""
        for saved in unfinished_sessions(self.data_dir)[:3]:
            answer = QMessageBox.question(
                self.parent,
                "Recover captions?",
                f"A captioning session did not end cleanly:\n\n{saved.title}\n\nOpen it now? (It stays in "
                "File → Past sessions either way.)",
            )
            try:
                mark_recovered(saved)
            except OSError as exc:  # offered again next time; the text is untouched either way
                log.warning("cannot mark %s as recovered: %s", saved.path, exc)
            if answer == QMessageBox.StandardButton.Yes:
                self.open_saved(saved.path)
                return
