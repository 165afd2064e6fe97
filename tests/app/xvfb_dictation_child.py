"""Child processes for ``test_real_window.py``: dictation against a real X server.

* no argument: push-to-talk with the real global hotkey. A focused text field waits in its own window;
  dictation listens on Ctrl+Alt+Space (grabbed from the X server) and types the result. The parent presses
  and releases the hotkey with xdotool while a recording plays as the microphone. Prints ``ready`` when
  listening, then one JSON line with the field's text.
* ``clipboard-reader DELAY_MS``: owns the user's clipboard (text, HTML, a custom binary format) and shows a
  focused window that, on Ctrl+V, reads the clipboard only DELAY_MS later (a busy app); then waits for the
  clipboard to change back and reads every format. JSON lines: ready, then what it pasted and found.
* ``paste-owner TEXT``: pastes TEXT through ``TextOutput("paste")`` with real Ctrl+V key events (XTest) and
  reports when and why it restored the clipboard; stays the clipboard's owner until stdin closes.
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


def emit(facts: dict[str, object]) -> None:
    sys.stdout.write(json.dumps(facts) + "\n")
    sys.stdout.flush()


USERS_HTML = "<b>the user's own text</b>"
USERS_BINARY = b"\x00\x01binary\xff"


def clipboard_reader(delay_ms: int) -> None:
    from PySide6.QtCore import QMimeData, QTimer
    from PySide6.QtGui import QKeySequence
    from PySide6.QtWidgets import QWidget

    app = QApplication([sys.argv[0]])
    clipboard = app.clipboard()
    original = QMimeData()
    original.setText("the user's own text")
    original.setHtml(USERS_HTML)
    original.setData("application/x-captioneer-test", USERS_BINARY)
    clipboard.setMimeData(original)
    pasted: dict[str, object] = {}
    finished = False

    def read_the_paste() -> None:
        pasted.update(text=clipboard.text(), at=time.monotonic())
        QTimer.singleShot(8000, read_everything)  # if the clipboard never changes back

    def read_everything() -> None:
        nonlocal finished
        if finished:
            return
        finished = True
        data = clipboard.mimeData()
        emit(
            {
                "pasted": pasted.get("text"),
                "pasted_at": pasted.get("at"),
                "key_at": pasted.get("key_at"),
                "restored_seen_at": time.monotonic(),
                "text": data.text(),
                "html": data.html(),
                "binary": bytes(data.data("application/x-captioneer-test").data()).hex(),
            }
        )
        app.quit()

    def changed() -> None:  # the owner changed: XFixes says so without anybody reading the data
        if "text" in pasted:
            QTimer.singleShot(0, read_everything)

    class BusyApp(QWidget):
        def keyPressEvent(self, event) -> None:  # type: ignore[no-untyped-def]  # noqa: N802 - Qt override
            if event.matches(QKeySequence.StandardKey.Paste):
                pasted["key_at"] = time.monotonic()
                QTimer.singleShot(delay_ms, read_the_paste)

    clipboard.dataChanged.connect(changed)
    window = BusyApp()
    window.setWindowTitle("paste target")
    window.resize(300, 100)
    window.show()
    window.activateWindow()
    window.setFocus()
    QTimer.singleShot(300, lambda: emit({"ready": True}))
    QTimer.singleShot(30_000, app.quit)
    app.exec()


def paste_owner(text: str) -> None:
    import threading

    from PySide6.QtCore import QMetaObject, Qt, QTimer

    app = QApplication([sys.argv[0]])
    output = TextOutput("paste", app.clipboard(), PynputKeys(), timeout_s=5.0)
    started = time.monotonic()

    def done(how: str, error: str) -> None:
        emit(
            {
                "how": how,
                "error": error,
                "started_at": started,
                "restored_at": time.monotonic(),
                **output.last_paste,
            }
        )

    def wait_for_the_parent() -> None:  # keep owning (and serving) the restored clipboard until then
        sys.stdin.readline()
        QMetaObject.invokeMethod(app, "quit", Qt.ConnectionType.QueuedConnection)

    threading.Thread(target=wait_for_the_parent, daemon=True).start()
    QTimer.singleShot(0, lambda: output.deliver(text, done))
    app.exec()


def type_into_field() -> None:
    app = QApplication([sys.argv[0]])
    field = QLineEdit()
    field.setWindowTitle("dictation target")
    field.resize(600, 40)
    field.show()
    field.activateWindow()
    field.setFocus()
    speech = load_audio_file(REPO_ROOT / "resources" / "samples" / "demo_sample_1.wav")
    # The "microphone": silence, the sentence, then silence, looping so timing on the parent side is easy.
    audio = np.concatenate(
        [np.zeros(SAMPLE_RATE, np.float32), speech, np.zeros(20 * SAMPLE_RATE, np.float32)]
    )
    source = ArraySource(audio, "test microphone", speed=1.0)
    client = WorkerClient().start()
    engine = client.load(REPO_ROOT / "resources" / "demo_model")
    typed: list[str] = []
    controller = DictationController(
        lambda: engine,
        source,
        TextOutput("type", None, PynputKeys()),
        mode="hold",
        hotkey="<ctrl>+<alt>+<space>",
        capture=CaptureSettings(),
        style=TextStyle(True, ""),
        listen_for_commands=False,
    )
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
    if sys.argv[1:2] == ["clipboard-reader"]:
        clipboard_reader(int(sys.argv[2]))
    elif sys.argv[1:2] == ["paste-owner"]:
        paste_owner(sys.argv[2])
    else:
        type_into_field()
