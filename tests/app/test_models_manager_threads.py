"""The models manager never makes its caller (the GUI thread) wait: deleting, cancelling and cleaning run on
worker threads and report through ``on_finished``."""
# ruff: noqa: F811  (test parameters named like the imported fixtures)

from __future__ import annotations

import threading

from app.models.manager import JobOutcome, ModelsManager
from tests.models.hub_fixtures import app_paths, hub, hub_state, make_store  # noqa: F401

# How long held work waits for the test to let it go: reached only when the call under test waited for the work.
HOLD_S = 5.0


def _installed_manager(app_paths) -> tuple[ModelsManager, list[tuple[JobOutcome, str]]]:
    finished: list[tuple[JobOutcome, str]] = []
    manager = ModelsManager(
        make_store(app_paths), on_finished=lambda o: finished.append((o, threading.current_thread().name))
    )
    assert manager.download("tiny_gguf") and manager.wait_idle(20.0)
    assert finished[-1][0].ok
    return manager, finished


def test_delete_returns_at_once_and_reports_from_a_worker(app_paths, hub, monkeypatch) -> None:
    manager, finished = _installed_manager(app_paths)
    removing, release, removed = threading.Event(), threading.Event(), threading.Event()
    real_remove = manager.store.remove

    def slow_remove(package_id: str):
        removing.set()
        release.wait(HOLD_S)  # a multi-gigabyte folder on a slow disk
        real_remove(package_id)
        removed.set()

    monkeypatch.setattr(manager.store, "remove", slow_remove)
    assert manager.delete("tiny_gguf")
    assert not removed.is_set(), "delete() waited for the removal"
    assert removing.wait(HOLD_S), "the removal never started on the worker"
    assert manager.is_busy("tiny_gguf") and not manager.delete("tiny_gguf")  # one job per package
    assert next(r for r in manager.rows() if r.id == "tiny_gguf").state == "deleting…"
    release.set()
    assert manager.wait_idle(10.0)
    outcome, thread = finished[-1]
    assert outcome == JobOutcome("tiny_gguf", ok=True, headline="Deleted Tiny GGUF")
    assert thread == "delete-tiny_gguf" and thread != threading.main_thread().name
    assert not (app_paths.models / "tiny_gguf").exists()


def test_a_failed_delete_is_reported_not_raised(app_paths, hub, monkeypatch) -> None:
    manager, finished = _installed_manager(app_paths)

    def refuse(package_id: str):
        raise PermissionError(f"[WinError 32] the file is in use: {package_id}")

    monkeypatch.setattr(manager.store, "remove", refuse)
    assert manager.delete("tiny_gguf") and manager.wait_idle(10.0)
    outcome = finished[-1][0]
    assert (outcome.ok, outcome.headline) == (False, "Could not delete Tiny GGUF")
    assert "file is in use" in outcome.detail


def test_cancel_all_does_not_wait_for_the_jobs(app_paths, hub, monkeypatch) -> None:
    finished: list[JobOutcome] = []
    manager = ModelsManager(make_store(app_paths), on_finished=finished.append)
    installing, release, installed = threading.Event(), threading.Event(), threading.Event()
    real_install = manager.store.install

    def busy_install(package_id: str, progress=None, cancel=None):
        installing.set()
        release.wait(HOLD_S)  # a job between two looks at its cancel flag (a long write or hash)
        try:
            return real_install(package_id, progress=progress, cancel=cancel)
        finally:
            installed.set()

    monkeypatch.setattr(manager.store, "install", busy_install)
    assert manager.download("tiny_gguf") and installing.wait(HOLD_S)
    manager.cancel_all()
    assert not installed.is_set(), "cancel_all() waited for the job"
    assert manager.is_busy("tiny_gguf") and finished == []
    release.set()
    assert manager.wait_idle(10.0) and not manager.any_busy()
    assert finished[-1].cancelled and not finished[-1].ok  # the job saw the cancel when it looked again
