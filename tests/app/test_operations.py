"""Background operations: the job runs off the calling thread, its outcome comes back where ``deliver`` says
(the GUI thread in the window), and every failure is reported in one place."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

import numpy as np
import pytest
import shiboken6
from PySide6.QtCore import QCoreApplication, QObject

from app.gui_thread import GuiThread
from app.operations import Operation, on_the_worker
from inference.errors import Cancelled, ModelError


def _outcomes() -> tuple[list[tuple[str, object, str]], Callable[[str], Callable[[object], None]]]:
    seen: list[tuple[str, object, str]] = []

    def record(kind: str) -> Callable[[object], None]:
        return lambda value: seen.append((kind, value, threading.current_thread().name))

    return seen, record


def test_the_result_reaches_success_from_a_thread_of_its_own() -> None:
    seen, record = _outcomes()
    operation = Operation(lambda: threading.current_thread().name, "job-name")
    thread = operation.success(record("ok")).failure(record("failed")).run_in_background(on_the_worker)
    thread.join(30)
    assert seen == [("ok", "job-name", "job-name")] and thread.daemon
    assert not Operation(lambda: None, "close").run_in_background(on_the_worker, daemon=False).daemon


@pytest.mark.parametrize(
    ("error", "level", "logged", "traceback"),
    [
        (
            ModelError("the model is damaged", "download it again"),
            logging.WARNING,
            "the model is damaged",
            False,
        ),
        (ZeroDivisionError("a bug"), logging.ERROR, "job failed", True),
        (Cancelled("cancelled"), logging.DEBUG, "job was cancelled", False),
    ],
)
def test_a_failure_is_reported_once_then_handed_to_failure(error, level, logged, traceback, caplog) -> None:  # type: ignore[no-untyped-def]
    seen, record = _outcomes()

    def fail() -> None:
        raise error

    with caplog.at_level(logging.DEBUG, "captioneer.app.operations"):
        Operation(fail, "job").success(record("ok")).failure(record("failed")).run_in_background(
            on_the_worker
        ).join(30)
        Operation(fail, "job").run_in_background(on_the_worker).join(30)  # no handler: the report is all
    assert seen == [("failed", error, "job")]
    reports = [r for r in caplog.records if r.name == "captioneer.app.operations"]
    assert len(reports) == 2 and all(r.levelno == level and logged in r.getMessage() for r in reports)
    assert all((r.exc_info is not None) == traceback for r in reports)


def test_in_the_window_outcomes_arrive_on_the_gui_thread(qtbot) -> None:  # type: ignore[no-untyped-def]
    owner = QObject()
    gui = GuiThread(owner)
    seen, record = _outcomes()
    started = threading.Event()

    def work() -> int:
        started.set()
        return 7

    def fail() -> None:
        raise ModelError("no such model")

    Operation(work, "ok-job").success(record("ok")).run_in_background(gui.post)
    Operation(fail, "failing-job").failure(record("failed")).run_in_background(gui.post)
    assert started.wait(30)
    qtbot.waitUntil(lambda: len(seen) == 2, timeout=30_000)
    main = threading.main_thread().name
    assert sorted((kind, thread) for kind, _value, thread in seen) == [("failed", main), ("ok", main)]
    assert ("ok", 7, main) in seen


def test_an_outcome_for_a_deleted_window_is_dropped(qapp) -> None:  # type: ignore[no-untyped-def]
    owner = QObject()
    gui = GuiThread(owner)
    shiboken6.delete(owner)  # a closed dialog, deleted while its job ran (and its GuiThread with it)
    seen, record = _outcomes()
    gui.post(lambda: record("posted")(None))  # no "C++ object already deleted" for the job to die of
    Operation(lambda: 1, "late-job").success(record("ok")).run_in_background(gui.post).join(30)
    QCoreApplication.sendPostedEvents()  # a queued call, had one been made, would run now
    assert seen == []


class _RefusingClient:
    """A worker client whose model load fails as ``error`` says (no worker process is started)."""

    def __init__(self, error: BaseException) -> None:
        self.error = error

    def start(self) -> _RefusingClient:
        return self

    def load(self, *_args: object) -> None:
        raise self.error

    def close(self) -> None:
        pass


@pytest.mark.parametrize(
    ("error", "message"),
    [
        (ModelError("not a model folder", "choose another"), "not a model folder (choose another)"),
        (RuntimeError("a bug"), "could not start: RuntimeError: a bug"),
    ],
)
def test_a_start_that_fails_says_why_on_the_gui_thread(qtbot, tmp_path, error, message) -> None:  # type: ignore[no-untyped-def]
    from app.live.controller import LiveController
    from app.live.sources import ArraySource
    from app.model_choices import ModelChoice

    controller = LiveController(lambda: _RefusingClient(error), tmp_path)  # type: ignore[arg-type, return-value]
    states: list[tuple[str, str, bool]] = []
    controller.state_changed.connect(
        lambda state, text: states.append(
            (state, text, threading.current_thread() is threading.main_thread())
        )
    )
    controller.start(ModelChoice("broken", tmp_path), ArraySource(np.zeros(1600, np.float32), "silence"))
    qtbot.waitUntil(lambda: controller.state == "failed", timeout=30_000)
    assert (
        states[-1] == ("failed", message, True) and controller.pipeline is None and controller.journal is None
    )
    assert controller.session.status.worker == "failed"
