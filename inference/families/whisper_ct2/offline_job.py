"""Whisper's offline pass over a file whose audio arrives in blocks (``contract.OfflineJob``): its 30 s windows
are consecutive and do not overlap, so each is decoded as soon as it is full, and only the window being filled
is held. One pass; the transcript is ``WhisperEngine.transcribe``'s (tests/whisper_ct2/test_offline_job.py).
"""

from __future__ import annotations

import time
from typing import Any, Protocol

import numpy as np

from inference.contract import SAMPLE_RATE, JobControl, Timing, Transcript
from inference.errors import UsageError
from inference.families.whisper_ct2.options import RequestSettings
from inference.offline_jobs import ArrivingAudio


class WindowEngine(Protocol):
    """What the job needs of ``WhisperEngine`` (windows are its ``WindowResult``)."""

    features: Any

    def check_request(self, request: RequestSettings) -> None: ...

    def decode_placed_window(self, window: np.ndarray, start: int, request: RequestSettings) -> Any: ...

    def windows_transcript(self, windows: list[Any], request: RequestSettings) -> Transcript: ...


class WhisperOfflineJob:
    passes = 1

    def __init__(self, engine: WindowEngine, request_options: dict[str, Any], control: JobControl) -> None:
        self.engine = engine
        self.control = control
        self.request = RequestSettings.from_options(request_options)
        engine.check_request(self.request)
        self.window_samples = engine.features.window_samples
        self._audio = ArrivingAudio()
        self._windows: list[Any] = []
        self._ended = False
        self._started = time.perf_counter()

    def feed(self, pcm: np.ndarray) -> None:
        if self._ended:
            raise UsageError("audio after the end of a job's only pass")
        if self.control.cancel is not None:
            self.control.cancel.check()
        self._audio.append(pcm)
        while self._audio.end - self._audio.start >= self.window_samples:
            self._decode(self._audio.start + self.window_samples)

    def end_pass(self) -> None:
        self._ended = True
        if self._audio.end > self._audio.start:
            self._decode(self._audio.end)

    def finish(self) -> Transcript:
        if not self._ended:
            raise UsageError("a job finished before its audio ended")
        total_s = self._audio.end / SAMPLE_RATE
        self.control.step(total_s, total_s)
        transcript = self.engine.windows_transcript(self._windows, self.request)
        transcript.timing = Timing(total_s, time.perf_counter() - self._started)
        return transcript

    def _decode(self, end: int) -> None:
        start = self._audio.start
        self.control.step(start / SAMPLE_RATE, None)  # the length is known only at the end
        result = self.engine.decode_placed_window(self._audio.read(start, end), start, self.request)
        if result is not None:
            self._windows.append(result)
        self._audio.forget_before(end)
