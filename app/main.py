"""GUI entry point."""

from __future__ import annotations

import sys
from collections.abc import Sequence


def run_gui(argv: Sequence[str] = ()) -> int:
    from PySide6.QtWidgets import QApplication

    from app.main_window import MainWindow
    from app.state import AppState
    from inference.logsetup import configure_logging
    from inference.paths import AppPaths

    paths = AppPaths.from_environment().ensure()
    configure_logging(paths)
    app = QApplication.instance() or QApplication([sys.argv[0], *argv])
    window = MainWindow(AppState.load(paths))
    window.show()
    window.offer_models_on_first_run()
    return int(app.exec())
