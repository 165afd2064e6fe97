"""The models dialog driven with pytest-qt against the local hub server."""
# ruff: noqa: F811  (test parameters named like the imported fixtures)

from __future__ import annotations

import threading
from collections import namedtuple
from typing import Any

import pytest

from app.models.dialog import COLUMNS, ModelsDialog, first_run_suggestion  # noqa: E402
from app.models.dialog import make_store as make_app_store  # noqa: E402
from app.models.manager import explain, needs_first_run_offer  # noqa: E402
from inference.models.catalog import Catalog  # noqa: E402
from inference.models.errors import DiskSpaceError  # noqa: E402

# The fixtures app_paths, hub and hub_state come from the model store tests (imported by name).
from tests.models.hub_fixtures import GGUF_BYTES, app_paths, hub, hub_state, make_store  # noqa: E402, F401

Usage = namedtuple("Usage", "total used free")


def _row(dialog: ModelsDialog, package_id: str) -> dict[str, str]:
    index = next(i for i, r in enumerate(dialog._rows) if r.id == package_id)
    return {name: dialog.table.item(index, col).text() for col, name in enumerate(COLUMNS)}


@pytest.fixture
def opened(app_paths, hub, qtbot):
    folders = []

    def build(**kwargs):
        kwargs.setdefault("confirm", lambda parent, title, text: True)
        kwargs.setdefault("open_folder", folders.append)
        dialog = ModelsDialog(
            make_store(app_paths, disk_usage=kwargs.pop("disk_usage", None) or _plenty), **kwargs
        )
        qtbot.addWidget(dialog)
        dialog.show()
        dialog.opened_folders = folders
        return dialog

    return build


def _plenty(path):
    return Usage(10**12, 0, 10**12)


def test_table_lists_packages_with_details(opened):
    dialog = opened()
    assert dialog.table.rowCount() == 5
    row = _row(dialog, "tiny_gguf")
    assert row["Package"] == "Tiny GGUF (default)"
    assert (row["Family"], row["Quantisation"], row["Languages"], row["Licence"]) == (
        "parakeet_tdt",
        "q8_0",
        "en",
        "test",
    )
    assert row["Size"] == "600.0 KB" and row["State"] == "not installed"
    assert _row(dialog, "tiny_st")["Size"].startswith("~")
    # The default package is preselected and can be downloaded; nothing to delete or open yet.
    assert dialog.selected_id() == "tiny_gguf"
    assert dialog.download_button.isEnabled()
    assert not dialog.delete_button.isEnabled() and not dialog.folder_button.isEnabled()
    assert not dialog.cancel_button.isEnabled()
    # A package whose conversion step this build lacks cannot be started.
    assert _row(dialog, "tiny_archive")["State"] == "needs a converter (not in this build)"
    dialog.select_package("tiny_archive")
    assert not dialog.download_button.isEnabled()


def test_download_reports_progress_on_the_gui_thread_then_installs(opened, qtbot, app_paths):
    dialog = opened()
    on_gui_thread = []
    show_progress = dialog.manager.on_progress
    assert show_progress is not None

    def progress(*report: Any) -> None:
        on_gui_thread.append(threading.current_thread() is threading.main_thread())
        show_progress(*report)

    dialog.manager.on_progress = progress
    dialog.download_button.click()
    qtbot.waitUntil(lambda: _row(dialog, "tiny_gguf")["State"] == "installed", timeout=10_000)
    assert on_gui_thread and all(on_gui_thread)
    assert "Tiny GGUF is installed" in dialog.status_label.text()
    assert not dialog.error_label.isVisible()
    assert (app_paths.models / "tiny_gguf" / "tiny-q8_0.gguf").read_bytes() == GGUF_BYTES
    assert dialog.delete_button.isEnabled() and dialog.folder_button.isEnabled()
    assert not dialog.download_button.isEnabled()
    dialog.folder_button.click()
    assert dialog.opened_folders == [app_paths.models / "tiny_gguf"]


def test_cancel_keeps_the_partial_and_download_resumes(opened, qtbot, hub_state):
    hub_state.bytes_per_second = 300_000
    dialog = opened()
    dialog.download_button.click()
    qtbot.waitUntil(
        lambda: "KB of" in dialog.status_label.text() and dialog.progress_bar.value() > 0, timeout=10_000
    )
    assert dialog.cancel_button.isEnabled() and not dialog.download_button.isEnabled()
    assert dialog.progress_bar.isVisible()
    dialog.cancel_button.click()
    qtbot.waitUntil(lambda: "Download cancelled" in dialog.status_label.text(), timeout=10_000)
    assert _row(dialog, "tiny_gguf")["State"].startswith("paused (")
    assert not dialog.error_label.isVisible()

    hub_state.bytes_per_second = None
    dialog.download_button.click()
    qtbot.waitUntil(lambda: _row(dialog, "tiny_gguf")["State"] == "installed", timeout=10_000)
    assert hub_state.gets("tiny-q8_0.gguf")[-1].range is not None


def test_hub_refusal_is_shown_in_plain_words(opened, qtbot):
    dialog = opened(select="tiny_missing")
    dialog.download_button.click()
    qtbot.waitUntil(lambda: dialog.error_label.isVisible(), timeout=10_000)
    text = dialog.error_label.text()
    assert "The model hub refused the download" in text and "HF_TOKEN" in text
    assert _row(dialog, "tiny_missing")["State"] == "not installed"


def test_the_apps_store_sends_hf_token_to_the_hub(app_paths, hub, hub_state, monkeypatch):
    hub_state.required_token = "hf_from_env"
    monkeypatch.setenv("HF_TOKEN", "hf_from_env")
    assert make_app_store(app_paths).install("tiny_gguf").read_bytes() == GGUF_BYTES


def test_disk_full_is_shown_in_plain_words(opened, qtbot):
    dialog = opened(disk_usage=lambda path: Usage(10**9, 10**9, 5000))
    dialog.download_button.click()
    qtbot.waitUntil(lambda: dialog.error_label.isVisible(), timeout=10_000)
    assert "Not enough disk space" in dialog.error_label.text()
    assert "(5000 bytes) free" in dialog.error_label.text()


def test_delete_asks_first(opened, qtbot, app_paths):
    answers = [False, True]
    dialog = opened(confirm=lambda parent, title, text: answers.pop(0))
    dialog.download_button.click()
    qtbot.waitUntil(lambda: _row(dialog, "tiny_gguf")["State"] == "installed", timeout=10_000)
    dialog.delete_button.click()
    assert _row(dialog, "tiny_gguf")["State"] == "installed"
    dialog.delete_button.click()  # deleting runs on a worker thread, never on the GUI thread
    qtbot.waitUntil(lambda: dialog.status_label.text() == "Deleted Tiny GGUF.", timeout=10_000)
    assert _row(dialog, "tiny_gguf")["State"] == "not installed"
    assert not (app_paths.models / "tiny_gguf").exists()


def test_first_run_offer_only_without_a_real_model(app_paths, hub, qtbot):
    needed, suggestion = first_run_suggestion(app_paths)
    assert needed and suggestion is not None and suggestion.id == "tiny_gguf"
    make_store(app_paths).install("tiny_gguf")
    assert not needs_first_run_offer(Catalog(app_paths))
    assert first_run_suggestion(app_paths) == (False, None)


def test_the_first_run_banner_blocks_nothing_and_stays_dismissed(app_paths, hub, qtbot):
    """No modal question: the window is usable at once; Download opens the list on the suggested package;
    Dismiss is remembered across starts; installing a real model hides it."""
    from app.live.controller import LiveController
    from app.main_window import MainWindow
    from app.model_choices import AppState
    from app.settings import SettingsStore
    from inference.client import WorkerClient

    def new_window() -> MainWindow:
        window = MainWindow(
            AppState.load(app_paths), SettingsStore(app_paths), LiveController(WorkerClient, app_paths.data)
        )
        qtbot.addWidget(window)
        window.show()
        window.models.offer_on_first_run()
        return window

    window = new_window()
    assert window.panel.model_banner.isVisible() and window.panel.start_button.isEnabled()
    assert "Tiny GGUF (600.0 KB)" in window.panel.model_banner.text.text()
    window.panel.model_banner.download_button.click()
    assert window.models.dialog.selected_id() == "tiny_gguf"
    window.models.dialog.close()
    window.panel.model_banner.dismiss_button.click()
    assert not window.panel.model_banner.isVisible()
    window.close()
    again = new_window()
    assert not again.panel.model_banner.isVisible()  # dismissed once: not offered at every start
    again.close()


def test_explain_names_the_category():
    headline, detail = explain("X", DiskSpaceError("needs 5 GB", "free space"))
    assert headline == "Not enough disk space" and "What to do: free space" in detail
    headline, detail = explain("X", ValueError("boom"))
    assert headline == "Could not install X" and "ValueError" in detail


def test_closing_the_dialog_cancels_and_keeps_the_partial(opened, qtbot, hub_state):
    hub_state.bytes_per_second = 300_000
    dialog = opened()
    dialog.download_button.click()
    qtbot.waitUntil(lambda: dialog.progress_bar.value() > 0, timeout=10_000)
    dialog.close()  # returns at once: the GUI thread never joins the job
    assert dialog.manager.wait_idle(10.0)
    assert 0 < dialog.manager.store.partial_bytes("tiny_gguf") < len(GGUF_BYTES)
