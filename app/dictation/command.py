"""``captioneer dictate --toggle``: start or stop dictation in the running app (for desktop shortcuts, e.g. on
Wayland, where apps cannot watch the keyboard)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence


def main(argv: Sequence[str]) -> int:
    from inference.app_commands import DICTATE_DESCRIPTION, add_dictate_arguments

    parser = argparse.ArgumentParser(prog="captioneer dictate", description=DICTATE_DESCRIPTION)
    add_dictate_arguments(parser)  # the same options `captioneer --help` lists
    args = parser.parse_args(list(argv))
    if not args.toggle:
        parser.print_help()
        return 2
    from PySide6.QtCore import QCoreApplication

    from app.dictation.controller import send_toggle

    _app = QCoreApplication.instance() or QCoreApplication([sys.argv[0]])
    if send_toggle():
        return 0
    sys.stderr.write(
        "captioneer: error: Captioneer is not running with push-to-talk on "
        "(start the app and switch on Dictation → Push-to-talk)\n"
    )
    return 1
