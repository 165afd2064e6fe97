"""File → Models… → Import…: a tiny .nemo picked in the file chooser is imported on a worker thread and listed as
installed; a damaged one shows the importer's error and installs nothing."""
# ruff: noqa: F811  (test parameters named like the imported fixtures)

from __future__ import annotations

import sys
from collections import namedtuple
from pathlib import Path

from app.models.dialog import ModelsDialog
from tests.models.hub_fixtures import app_paths, hub, hub_state, make_store  # noqa: F401

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "parakeet_tdt"))
from nemo_package import build_nemo  # noqa: E402
from parakeet_fixtures import model_dir  # noqa: E402

Usage = namedtuple("Usage", "total used free")


def _dialog(app_paths, qtbot, chosen: Path | None) -> ModelsDialog:  # type: ignore[no-untyped-def]
    store = make_store(app_paths, disk_usage=lambda _path: Usage(10**12, 0, 10**12))
    dialog = ModelsDialog(
        store, confirm=lambda *_: True, open_folder=lambda _p: None, choose_file=lambda _parent: chosen
    )
    qtbot.addWidget(dialog)
    dialog.show()
    return dialog


def test_import_a_nemo_from_the_dialog(app_paths, hub, qtbot, tmp_path):
    source = build_nemo(model_dir("tiny_a"), tmp_path / "my-parakeet.nemo")
    dialog = _dialog(app_paths, qtbot, source)
    dialog.import_button.click()
    qtbot.waitUntil(lambda: "is installed as my-parakeet" in dialog.status_label.text(), timeout=20_000)
    assert not dialog.error_label.isVisible()
    row = next(r for r in dialog._rows if r.id == "my-parakeet")
    assert row.installed and row.family == "parakeet_tdt"


def test_a_damaged_nemo_shows_the_error_and_installs_nothing(app_paths, hub, qtbot, tmp_path):
    source = tmp_path / "broken.nemo"
    source.write_bytes(b"not a tar archive at all" * 100)
    dialog = _dialog(app_paths, qtbot, source)
    dialog.import_button.click()
    qtbot.waitUntil(dialog.error_label.isVisible, timeout=20_000)
    assert "damaged or truncated" in dialog.error_label.text()
    assert not (app_paths.models / "broken").exists()


def test_cancelling_the_chooser_does_nothing(app_paths, hub, qtbot):
    dialog = _dialog(app_paths, qtbot, None)
    dialog.import_button.click()
    assert not dialog.manager.any_busy() and dialog.status_label.text() == ""
