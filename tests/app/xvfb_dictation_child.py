"""Child process for ``test_real_window.py``: push-to-talk with the real global hotkey under X11.

A focused text field waits in its own window; dictation listens on Ctrl+Alt+Space through pynput and
types the result. The parent presses and releases the hotkey with xdotool while a recording plays as the
microphone. Prints ``ready`` when listening, then one JSON line with the field's text.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import numpy as np
from PySide6.QtWidgets import QApplication, QLineEdit

from app.dictation.capture import CaptureSettings
from app.dictation.controller import DictationController
from app.dictation.output import PynputKeys, TextOutput, TextStyle
from app.live.sources import ArraySource
from inference.audio.io import load_audio_file
from inference.client import WorkerClient
from inference.contract import SAMPLE_RATE

# Not tests.conftest: importing it would switch pynput to its dummy backend.
REPO_ROOT = Path(__file__).resolve().parents[2]


def main() -> None:
    app = QApplication([sys.argv[0]])
    field = QLineEdit()
    field.setWindowTitle("dictation target")
    field.resize(600, 40)
    field.show()
    field.activateWindow()
    field.setFocus()
    speech = load_audio_file(REPO_ROOT / "resources" / "samples" / "demo_sample_1.wav")
    # The "microphone": silence, the sentence, then silence, looping so timing on the parent side is easy.
    audio = np.concatenate([np.zeros(SAMPLE_RATE, np.float32), speech, np.zeros(20 * SAMPLE_RATE, np.float32)])
    source = ArraySource(audio, "test microphone", speed=1.0)
    client = WorkerClient().start()
    engine = client.load(REPO_ROOT / "resources" / "demo_model")
    typed: list[str] = []
    controller = DictationController(lambda: engine, source, TextOutput("type", None, PynputKeys()),
                                     mode="hold", hotkey="<ctrl>+<alt>+<space>", capture=CaptureSettings(),
                                     style=TextStyle(True, ""), listen_for_commands=False)  # fmt: skip
    controller.result_ready.connect(lambda result: typed.append(result.text))
    controller.start()
    sys.stdout.write(json.dumps({"ready": True, "speech_s": speech.size / SAMPLE_RATE}) + "\n")
    sys.stdout.flush()
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not (typed and field.text()):
        app.processEvents()
        time.sleep(0.01)
    end = time.monotonic() + 0.5  # let the last synthetic key events arrive
    while time.monotonic() < end:
        app.processEvents()
        time.sleep(0.01)
    sys.stdout.write(json.dumps({"field": field.text(), "result": typed}) + "\n")
    controller.stop()
    client.close()


if __name__ == "__main__":
    main()
