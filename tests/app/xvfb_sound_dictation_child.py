"""Child process for ``test_sound_dictation.py``: push-to-talk with the real X11 hotkey, recording the
sound server's default microphone by its id (``mic:default``, as the window opens it), pasting into whatever
has the focus. A text field waits in its own window ("dictation field"). JSON lines on stdout: ``ready`` once
the hotkey is grabbed and the microphone delivers, then ``result`` for each dictation (text, audio length,
release → text latency), ``utterance`` for each recording (held, trailing and padding lengths, the trailing
audio's peak) and ``field`` whenever the field's text changes. Ends when stdin
closes."""

from __future__ import annotations

import json
import sys
import threading
from pathlib import Path

import numpy as np
from PySide6.QtCore import QTimer
from PySide6.QtWidgets import QApplication, QLineEdit

from app.dictation.capture import CaptureSettings, Utterance
from app.dictation.controller import DictationController
from app.dictation.output import PynputKeys, TextOutput, TextStyle
from app.window.inputs import default_source
from inference.client import WorkerClient
from inference.contract import SAMPLE_RATE

# Not tests.conftest: importing it would switch pynput to its dummy backend.
REPO_ROOT = Path(__file__).resolve().parents[2]


def emit(facts: dict[str, object]) -> None:
    sys.stdout.write(json.dumps(facts) + "\n")
    sys.stdout.flush()


def main() -> None:
    app = QApplication([sys.argv[0]])
    field = QLineEdit()
    field.setWindowTitle("dictation field")
    field.resize(600, 40)
    field.show()
    client = WorkerClient().start()
    engine = client.load(REPO_ROOT / "resources" / "demo_model")
    source = default_source("mic:default")
    controller = DictationController(
        lambda: engine,
        source,
        TextOutput("paste", app.clipboard(), PynputKeys()),
        mode="hold",
        hotkey="<ctrl>+<alt>+<space>",
        capture=CaptureSettings(),  # 0.5 s pre-roll, 0.3 s trailing audio, 0.3 s of padding
        style=TextStyle(True, ""),
        listen_for_commands=False,
    )
    controller.result_ready.connect(
        lambda r: emit({"result": r.text, "audio_s": r.audio_s, "latency_s": r.latency_s, "error": r.error})
    )
    controller.state_changed.connect(lambda state, detail: emit({"state": state, "detail": detail}))
    delivering = threading.Event()
    feed = controller.service.feed

    def first_blocks(block):  # type: ignore[no-untyped-def]
        delivering.set()
        feed(block)

    controller.service.feed = first_blocks  # type: ignore[method-assign]
    recorder = controller.service.recorder
    queue_utterance = recorder.on_utterance

    def described(utterance: Utterance) -> None:
        trailing = utterance.audio[utterance.pre_roll_samples + utterance.held_samples :][
            : utterance.trailing_samples
        ]
        emit(
            {
                "utterance": {
                    "held_s": utterance.held_samples / SAMPLE_RATE,
                    "trailing_s": utterance.trailing_samples / SAMPLE_RATE,
                    "padding_s": utterance.padding_samples / SAMPLE_RATE,
                    "trailing_peak": float(np.abs(trailing).max()) if trailing.size else 0.0,
                    "ends_in_zeros": not utterance.audio[-utterance.padding_samples :].any(),
                }
            }
        )
        queue_utterance(utterance)

    recorder.on_utterance = described
    controller.start()
    shown = [""]

    stdin_closed = threading.Event()

    def poll() -> None:
        if stdin_closed.is_set():
            app.quit()
        if delivering.is_set() and not shown[0]:
            shown[0] = " "
            emit({"ready": True, "source": source.name})
        if field.text() != shown[0].strip() and field.text():
            shown[0] = field.text()
            emit({"field": field.text()})

    timer = QTimer()
    timer.timeout.connect(poll)
    timer.start(50)
    threading.Thread(target=lambda: (sys.stdin.read(), stdin_closed.set()), daemon=True).start()
    app.exec()
    controller.stop()
    client.close()


if __name__ == "__main__":
    main()
