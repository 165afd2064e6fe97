"""Audio sources for the live pipeline: a sound-card input, a recording played in real time, or an array.

Every source delivers float32 mono 16 kHz blocks to a ``sink`` callback on its own thread. Inputs of the
sound server are ``inference.audio.devices.SoundServerCapture``; PortAudio's are ``DeviceSource``
(``inference.audio.devices.portaudio``, so the command line opens them too).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Protocol

import numpy as np

from inference.audio.devices.choices import InputDeviceError
from inference.audio.devices.portaudio import DeviceSource, InputDevice, list_input_devices
from inference.audio.limits import DEFAULT_FILE_SECONDS, AudioLimits
from inference.contract import SAMPLE_RATE
from inference.errors import CaptioneerError, InputFileError, UsageError

__all__ = ["AudioSourceError", "DeviceSource", "InputDevice", "list_input_devices"]
Sink = Callable[[np.ndarray], None]
BLOCK_S = 0.02  # what a file source plays per step


# One error for an input that cannot be listed or opened, whichever library was asked.
AudioSourceError = InputDeviceError


class AudioSource(Protocol):
    name: str

    def start(self, sink: Sink, on_end: Callable[[str | None], None]) -> None:
        """Deliver blocks to ``sink`` until stopped; ``on_end(reason)`` when the input ends by itself
        (``None`` for the normal end of a recording, a sentence for a failure such as an unplugged device)."""
        ...

    def stop(self) -> None: ...


class ArraySource:
    """Plays samples through the pipeline at ``speed`` times real time (1.0 = live; tests go faster)."""

    def __init__(
        self,
        samples: np.ndarray,
        name: str = "recording",
        speed: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.samples = np.ascontiguousarray(samples, dtype=np.float32)
        self.name = name
        self.speed = speed
        self.clock = clock
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.played_samples = 0  # how far playback got (progress bars, tests)

    @property
    def total_samples(self) -> int:
        return int(self.samples.size)

    @property
    def problems(self) -> tuple[str, ...]:
        """What playing the input found wrong with it (a damaged recording), for the window to say at the end."""
        return ()

    @property
    def paced_by_model(self) -> bool:
        """Faster than real time: the pipeline should make the source wait for the model, not refuse audio."""
        return self.speed > 1.0

    def pieces(self, step: int) -> Iterator[np.ndarray]:
        """The samples in pieces of ``step`` (the last one shorter)."""
        for start in range(0, self.samples.size, step):
            yield self.samples[start : start + step]

    def start(self, sink: Sink, on_end: Callable[[str | None], None]) -> None:
        step = int(BLOCK_S * SAMPLE_RATE)

        def play() -> None:
            began = self.clock()
            try:
                for index, piece in enumerate(self.pieces(step)):
                    if self._stop.is_set():
                        return
                    due = began + index * BLOCK_S / self.speed
                    delay = due - self.clock()
                    if delay > 0 and self._stop.wait(delay):
                        return
                    sink(piece)
                    self.played_samples += piece.size
            except CaptioneerError as exc:  # a recording that cannot be decoded past some point
                on_end(str(exc))
                return
            on_end(None)

        self._thread = threading.Thread(target=play, name="captioneer-file-source", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=5)


class FileSource(ArraySource):
    """A recording played in real time (``captioneer --input-file talk.wav``), or faster (``speed`` > 1): then it
    is paced by the model (``paced_by_model``), never dropping audio."""

    def __init__(self, path: Path, speed: float = 1.0, max_audio_s: float = DEFAULT_FILE_SECONDS) -> None:
        from inference.audio.decoding import FileBlocks

        path = Path(path)
        if not path.is_file():
            raise InputFileError(f"input file not found: {path}", "check the path")
        if not 0 < max_audio_s < float("inf"):
            raise UsageError(
                f'"max_file_audio_s" in settings.json must be a positive number of seconds, got {max_audio_s}',
                "correct it, or remove it to use the default",
            )
        limits = AudioLimits(
            max_audio_s,
            'raise "max_file_audio_s" (seconds) in Captioneer\'s settings.json, or split the file',
        )
        # Decoded as it plays, a block at a time: a recording of hours does not sit in memory (issue 43).
        self.blocks = FileBlocks(path, limits)
        super().__init__(np.zeros(0, np.float32), path.name, speed)

    @property
    def total_samples(self) -> int:
        expected = self.blocks.expected_samples
        return max(self.played_samples, expected if expected is not None else self.played_samples)

    @property
    def problems(self) -> tuple[str, ...]:
        return self.blocks.problems

    def pieces(self, step: int) -> Iterator[np.ndarray]:
        return self.blocks.pieces(step)
