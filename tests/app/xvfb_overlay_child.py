"""Child process for ``test_real_window.py``: the caption window and the overlay in a real X11 window system.

Run under Xvfb with QT_QPA_PLATFORM=xcb. Shows the main window with live text, then the overlay at the
bottom preset over it, and writes one JSON line of facts plus two screenshots into OUT_DIR.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from PySide6.QtWidgets import QApplication

from app.main_window import MainWindow
from app.model_choices import AppState
from app.settings import SettingsStore
from inference.contract import Delta, Snapshot
from inference.paths import AppPaths


def settle(app: QApplication, seconds: float = 0.6) -> None:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        app.processEvents()
        time.sleep(0.01)


def main() -> None:
    out = Path(sys.argv[1])
    app = QApplication([sys.argv[0]])
    paths = AppPaths.from_environment().ensure()
    store = SettingsStore(paths)
    settings = store.load()
    settings.overlay_background = "#00ff00"  # a colour the window never uses: visible = on top
    settings.overlay_opacity = 1.0
    settings.overlay_position = "bottom"
    settings.overlay_hold_s = 1.5
    store.save(settings)
    window = MainWindow(AppState.load(paths), store)
    screen = app.primaryScreen().availableGeometry()
    window.setGeometry(screen.x(), screen.bottom() - 400, screen.width(), 400)  # under the overlay
    window.show()
    window.activateWindow()
    settle(app)
    session = window.controller.session
    window.captions.bind(session)
    session.apply([Delta("the quick brown fox jumps over the lazy dog", 0), Snapshot(" and then", 1)])
    focus_before = app.focusWindow()
    window.view_menu.set_overlay_visible(True)
    settle(app)
    overlay = window.overlay
    shot = app.primaryScreen().grabWindow(0)
    shot.save(str(out / "screen.png"))
    centre = overlay.geometry().center()
    pixel = shot.toImage().pixelColor(
        overlay.geometry().left() + 24, centre.y()
    )  # inside the label, left of the text
    facts = {
        "screen": [screen.x(), screen.y(), screen.width(), screen.height()],
        "overlay": [overlay.x(), overlay.y(), overlay.width(), overlay.height()],
        "window": [window.x(), window.y(), window.width(), window.height()],
        "overlay_visible": overlay.isVisible(),
        "focus_before_is_window": focus_before is window.windowHandle(),
        "focus_after_is_window": app.focusWindow() is window.windowHandle(),
        "overlay_is_active": overlay.isActiveWindow(),
        "pixel_at_overlay": [pixel.red(), pixel.green(), pixel.blue()],
        "overlay_text": overlay.displayed_text(),
    }
    overlay.grab().save(str(out / "overlay.png"))
    settle(app, 2.5)  # past the hold time: the fade must change what is on the screen, not only a Qt property
    faded = app.primaryScreen().grabWindow(0).toImage().pixelColor(overlay.geometry().left() + 24, centre.y())
    facts["pixel_after_fade"] = [faded.red(), faded.green(), faded.blue()]
    sys.stdout.write(json.dumps(facts) + "\n")
    window.close()


if __name__ == "__main__":
    main()
