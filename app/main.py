"""GUI entry point: ``captioneer`` opens the caption window; ``captioneer --input-file talk.wav`` plays a
recording through the live pipeline in real time (captions for a recording, demos, bug reports)."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Mapping, Sequence


def parse_gui_args(argv: Sequence[str]) -> argparse.Namespace:
    from inference.app_commands import GUI_DESCRIPTION, add_gui_arguments

    parser = argparse.ArgumentParser(prog="captioneer gui", description=GUI_DESCRIPTION)
    add_gui_arguments(parser)  # the same options `captioneer --help` lists
    return parser.parse_args(list(argv))


def missing_display(environ: Mapping[str, str] | None = None, platform: str | None = None) -> str | None:
    """Why the window cannot open here, in one line with the fix (None: it can). Qt would abort instead."""
    env = os.environ if environ is None else environ
    if (platform or sys.platform) != "linux" or env.get("QT_QPA_PLATFORM"):
        return None
    if env.get("DISPLAY") or env.get("WAYLAND_DISPLAY"):
        return None
    return (
        "no display to open the caption window on (DISPLAY and WAYLAND_DISPLAY are unset); run it in a desktop "
        "session, use the command line (`captioneer transcribe FILE`), or set QT_QPA_PLATFORM=offscreen for tests"
    )


def run_gui(argv: Sequence[str] = ()) -> int:
    from PySide6.QtGui import QGuiApplication
    from PySide6.QtWidgets import QApplication

    from app.main_window import MainWindow
    from app.model_choices import AppState
    from inference.logsetup import configure_logging
    from inference.paths import AppPaths

    args = parse_gui_args(argv)
    if args.input_file is not None and not args.input_file.is_file():
        sys.stderr.write(f"captioneer: error: input file not found: {args.input_file} (check the path)\n")
        return 2
    problem = missing_display()
    if problem:
        sys.stderr.write(f"captioneer: error: {problem}\n")
        return 2
    paths = AppPaths.from_environment().ensure()
    configure_logging(paths)
    app = QApplication.instance() or QApplication([sys.argv[0]])
    QGuiApplication.setDesktopFileName(
        "captioneer"
    )  # Wayland app id: the shell takes the icon from captioneer.desktop
    window = MainWindow(AppState.load(paths), input_file=args.input_file)
    window.show()
    window.sessions.offer_recovery()
    window.models.offer_on_first_run()
    window.push_to_talk.restore()
    if args.input_file is not None:
        window.captions.start()
    return int(app.exec())
