"""Renders the app's windows under X11 and saves them as PNGs for the README and docs/app.md (docs/screenshots/).

    .venv/bin/python docs/screenshots/make_screenshots.py [--out DIR]

Starts its own Xvfb (and openbox for window frames, if installed) unless $DISPLAY is set, and uses a
throwaway CAPTIONEER_HOME. The captions are the bundled demo model's real output on the two bundled samples
(joined with a pause, captioned in real time); the dialogs show the fresh-install state.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))


def start_display() -> list[subprocess.Popen]:
    """An Xvfb screen (and a window manager on it): the processes to stop afterwards."""
    from tests.xvfb import start_xvfb

    try:
        server, display = start_xvfb(first=70)
    except RuntimeError as exc:
        sys.exit(str(exc))
    os.environ["DISPLAY"] = display
    started = [server]
    if shutil.which("openbox"):
        started.append(subprocess.Popen(["openbox"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        time.sleep(0.5)
    return started


def joined_samples(folder: Path) -> Path:
    """The two bundled samples with a 1.5 s pause between them (the caption view starts a paragraph there)."""
    import numpy as np
    import soundfile

    parts = []
    for name in ("demo_sample_1.wav", "demo_sample_2.wav"):
        samples, rate = soundfile.read(REPO / "resources" / "samples" / name, dtype="float32")
        parts += [samples, np.zeros(int(1.5 * rate), np.float32)]
    path = folder / "two_sentences.wav"
    soundfile.write(path, np.concatenate(parts), rate)
    return path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=REPO / "docs" / "screenshots")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    home = Path(tempfile.mkdtemp(prefix="captioneer-shots-"))
    os.environ["CAPTIONEER_HOME"] = str(home)
    os.environ["QT_QPA_PLATFORM"] = "xcb"
    helpers = [] if os.environ.get("DISPLAY") else start_display()
    try:
        shoot(args.out, home)
    finally:
        for process in reversed(helpers):
            process.terminate()
        shutil.rmtree(home, ignore_errors=True)


def shoot(out: Path, home: Path) -> None:
    from PySide6.QtCore import QRect, Qt
    from PySide6.QtWidgets import QApplication, QPlainTextEdit, QWidget

    from app.main_window import MainWindow
    from app.model_choices import AppState
    from app.models.dialog import ModelsDialog, make_store
    from app.settings import SettingsStore
    from app.views.dictation_indicator import DictationIndicator
    from app.views.dictation_settings import DictationSettingsDialog
    from app.views.overlay_settings import OverlaySettingsDialog
    from inference.paths import AppPaths

    app = QApplication([sys.argv[0]])
    screen = app.primaryScreen()

    def settle(seconds: float = 0.5, until: Callable[[], bool] | None = None, timeout: float = 60.0) -> None:
        end = time.monotonic() + (timeout if until else seconds)
        while time.monotonic() < end and not (until and until()):
            app.processEvents()
            time.sleep(0.01)
        if until is not None and not until():
            sys.exit("timed out waiting for the app (is the demo model in resources/demo_model?)")
        settle_end = time.monotonic() + 0.3
        while time.monotonic() < settle_end:
            app.processEvents()
            time.sleep(0.01)

    def save(widget: QWidget, name: str, area: QRect | None = None) -> None:
        settle(until=lambda: widget.isVisible() and widget.windowHandle().isExposed(), timeout=10)
        if area is None and widget.windowFlags() & Qt.WindowType.FramelessWindowHint:
            # No frame to show, and X11 may leave Qt believing a frameless tool window sits at (0, 0) after the
            # window manager placed it (seen under Xvfb + openbox): let the widget render itself.
            shot = widget.grab()
        else:
            rect = area or widget.frameGeometry()  # with the window manager's frame
            shot = screen.grabWindow(0, rect.x(), rect.y(), rect.width(), rect.height())
        shot.save(str(out / name))
        print(f"wrote {out / name}")

    paths = AppPaths.from_environment().ensure()
    store = SettingsStore(paths)
    settings = store.load()
    settings.show_timestamps = True
    store.save(settings)
    window = MainWindow(AppState.load(paths), store)
    window.move(40, 40)  # at its default size: the controls must fit their text there
    window.models.offer_on_first_run()  # as a fresh install shows it: only the demo model
    window.show()
    settle(1.0)
    recording = joined_samples(home)
    window.recordings.open(recording, fast=False)
    # Grabbed while the second sentence is being captioned: the level meter is live.
    settle(until=lambda: "garden" in window.panel.caption_text())
    save(window, "main_window.png")
    window.captions.toggle()  # stop
    settle(until=lambda: window.controller.state == "idle")

    # The overlay over another application's window.
    other = QPlainTextEdit()
    other.setWindowTitle("Another application")
    other.setPlainText(
        "Quarterly planning notes\n\n" + "\n".join(f"- item {i}: to be discussed" for i in range(1, 30))
    )
    other.setGeometry(160, 300, 960, 460)
    other.show()
    settle(0.8)
    window.view_menu.set_overlay_visible(True)
    window.overlay.show_captions()
    settle(0.8)
    area = other.frameGeometry().united(window.overlay.frameGeometry()).adjusted(-8, -8, 8, 8)
    save(other, "overlay.png", area)
    window.view_menu.set_overlay_visible(False)
    other.close()

    indicator = DictationIndicator()
    indicator.show_state("listening", "")
    settle(0.5)
    save(indicator, "dictation_listening.png")
    indicator.show_state("done", "pasted · 403 ms after release")
    settle(0.5)
    save(indicator, "dictation_done.png")
    indicator.close()

    models = ModelsDialog(make_store(paths), window)
    models.show()
    settle(1.0)
    save(models, "models_dialog.png")
    models.close()

    overlay_settings = OverlaySettingsDialog(window.settings, lambda _s: None, window)
    overlay_settings.show()
    settle(0.5)
    save(overlay_settings, "overlay_settings.png")
    overlay_settings.close()

    dictation_settings = DictationSettingsDialog(window.settings, window)
    dictation_settings.show()
    settle(0.5)
    save(dictation_settings, "dictation_settings.png")
    dictation_settings.close()
    window.close()
    settle(0.5)


if __name__ == "__main__":
    main()
