"""Audio sources for the live pipeline: a sound-card input, a recording played in real time, or an array.

Every source delivers float32 mono 16 kHz blocks to a ``sink`` callback on its own thread. The sound
card's callback only copies into a queue (PortAudio calls it on a real-time thread that must never wait
on Python work); conversion happens on the source's pump thread.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import soxr

from inference.audio.limits import DEFAULT_FILE_SECONDS, AudioLimits
from inference.contract import SAMPLE_RATE
from inference.errors import CaptioneerError, InputFileError, UsageError

log = logging.getLogger("captioneer.app.audio")
Sink = Callable[[np.ndarray], None]
BLOCK_S = 0.02  # what a file source plays per step


class AudioSourceError(CaptioneerError):
    """The input device is missing, busy, unplugged or the audio library is not installed."""


class AudioSource(Protocol):
    name: str

    def start(self, sink: Sink, on_end: Callable[[str | None], None]) -> None:
        """Deliver blocks to ``sink`` until stopped; ``on_end(reason)`` when the input ends by itself
        (``None`` for the normal end of a recording, a sentence for a failure such as an unplugged device)."""
        ...

    def stop(self) -> None: ...


@dataclass(frozen=True)
class InputDevice:
    index: int
    name: str
    channels: int
    default_rate: float
    is_default: bool


def _sounddevice() -> Any:
    try:
        import sounddevice
    except OSError as exc:  # the module is installed but the PortAudio library is not
        raise AudioSourceError(
            f"the audio library PortAudio is not installed ({exc})",
            "install it: `sudo apt-get install libportaudio2` (Debian/Ubuntu), `brew install portaudio` (macOS)",
        ) from exc
    return sounddevice


def list_input_devices() -> list[InputDevice]:
    sd = _sounddevice()
    try:
        devices = sd.query_devices()
        default_in = sd.default.device[0]
    except Exception as exc:  # PortAudioError and friends
        raise AudioSourceError(f"cannot list audio devices: {exc}", "check the sound system") from exc
    return [
        InputDevice(
            i, str(d["name"]), int(d["max_input_channels"]), float(d["default_samplerate"]), i == default_in
        )
        for i, d in enumerate(devices)
        if int(d["max_input_channels"]) > 0
    ]


class _Converter:
    """Any rate and channel count → mono 16 kHz, one soxr stream so block edges leave no clicks."""

    def __init__(self, rate: int) -> None:
        self._resampler = (
            soxr.ResampleStream(rate, SAMPLE_RATE, 1, dtype="float32") if rate != SAMPLE_RATE else None
        )

    def __call__(self, block: np.ndarray, last: bool = False) -> np.ndarray:
        mono = (
            block.mean(axis=1, dtype=np.float32) if block.ndim == 2 else block.astype(np.float32, copy=False)
        )
        if self._resampler is not None:
            mono = self._resampler.resample_chunk(np.ascontiguousarray(mono), last=last)
        return np.ascontiguousarray(mono, dtype=np.float32)


class DeviceSource:
    """A sound-card input through sounddevice (PortAudio)."""

    def __init__(self, device: int | str | None = None, block_s: float = 0.03) -> None:
        self.device = device
        self.block_s = block_s
        self.name = "default microphone" if device is None else str(device)
        self._queue: queue.Queue[np.ndarray | None] = queue.Queue()
        self._stream: Any = None
        self._pump: threading.Thread | None = None
        self._stopping = threading.Event()

    def start(self, sink: Sink, on_end: Callable[[str | None], None]) -> None:
        sd = _sounddevice()
        try:
            info = sd.query_devices(self.device, "input")
            rate = int(info["default_samplerate"])
            self.name = str(info["name"])
            self._stream = sd.InputStream(
                device=self.device,
                channels=1,
                samplerate=rate,
                dtype="float32",
                blocksize=int(rate * self.block_s),
                callback=self._callback,
                finished_callback=lambda: self._queue.put(None),
            )
            self._stream.start()
        except Exception as exc:  # PortAudioError, ValueError for an unknown device
            raise AudioSourceError(
                f"cannot open the input device {self.name!r}: {exc}",
                "pick another device, plug it in, or close the program that holds it",
            ) from exc
        converter = _Converter(rate)

        def pump() -> None:
            while True:
                block = self._queue.get()
                if block is None:
                    if not self._stopping.is_set():  # PortAudio ended the stream: unplugged or taken away
                        on_end(
                            f"the input device {self.name!r} stopped delivering audio (unplugged or in use?)"
                        )
                    return
                sink(converter(block))

        self._pump = threading.Thread(target=pump, name="captioneer-audio", daemon=True)
        self._pump.start()

    def _callback(self, indata: np.ndarray, _frames: int, _time: Any, status: Any) -> None:
        if status:
            log.debug("audio input status: %s", status)
        self._queue.put(indata.copy())  # nothing else here: this runs on PortAudio's real-time thread

    def stop(self) -> None:
        self._stopping.set()
        if self._stream is not None:
            try:
                self._stream.stop()
                self._stream.close()
            except Exception:  # an unplugged device may already be gone
                log.debug("closing the input stream failed", exc_info=True)
            self._stream = None
        self._queue.put(None)
        if self._pump is not None:
            self._pump.join(timeout=5)


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

    def pieces(self, step: int) -> Iterator[np.ndarray]:
        carry = np.zeros(0, np.float32)
        for block in self.blocks():
            if carry.size:
                block = np.concatenate([carry, block])
            whole = block.size - block.size % step
            for start in range(0, whole, step):
                yield block[start : start + step]
            carry = block[whole:]
        if carry.size:
            yield carry
