"""Whisper's offline pass over a file whose audio arrives in blocks (``contract.OfflineJob``): its 30 s windows
are consecutive and do not overlap, so ``offline_jobs.ConsecutiveWindowsJob`` decodes each as soon as it is full,
holding only the window being filled. One pass; the transcript is ``WhisperEngine.transcribe``'s
(tests/whisper_ct2/test_offline_job.py).
"""

from __future__ import annotations

from typing import Any, Protocol

import numpy as np

from inference.contract import Timing, Transcript
from inference.families.whisper_ct2.options import RequestSettings


class WindowEngine(Protocol):
    """What the job needs of ``WhisperEngine`` (windows are its ``WindowResult``)."""

    features: Any

    def check_request(self, request: RequestSettings) -> None: ...

    def decode_placed_window(self, window: np.ndarray, start: int, request: RequestSettings) -> Any: ...

    def windows_transcript(self, windows: list[Any], request: RequestSettings) -> Transcript: ...


class WhisperWindows:
    """Whisper's ``offline_jobs.WindowDecoder``: the request checked up front, each window's result kept."""

    def __init__(self, engine: WindowEngine, request_options: dict[str, Any]) -> None:
        self.engine = engine
        self.request = RequestSettings.from_options(request_options)
        engine.check_request(self.request)
        self.window_samples: int = engine.features.window_samples
        self._windows: list[Any] = []

    def decode(self, samples: np.ndarray, start: int) -> None:
        result = self.engine.decode_placed_window(samples, start, self.request)
        if result is not None:
            self._windows.append(result)

    def transcript(self, total_s: float, wall_s: float) -> Transcript:
        transcript = self.engine.windows_transcript(self._windows, self.request)
        transcript.timing = Timing(total_s, wall_s)
        return transcript
