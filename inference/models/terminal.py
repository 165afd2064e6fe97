"""Install progress on a terminal: a redrawn bar on a TTY, a few plain lines otherwise (logs, pipes)."""

from __future__ import annotations

import shutil
from typing import IO

from inference.models.progress import InstallProgress, describe


class TerminalProgress:
    def __init__(self, stream: IO[str], is_tty: bool | None = None, plain_step: float = 0.1) -> None:
        self.stream = stream
        self.is_tty = stream.isatty() if is_tty is None else is_tty
        self.plain_step = plain_step
        self._phase = ""
        self._next_fraction = 0.0
        self._drawn = False

    def __call__(self, report: InstallProgress) -> None:
        if self.is_tty:
            self._draw(report)
        else:
            self._line(report)

    def _draw(self, report: InstallProgress) -> None:
        width = shutil.get_terminal_size((80, 20)).columns
        text = describe(report)
        fraction = report.fraction
        if fraction is not None:
            bar_width = 24
            filled = int(round(fraction * bar_width))
            text = f"[{'#' * filled}{'.' * (bar_width - filled)}] {fraction * 100:5.1f}% {text}"
        if report.phase != self._phase and self._drawn:
            self.stream.write("\n")
        self._phase = report.phase
        self.stream.write("\r" + text[: width - 1].ljust(width - 1))
        self.stream.flush()
        self._drawn = True
        if report.phase == "done":
            self.stream.write("\n")
            self._drawn = False

    def _line(self, report: InstallProgress) -> None:
        fraction = report.fraction
        if report.phase != self._phase:
            self._phase = report.phase
            self._next_fraction = 0.0
        elif fraction is None or fraction < self._next_fraction:
            return
        if fraction is not None:
            self._next_fraction = (int(fraction / self.plain_step) + 1) * self.plain_step
        if report.phase != "done":
            self.stream.write(describe(report) + "\n")
            self.stream.flush()

    def close(self) -> None:
        if self.is_tty and self._drawn:
            self.stream.write("\n")
            self.stream.flush()
            self._drawn = False
