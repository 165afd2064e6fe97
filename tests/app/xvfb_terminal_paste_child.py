"""Child process for ``test_real_window.py``: paste (or type) dictated text with the real clipboard and XTest keys into
whatever window has the focus, and print the outcome as JSON. Run under Xvfb with QT_QPA_PLATFORM=xcb."""

from __future__ import annotations

import json
import sys
import time

from PySide6.QtWidgets import QApplication

from app.dictation.output import PynputKeys, TextOutput


def main() -> None:
    app = QApplication(sys.argv[:1])
    app.clipboard().setText("the user's clipboard")
    mode = sys.argv[2] if len(sys.argv) > 2 else "paste"
    output = TextOutput(mode, app.clipboard(), PynputKeys(), timeout_s=2.0)
    outcome: list[tuple[str, str]] = []
    output.deliver(sys.argv[1], lambda how, error: outcome.append((how, error)))
    deadline = time.monotonic() + 10
    while not outcome and time.monotonic() < deadline:
        app.processEvents()
        time.sleep(0.01)
    print(json.dumps({"outcome": outcome, "clipboard": app.clipboard().text(), **output.last_paste}))


if __name__ == "__main__":
    main()
