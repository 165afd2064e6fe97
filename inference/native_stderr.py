"""Keeps native libraries' stderr chatter out of the user's terminal: libmpg123 prints frame warnings while
libsndfile decodes an MP3, ggml prints "load_backend: loaded CPU backend from ..." when it loads a backend.

While such a call runs, fd 2 points at a temporary file; afterwards the library's lines go to the debug log and
anything else written meanwhile (another thread's log line) is written back to the real stderr, late but whole.
"""

from __future__ import annotations

import logging
import os
import re
import sys
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import IO

log = logging.getLogger("captioneer.native")
DECODER_LINES = re.compile(r"^\[src/lib(mpg123|sndfile|FLAC|ogg|vorbis|opus)[^\]]*\]|mpg123", re.IGNORECASE)
GGML_LINES = re.compile(r"^(load_backend|register_backend|ggml_\w+):")
# CTranslate2's spdlog notices, e.g. that a float16 model runs as float32 on a CPU ("[<time>] [ctranslate2]
# [thread N] [warning] The compute type inferred from the saved model is float16, ..."); its errors pass through.
CTRANSLATE2_LINES = re.compile(r"^\[[^\]]*\] \[ctranslate2\] \[thread \d+\] \[(info|warning)\]")


class _Redirect:
    """fd 2 is one per process, so overlapping decodes share one redirection: the first in sets it up, the last
    out restores it (a lock and a count, not one redirect each, which would restore each other's files)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._users = 0
        self._saved = -1
        self._capture: IO[bytes] | None = None

    def enter(self) -> bool:
        with self._lock:
            if self._users == 0:
                try:
                    sys.stderr.flush()
                    capture = tempfile.TemporaryFile()  # noqa: SIM115 - kept open across enter/leave
                    self._saved = os.dup(2)
                    os.dup2(capture.fileno(), 2)
                except (OSError, ValueError, AttributeError):  # no fd 2 (a windowed app) or no temp dir
                    return False
                self._capture = capture
            self._users += 1
            return True

    def leave(self, chatter: re.Pattern[str]) -> None:
        with self._lock:
            self._users -= 1
            if self._users or self._capture is None:
                return
            capture, self._capture = self._capture, None
            os.dup2(self._saved, 2)
            os.close(self._saved)
        capture.seek(0)
        text = capture.read().decode("utf-8", "replace")
        capture.close()
        passthrough = []
        for line in text.splitlines(keepends=True):
            if chatter.search(line):
                log.debug("native: %s", line.strip())
            else:
                passthrough.append(line)
        if passthrough:
            sys.stderr.write("".join(passthrough))
            sys.stderr.flush()


_REDIRECT = _Redirect()  # wraps the process's fd 2, itself a per-process resource


@contextmanager
def native_output_logged(chatter: re.Pattern[str]) -> Iterator[None]:
    """Run a native call with its stderr lines matching ``chatter`` sent to the log (POSIX; elsewhere a no-op)."""
    entered = os.name == "posix" and _REDIRECT.enter()
    try:
        yield
    finally:
        if entered:
            _REDIRECT.leave(chatter)
