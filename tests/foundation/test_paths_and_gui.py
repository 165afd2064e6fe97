"""Paths honour CAPTIONEER_HOME; logging writes a rotating file; the GUI starts headless without crashing."""

from __future__ import annotations

import logging
from pathlib import Path

from inference.logsetup import FOR_THE_USER, WORKER_PROCESS_NAME, configure_logging
from inference.paths import AppPaths


def test_captioneer_home_override(tmp_path: Path) -> None:
    paths = AppPaths.from_environment({"CAPTIONEER_HOME": str(tmp_path)})
    assert paths.models == tmp_path / "models"
    assert paths.config == tmp_path / "config"
    paths.ensure()
    assert all(p.is_dir() for p in (paths.config, paths.data, paths.cache, paths.models, paths.logs))


def test_models_dir_override(tmp_path: Path) -> None:
    paths = AppPaths.from_environment(
        {"CAPTIONEER_HOME": str(tmp_path), "CAPTIONEER_MODELS_DIR": str(tmp_path / "m")}
    )
    assert paths.models == tmp_path / "m"


def test_platform_defaults_without_override() -> None:
    paths = AppPaths.from_environment({})
    assert "aptioneer" in str(paths.config) and paths.models.name == "models"


def test_log_file_written(tmp_path: Path) -> None:
    paths = AppPaths.from_environment({"CAPTIONEER_HOME": str(tmp_path)})
    configure_logging(paths)
    logging.getLogger("captioneer.test").info("hello log")
    for handler in logging.getLogger().handlers:
        handler.flush()
    assert "hello log" in (paths.logs / "captioneer.log").read_text()


def test_the_worker_s_records_go_to_the_file_and_not_twice_to_the_console(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    """The client logs what its worker sends (inference/client/dispatch.py) into the file; with --verbose the
    console shows the client's own records but not the worker's, which the worker printed to stderr itself."""
    paths = AppPaths.from_environment({"CAPTIONEER_HOME": str(tmp_path)})
    configure_logging(paths, verbose=True)
    try:
        logging.getLogger("captioneer.test").warning("from the client")
        worker = logging.makeLogRecord(
            {
                "name": "inference.audio.io",
                "levelno": logging.WARNING,
                "levelname": "WARNING",
                "msg": "from the worker",
                "processName": WORKER_PROCESS_NAME,
                "process": 4242,
            }
        )
        logging.getLogger(worker.name).handle(worker)
        for handler in logging.getLogger().handlers:
            handler.flush()
        console = capsys.readouterr().err
        assert "from the client" in console and "from the worker" not in console
        text = (paths.logs / "captioneer.log").read_text()
        assert "from the client" in text and " 4242 inference.audio.io WARNING from the worker" in text
    finally:
        configure_logging(paths, verbose=False, stderr=False)


def test_without_verbose_the_console_shows_only_warnings_for_the_user(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    """The CLI (``user_warnings``) prints what reading the user's file found wrong, and nothing else."""
    paths = AppPaths.from_environment({"CAPTIONEER_HOME": str(tmp_path)})
    configure_logging(paths, user_warnings=True)
    try:
        logging.getLogger("inference.audio.wav").warning("cut.wav is truncated", extra=FOR_THE_USER)
        logging.getLogger("captioneer.test").warning("an internal warning")
        logging.getLogger("inference.audio.wav").info("a note for the user's log", extra=FOR_THE_USER)
        forwarded = logging.makeLogRecord(
            {
                "name": "inference.audio.wav",
                "levelno": logging.WARNING,
                "levelname": "WARNING",
                "msg": "the worker's own",
                "processName": WORKER_PROCESS_NAME,
                "for_the_user": True,
            }
        )
        logging.getLogger(forwarded.name).handle(forwarded)
        console = capsys.readouterr().err
        assert console == "captioneer: warning: cut.wav is truncated\n"
        assert "an internal warning" in (paths.logs / "captioneer.log").read_text()
    finally:
        configure_logging(paths, verbose=False, stderr=False)


DEMO_LABEL = "Model: Demo: synthetic English only (bundled) — install a real model from File → Models…"


def test_main_window_shows_model_state(qtbot) -> None:  # type: ignore[no-untyped-def]
    from app.main_window import MainWindow
    from app.model_choices import AppState

    state = AppState.load(AppPaths.from_environment().ensure())
    window = MainWindow(state)
    qtbot.addWidget(window)
    window.show()
    assert window.windowTitle() == "Captioneer"
    assert (
        window.panel.model_label.text() == DEMO_LABEL
    )  # no model installed: the bundled demo, and how to get more


def test_models_menu_opens_the_dialog_and_refreshes(qtbot) -> None:  # type: ignore[no-untyped-def]
    from app.main_window import MainWindow
    from app.model_choices import AppState

    window = MainWindow(AppState.load(AppPaths.from_environment().ensure()))
    qtbot.addWidget(window)
    window.file_menu.models_action.trigger()
    dialog = window.models.dialog
    assert dialog is not None and dialog.isVisible()
    with qtbot.waitSignal(dialog.finished, timeout=5000):
        dialog.reject()
    assert (
        window.panel.model_label.text() == DEMO_LABEL
    )  # no model installed: the bundled demo, and how to get more
