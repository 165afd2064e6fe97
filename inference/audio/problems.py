"""What reading one audio file found wrong with it (damage, truncation, non-finite samples), told the way every
reader tells it: kept as sentences for a window or an answer to show, and logged ``FOR_THE_USER`` (the CLI prints
those) unless the file is being read a second time."""

from __future__ import annotations

import logging

from inference.logsetup import FOR_THE_USER


class FileProblems:
    def __init__(self) -> None:
        self.found: list[str] = []
        self.warns = True  # off for a second read of the same file: its warnings were logged the first time

    def add(self, log: logging.Logger, message: str) -> None:
        self.found.append(message)
        if self.warns:
            log.warning("%s", message, extra=FOR_THE_USER)


def falls_short(decoded: int, declared: int | None) -> bool:
    """Fewer frames than the header stated, clearly: MP3 and codec lengths can be estimates, so within 1 % is not
    a shortfall."""
    return declared is not None and decoded < 0.99 * declared
