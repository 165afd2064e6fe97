"""The caption window (offscreen Qt, the real worker and the demo model) driven over stdin, for tests that play
speech into a real sound server. A child process: soundcard binds one sound-server connection per process.

Commands (one JSON object a line): {"cmd": "start", "input": ID}, {"cmd": "stop"}, {"cmd": "fill"},
{"cmd": "transcript"}.
Reports (one JSON object a line): inputs (the list as shown), state (state, message, the status line),
captions (the window's text when it changes), peak (the meter's highest level since the last start),
transcript (the session's labelled text and its segments as [speaker, text], and the bleed filter's figures).
"""

from __future__ import annotations

import json
import os
import queue
import sys
import threading

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

from PySide6.QtCore import QTimer  # noqa: E402
from PySide6.QtWidgets import QApplication  # noqa: E402

from app.live.controller import LiveController  # noqa: E402
from app.live.sources import AudioSource  # noqa: E402
from app.main_window import MainWindow  # noqa: E402
from app.model_choices import AppState  # noqa: E402
from app.settings import SettingsStore  # noqa: E402
from inference.client import WorkerClient  # noqa: E402
from inference.paths import AppPaths  # noqa: E402


def report(event: str, **fields: object) -> None:
    sys.stdout.write(json.dumps({"event": event, **fields}) + "\n")
    sys.stdout.flush()


def bleed_figures(source: object) -> dict[str, object] | None:
    bleed = getattr(source, "bleed_report", None)
    if bleed is None:
        return None
    return {
        "delay_ms": bleed.delay_ms,
        "correlation": bleed.correlation,
        "offset_ms": bleed.offset_samples / 16.0,
        "blocks_with_playback": bleed.blocks_with_playback,
        "blocks_suppressed": bleed.blocks_suppressed,
        "delays_found": [
            (round(at, 2), round(delay / 16.0, 1), round(peak, 2)) for at, delay, peak in bleed.found
        ],
    }


def main() -> None:
    app = QApplication([])
    paths = AppPaths.from_environment().ensure()
    controller = LiveController(WorkerClient, paths.data)
    window = MainWindow(AppState.load(paths), SettingsStore(paths), controller)
    window.show()
    combo = window.panel.device_combo
    opened: list[object] = []  # the sources the window opened (the meeting's bleed figures, after it stopped)
    open_source = window.inputs.open_source

    def remember_opened() -> AudioSource:
        opened.append(open_source())
        return opened[-1]  # type: ignore[return-value]

    window.inputs.open_source = remember_opened  # type: ignore[method-assign]
    commands: queue.Queue[dict[str, str] | None] = queue.Queue()
    seen = {"text": "", "peak": -100.0, "items": []}

    def read_commands() -> None:
        for line in sys.stdin:
            commands.put(json.loads(line))
        commands.put(None)

    def listed() -> list[tuple[str, object]]:
        return [(combo.itemText(i), combo.itemData(i)) for i in range(combo.count())]

    def report_inputs() -> None:
        items = seen["items"] = listed()
        report("inputs", items=items, current=combo.currentData(), status=window.panel.status_label.text())

    def on_level(dbfs: float) -> None:
        if dbfs > seen["peak"]:
            seen["peak"] = dbfs
            report("peak", dbfs=dbfs, meter=window.panel.level_meter.ballistics.level)

    def poll() -> None:
        text = window.panel.caption_text()
        if text != seen["text"]:
            seen["text"] = text
            report("captions", text=text)
        if listed() != seen["items"]:  # the list changed by itself: a device plugged in or removed
            report_inputs()
        while True:
            try:
                command = commands.get_nowait()
            except queue.Empty:
                return
            if command is None:
                controller.stop()
                app.quit()
                return
            if command["cmd"] == "fill":
                window.inputs.fill(None)
                report_inputs()
            elif command["cmd"] == "start":
                index = combo.findData(command["input"])
                if index < 0:
                    report("error", message=f"no input {command['input']!r} in the list")
                    continue
                combo.setCurrentIndex(index)
                seen["peak"] = -100.0
                window.captions.start()
            elif command["cmd"] == "stop":
                controller.stop()
            elif command["cmd"] == "transcript":
                session = controller.session
                source = opened[-1] if opened else None
                report(
                    "transcript",
                    text=session.labelled_text,
                    segments=[[s.speaker, s.text.strip()] for s in session.segments],
                    bleed=bleed_figures(source),
                )

    controller.state_changed.connect(
        lambda state, message: report(
            "state", state=state, message=message, status=window.panel.status_label.text()
        )
    )
    controller.level_changed.connect(on_level)
    threading.Thread(target=read_commands, daemon=True).start()
    timer = QTimer()
    timer.timeout.connect(poll)
    timer.start(50)  # how often the window's text is looked at and commands are taken
    report_inputs()
    app.exec()
    window.close()


if __name__ == "__main__":
    main()
