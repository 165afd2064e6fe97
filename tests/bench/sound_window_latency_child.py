"""Child of ``bench_sound_server.py``: the caption window (offscreen Qt, the real worker) captioning what the
sound server's speakers play with the model given as argv[1] (a folder). JSON lines on stdout: ``state`` as it
changes, ``committed`` (the session's committed text) as soon as the session model commits text, and when stdin
closes ``latencies`` (the controller's own per-delta figures: audio captured → committed), then it stops. A child process: soundcard binds one sound-server connection per process."""

from __future__ import annotations

import json
import os
import sys
import threading
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

from PySide6.QtCore import QTimer  # noqa: E402
from PySide6.QtWidgets import QApplication  # noqa: E402

from app.live.controller import LiveController  # noqa: E402
from app.main_window import MainWindow  # noqa: E402
from app.model_choices import AppState, ModelChoice  # noqa: E402
from app.settings import SettingsStore  # noqa: E402
from app.window.inputs import default_source  # noqa: E402
from inference.client import WorkerClient  # noqa: E402
from inference.paths import AppPaths  # noqa: E402


def report(event: str, **fields: object) -> None:
    sys.stdout.write(json.dumps({"event": event, **fields}) + "\n")
    sys.stdout.flush()


def main() -> None:
    app = QApplication([])
    paths = AppPaths.from_environment().ensure()
    controller = LiveController(WorkerClient, paths.data)
    window = MainWindow(AppState.load(paths), SettingsStore(paths), controller)
    window.show()
    model = Path(sys.argv[1])
    controller.start(ModelChoice(model.name, model, "parakeet_tdt"), default_source("system:default"))
    session = controller.session  # this session's model: its listeners run on the GUI thread as text commits
    session.subscribe(
        lambda change: (
            report("committed", text=session.committed_text) if change.committed or change.rewritten else None
        )
    )
    seen = {"state": ""}
    closed = threading.Event()

    def poll() -> None:
        if controller.state != seen["state"]:
            seen["state"] = controller.state
            report("state", state=controller.state, message=controller.session.status.message)
        if closed.is_set():
            report("latencies", values=controller.latencies)  # each delta: its audio captured → committed
            controller.shutdown()
            app.quit()

    threading.Thread(target=lambda: (sys.stdin.read(), closed.set()), daemon=True).start()
    timer = QTimer()
    timer.timeout.connect(poll)
    timer.start(50)  # how often the state and stdin are looked at
    app.exec()
    window.close()


if __name__ == "__main__":
    main()
