"""The models dialog: catalog table, Download / Cancel / Delete / Open folder, progress, plain-word errors.

A thin view over :class:`app.models.manager.ModelsManager`. Downloads run as the manager's background
operations, which deliver their progress and outcome to the GUI thread (``GuiThread``), so widgets are touched
on the GUI thread alone.

Hooking it up (``app.window.models``): ``open_models_dialog(window, paths)`` from a "Models…" menu action, and
``first_run_suggestion(paths)`` for the banner that offers a real model once the window is shown.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from PySide6.QtCore import Qt, QUrl
from PySide6.QtGui import QDesktopServices
from PySide6.QtWidgets import (
    QAbstractItemView,
    QDialog,
    QFileDialog,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QMessageBox,
    QProgressBar,
    QPushButton,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from app.gui_thread import GuiThread
from app.models.manager import (
    JobOutcome,
    ModelsManager,
    PackageRow,
    needs_first_run_offer,
    suggested_package,
)
from inference.models.hub import HubClient
from inference.models.progress import InstallProgress, describe
from inference.models.spec import PackageSpec
from inference.models.store import ModelStore
from inference.paths import AppPaths
from inference.registry import FamilyRegistry

COLUMNS = ("Package", "Family", "Size", "Quantisation", "Languages", "Licence", "State")
Confirm = Callable[[QWidget, str, str], bool]


def _ask(parent: QWidget, title: str, text: str) -> bool:
    buttons = QMessageBox.StandardButton.Yes | QMessageBox.StandardButton.No
    return QMessageBox.question(parent, title, text, buttons) == QMessageBox.StandardButton.Yes


def _choose_model_file(parent: QWidget) -> Path | None:
    path, _ = QFileDialog.getOpenFileName(
        parent, "Import a model file", "", "Model files (*.nemo *.gguf *.tar.zst);;All files (*)"
    )
    return Path(path) if path else None


def _open_in_file_manager(path: Path) -> None:
    QDesktopServices.openUrl(QUrl.fromLocalFile(str(path)))


class ModelsDialog(QDialog):
    def __init__(
        self,
        store: ModelStore,
        parent: QWidget | None = None,
        confirm: Confirm = _ask,
        open_folder: Callable[[Path], None] = _open_in_file_manager,
        select: str | None = None,
        choose_file: Callable[[QWidget], Path | None] = _choose_model_file,
    ) -> None:
        super().__init__(parent)
        self.setWindowTitle("Speech models")
        self.resize(1040, 440)
        self._confirm = confirm
        self._open_folder = open_folder
        self._choose_file = choose_file
        self.manager = ModelsManager(store, self._on_progress, self._on_finished, GuiThread(self).post)
        self._rows: list[PackageRow] = []

        self.table = QTableWidget(0, len(COLUMNS), self)
        self.table.setObjectName("packagesTable")
        self.table.setHorizontalHeaderLabels(COLUMNS)
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.verticalHeader().setVisible(False)
        self.table.setWordWrap(False)
        header = self.table.horizontalHeader()
        header.setSectionResizeMode(0, QHeaderView.ResizeMode.Stretch)
        for column in range(1, len(COLUMNS)):
            header.setSectionResizeMode(column, QHeaderView.ResizeMode.ResizeToContents)
        # Long language lists and licence notes would push the State column off screen: cap them
        # (the full text is in the tooltip).
        for column, width in ((COLUMNS.index("Languages"), 200), (COLUMNS.index("Licence"), 110)):
            header.setSectionResizeMode(column, QHeaderView.ResizeMode.Interactive)
            self.table.setColumnWidth(column, width)
        self.table.itemSelectionChanged.connect(self._update_buttons)

        self.download_button = QPushButton("Download", self)
        self.cancel_button = QPushButton("Cancel download", self)
        self.delete_button = QPushButton("Delete", self)
        self.folder_button = QPushButton("Open folder", self)
        self.import_button = QPushButton("Import…", self)
        self.import_button.setToolTip(
            "Add a local model file: a NeMo .nemo checkpoint, a .gguf package or a Phonon-2 archive"
        )
        self.close_button = QPushButton("Close", self)
        self.download_button.clicked.connect(self._download)
        self.cancel_button.clicked.connect(self._cancel)
        self.delete_button.clicked.connect(self._delete)
        self.folder_button.clicked.connect(self._open)
        self.import_button.clicked.connect(self._import)
        self.close_button.clicked.connect(self.close)

        self.progress_bar = QProgressBar(self)
        self.progress_bar.setRange(0, 1000)
        self.progress_bar.setTextVisible(False)
        self.progress_bar.setVisible(False)
        self.status_label = QLabel("", self)
        self.status_label.setObjectName("statusLabel")
        self.status_label.setWordWrap(True)
        self.error_label = QLabel("", self)
        self.error_label.setObjectName("errorLabel")
        self.error_label.setWordWrap(True)
        self.error_label.setStyleSheet("color: #b00020;")
        self.error_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.error_label.setVisible(False)
        location = QLabel(f"Models are stored in {store.root}", self)
        location.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)

        buttons = QHBoxLayout()
        for button in (
            self.download_button,
            self.cancel_button,
            self.delete_button,
            self.folder_button,
            self.import_button,
        ):
            buttons.addWidget(button)
        buttons.addStretch(1)
        buttons.addWidget(self.close_button)
        layout = QVBoxLayout(self)
        layout.addWidget(self.table)
        layout.addWidget(self.progress_bar)
        layout.addWidget(self.status_label)
        layout.addWidget(self.error_label)
        layout.addWidget(location)
        layout.addLayout(buttons)

        self.manager.cleanup_in_background()  # old leftovers only; a running install elsewhere is recent and stays
        self.refresh()
        self.select_package(select or next((r.id for r in self._rows if r.default and not r.bundled), None))

    # -- table ---------------------------------------------------------------------------

    def refresh(self) -> None:
        selected = self.selected_id()
        self._rows = self.manager.rows()
        self.table.setRowCount(len(self._rows))
        for index, row in enumerate(self._rows):
            values = (row.name, row.family, row.size, row.quantization, row.languages, row.license, row.state)
            for column, value in enumerate(values):
                item = QTableWidgetItem(value)
                item.setToolTip(value)
                if column == 0:
                    item.setData(Qt.ItemDataRole.UserRole, row.id)
                    item.setToolTip(f"{row.name}\nid: {row.id}")
                self.table.setItem(index, column, item)
        if selected:
            self.select_package(selected)
        self._update_buttons()

    def select_package(self, package_id: str | None) -> None:
        for index, row in enumerate(self._rows):
            if row.id == package_id:
                self.table.selectRow(index)
                return

    def selected_id(self) -> str | None:
        items = self.table.selectedItems()
        if not items:
            return None
        first = self.table.item(items[0].row(), 0)
        return first.data(Qt.ItemDataRole.UserRole) if first is not None else None

    def _selected_row(self) -> PackageRow | None:
        wanted = self.selected_id()
        return next((r for r in self._rows if r.id == wanted), None)

    def _update_buttons(self) -> None:
        row = self._selected_row()
        self.download_button.setEnabled(bool(row and row.downloadable and not row.installed and not row.busy))
        self.cancel_button.setEnabled(bool(row and row.busy))
        self.delete_button.setEnabled(bool(row and row.installed and not row.bundled and not row.busy))
        self.folder_button.setEnabled(bool(row and row.folder is not None))

    def _set_state_cell(self, package_id: str, text: str) -> None:
        for index, row in enumerate(self._rows):
            if row.id == package_id:
                item = self.table.item(index, len(COLUMNS) - 1)
                if item is not None:
                    item.setText(text)

    # -- actions -------------------------------------------------------------------------

    def _download(self) -> None:
        row = self._selected_row()
        if row is None:
            return
        self._show_error("", "")
        if self.manager.download(row.id):
            self.progress_bar.setValue(0)
            self.progress_bar.setVisible(True)
            self.status_label.setText(f"Starting {row.name}…")
        self.refresh()

    def _cancel(self) -> None:
        row = self._selected_row()
        if row is not None:
            self.manager.cancel(row.id)
            self.status_label.setText(f"Cancelling {row.name}…")

    def _delete(self) -> None:
        row = self._selected_row()
        if row is None:
            return
        text = f"Delete {row.name} ({row.size}) from this computer?"
        if not self._confirm(self, "Delete model", text):
            return
        self._show_error("", "")
        if self.manager.delete(row.id):  # on a worker thread; _on_finished reports the result
            self.status_label.setText(f"Deleting {row.name}…")
        self.refresh()

    def _import(self) -> None:
        source = self._choose_file(self)
        if source is None:
            return
        self._show_error("", "")
        if self.manager.import_file(source):  # on a worker thread; _on_finished reports the result
            self.progress_bar.setVisible(True)
            self.status_label.setText(f"Importing {source.name}…")
        else:
            self.status_label.setText("Another import is still running.")

    def _open(self) -> None:
        row = self._selected_row()
        if row is not None and row.folder is not None:
            self._open_folder(row.folder)

    # -- job reports (GUI thread) ---------------------------------------------------------

    def _on_progress(self, package_id: str, report: InstallProgress) -> None:
        fraction = report.fraction
        if fraction is None:
            self.progress_bar.setRange(0, 0)  # busy indicator
        else:
            self.progress_bar.setRange(0, 1000)
            self.progress_bar.setValue(int(fraction * 1000))
        self.progress_bar.setVisible(True)
        self.status_label.setText(describe(report))
        if fraction is not None:
            self._set_state_cell(package_id, f"{report.phase} {fraction * 100:.0f}%")

    def _on_finished(self, outcome: JobOutcome) -> None:
        self.progress_bar.setVisible(self.manager.any_busy())
        if outcome.ok:
            self.status_label.setText(outcome.headline + ".")
        elif outcome.cancelled:
            self.status_label.setText(f"{outcome.headline}. {outcome.detail}")
        else:
            self.status_label.setText("")
            self._show_error(outcome.headline, outcome.detail)
        self.refresh()

    def _show_error(self, headline: str, detail: str) -> None:
        self.error_label.setText(f"<b>{_escape(headline)}</b><br>{_escape(detail)}" if headline else "")
        self.error_label.setVisible(bool(headline))

    def closeEvent(self, event) -> None:  # noqa: N802 (Qt name)
        # Partial downloads are kept, so cancelling on close loses nothing. No waiting here (the GUI thread):
        # the jobs wind down on their own and their late reports to this closed view are dropped.
        self.manager.cancel_all()
        super().closeEvent(event)


def _escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace("\n", "<br>")


def make_store(paths: AppPaths) -> ModelStore:
    """The store the app uses: ``HF_ENDPOINT`` and ``HF_TOKEN`` honoured (else a CLI login's token)."""
    families = FamilyRegistry.from_environment()
    return ModelStore(
        paths, families.catalog(paths), hub=HubClient.from_environment(), conversions=families.conversions()
    )


def open_models_dialog(parent: QWidget | None, paths: AppPaths, select: str | None = None) -> ModelsDialog:
    """Show the dialog (non-modal) and return it; the caller may connect ``finished`` to refresh itself."""
    dialog = ModelsDialog(make_store(paths), parent, select=select)
    dialog.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
    dialog.show()
    return dialog


def first_run_suggestion(paths: AppPaths) -> tuple[bool, PackageSpec | None]:
    """(no real model is installed, the package to suggest downloading) for the first-run banner."""
    catalog = FamilyRegistry.from_environment().catalog(paths)
    if not needs_first_run_offer(catalog):
        return False, None
    return True, suggested_package(catalog)
