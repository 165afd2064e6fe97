"""Offline transcription of a file whose audio arrives in blocks (the worker's side of ``protocol.OpenJob``).

An engine that plans its windows as audio arrives (``contract.StreamedOffline``: Parakeet-TDT) holds only what
its next window needs; any other engine gets a :class:`WholeClipJob`, which gathers the clip into one array that
grows in place and transcribes it at the end (one copy of the audio, where a ``Transcribe`` message held three).
:class:`ArrivingAudio` is the bounded buffer the planned jobs keep; :class:`ConsecutiveWindowsJob` is the one pass
of a family whose offline windows are consecutive and never overlap (Confucius4-R2T2, Whisper), which supplies
only how a window is decoded and how the transcript is made (:class:`WindowDecoder`).
"""

from __future__ import annotations

import time
from typing import Any, Protocol

import numpy as np

from inference.contract import (
    SAMPLE_RATE,
    CancelToken,
    Engine,
    JobControl,
    OfflineJob,
    ProgressCallback,
    StreamedOffline,
    Transcript,
)
from inference.errors import UsageError

_FIRST_CAPACITY = 1 << 20  # samples


def open_offline_job(
    engine: Engine,
    *,
    progress: ProgressCallback | None = None,
    cancel: CancelToken | None = None,
    **request_options: Any,
) -> OfflineJob:
    if isinstance(engine, StreamedOffline):
        return engine.open_offline_job(progress=progress, cancel=cancel, **request_options)
    return WholeClipJob(engine, progress, cancel, request_options)


class GrowingAudio:
    """Samples appended block by block into one array that grows in place (``ndarray.resize``: realloc, so
    mremap for large buffers rather than a copy)."""

    def __init__(self) -> None:
        self._data = np.empty(0, np.float32)
        self.size = 0

    def append(self, pcm: np.ndarray) -> None:
        if self.size + pcm.size > self._data.size:
            grown = max(2 * self._data.size, self.size + pcm.size, _FIRST_CAPACITY)
            self._data.resize(grown, refcheck=False)
        self._data[self.size : self.size + pcm.size] = pcm
        self.size += pcm.size

    def take(self) -> np.ndarray:
        """All the samples (the buffer is handed over, trimmed in place, and this object emptied)."""
        data, self._data = self._data, np.empty(0, np.float32)
        data.resize(self.size, refcheck=False)
        self.size = 0
        return data


class WholeClipJob:
    """Any engine: the clip is gathered, then transcribed by ``Engine.transcribe`` (exactly today's result)."""

    passes = 1

    def __init__(
        self,
        engine: Engine,
        progress: ProgressCallback | None,
        cancel: CancelToken | None,
        request_options: dict[str, Any],
    ) -> None:
        self.engine = engine
        self.progress = progress
        self.cancel = cancel
        self.options = request_options
        self._audio = GrowingAudio()
        self._ended = False

    def feed(self, pcm: np.ndarray) -> None:
        if self._ended:
            raise UsageError("audio after the end of a job's only pass")
        if self.cancel is not None:
            self.cancel.check()
        self._audio.append(pcm)

    def end_pass(self) -> None:
        self._ended = True

    def finish(self) -> Transcript:
        if not self._ended:
            raise UsageError("a job finished before its audio ended")
        return self.engine.transcribe(
            self._audio.take(), progress=self.progress, cancel=self.cancel, **self.options
        )


class ArrivingAudio:
    """The stretch of a stream's samples still needed: ``[start, end)`` in stream positions. Blocks append at
    the end; ``forget_before`` drops what no later window reads (compacting when half the buffer is dead)."""

    def __init__(self) -> None:
        self._data = np.empty(0, np.float32)
        self._offset = 0  # index in _data of stream position ``start``
        self.start = 0
        self.end = 0

    def append(self, pcm: np.ndarray) -> None:
        live = self.end - self.start
        if self._offset + live + pcm.size > self._data.size:
            if self._offset and live + pcm.size <= self._data.size:
                self._data[:live] = self._data[self._offset : self._offset + live]  # compact in place
            else:
                grown = np.empty(max(2 * self._data.size, live + pcm.size, 1 << 16), np.float32)
                grown[:live] = self._data[self._offset : self._offset + live]
                self._data = grown
            self._offset = 0
        self._data[self._offset + live : self._offset + live + pcm.size] = pcm
        self.end += pcm.size

    def forget_before(self, position: int) -> None:
        position = min(max(position, self.start), self.end)
        self._offset += position - self.start
        self.start = position
        if self.start == self.end:
            self._offset = 0
        elif self._data.size > (1 << 22) and 4 * (self.end - self.start) < self._data.size:
            self._data = self._data[self._offset : self._offset + self.end - self.start].copy()
            self._offset = 0

    def read(self, start: int, end: int) -> np.ndarray:
        """Samples ``[start, end)`` (a view): they must still be held."""
        if start < self.start or end > self.end or start > end:
            raise AssertionError(f"samples [{start}, {end}) are not held ([{self.start}, {self.end}))")
        return self._data[self._offset + start - self.start : self._offset + end - self.start]


class WindowDecoder(Protocol):
    """A family's side of a :class:`ConsecutiveWindowsJob`."""

    window_samples: int

    def decode(self, samples: np.ndarray, start: int) -> None:
        """Decode the window that starts at stream sample ``start`` (and keep its result)."""
        ...

    def transcript(self, total_s: float, wall_s: float) -> Transcript:
        """The transcript of every window decoded, for ``total_s`` of audio decoded in ``wall_s``."""
        ...


class ConsecutiveWindowsJob:
    """One pass over consecutive, non-overlapping windows: each is decoded as soon as it is full, and only the
    window being filled is held."""

    passes = 1

    def __init__(self, windows: WindowDecoder, control: JobControl) -> None:
        self.windows = windows
        self.control = control
        self._audio = ArrivingAudio()
        self._ended = False
        self._started = time.perf_counter()

    def feed(self, pcm: np.ndarray) -> None:
        if self._ended:
            raise UsageError("audio after the end of a job's only pass")
        if self.control.cancel is not None:
            self.control.cancel.check()
        self._audio.append(pcm)
        while self._audio.end - self._audio.start >= self.windows.window_samples:
            self._decode(self._audio.start + self.windows.window_samples)

    def end_pass(self) -> None:
        self._ended = True
        if self._audio.end > self._audio.start:
            self._decode(self._audio.end)

    def finish(self) -> Transcript:
        if not self._ended:
            raise UsageError("a job finished before its audio ended")
        total_s = self._audio.end / SAMPLE_RATE
        self.control.step(total_s, total_s)
        return self.windows.transcript(total_s, time.perf_counter() - self._started)

    def _decode(self, end: int) -> None:
        start = self._audio.start
        self.control.step(start / SAMPLE_RATE, None)  # the length is known only at the end
        self.windows.decode(self._audio.read(start, end), start)
        self._audio.forget_before(end)
