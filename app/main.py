"""GUI entry point: ``captioneer`` opens the caption window; ``captioneer --input-file talk.wav`` plays a
recording through the live pipeline in real time (captions for a recording, demos, bug reports)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path


def parse_gui_args(argv: Sequence[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="captioneer", description="Live captions (the window).")
    parser.add_argument("--input-file", type=Path, help="caption this recording, played in real time")
    return parser.parse_args(list(argv))


def run_gui(argv: Sequence[str] = ()) -> int:
    from PySide6.QtWidgets import QApplication

    from app.main_window import MainWindow
    from app.state import AppState
    from inference.logsetup import configure_logging
    from inference.paths import AppPaths

    args = parse_gui_args(argv)
    if args.input_file is not None and not args.input_file.is_file():
        sys.stderr.write(f"captioneer: error: input file not found: {args.input_file} (check the path)\n")
        return 2
    paths = AppPaths.from_environment().ensure()
    configure_logging(paths)
    app = QApplication.instance() or QApplication([sys.argv[0]])
    window = MainWindow(AppState.load(paths), input_file=args.input_file)
    window.show()
    window.offer_recovery()
    window.offer_models_on_first_run()
    if args.input_file is not None:
        window.start()
    return int(app.exec())
