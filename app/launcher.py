"""The ``captioneer`` command: no arguments opens the GUI, anything else is the CLI."""

from __future__ import annotations

import sys
from collections.abc import Sequence


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] == "gui" or args[0].startswith("--input-file"):
        from app.main import run_gui

        return run_gui(args[1:] if args and args[0] == "gui" else args)
    if args[0] == "dictate":
        from app.dictation.command import main as dictate_main

        return dictate_main(args[1:])
    from inference.cli import main as cli_main

    return cli_main(args)


if __name__ == "__main__":
    raise SystemExit(main())
