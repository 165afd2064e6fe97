"""PortAudio's inputs through sounddevice: where no sound server answers (a bare ALSA system), and for settings
that still name a PortAudio device.

Ids are ``portaudio:NAME`` (the device's name, as sounddevice matches it). PortAudio offers no monitor of an
output, so this list has microphones only. The stream's callback only copies into a queue (PortAudio calls it
on a real-time thread that must never wait on Python work); conversion to mono 16 kHz happens on a pump thread.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import soxr

from inference.audio.devices.choices import MIC_DEFAULT, MICROPHONES, PORTAUDIO, InputChoice, InputDeviceError
from inference.contract import SAMPLE_RATE

log = logging.getLogger("captioneer.audio.portaudio")
Sink = Callable[[np.ndarray], None]


@dataclass(frozen=True)
class InputDevice:
    index: int
    name: str
    channels: int
    default_rate: float
    is_default: bool


def sounddevice_module() -> Any:
    try:
        import sounddevice
    except OSError as exc:  # the module is installed but the PortAudio library is not
        raise InputDeviceError(
            f"the audio library PortAudio is not installed ({exc})",
            "install it: `sudo apt-get install libportaudio2` (Debian/Ubuntu), `brew install portaudio` (macOS)",
        ) from exc
    return sounddevice


def list_input_devices() -> list[InputDevice]:
    sd = sounddevice_module()
    try:
        devices = sd.query_devices()
        default_in = sd.default.device[0]
    except Exception as exc:  # PortAudioError and friends
        raise InputDeviceError(f"cannot list audio devices: {exc}", "check the sound system") from exc
    return [
        InputDevice(
            i, str(d["name"]), int(d["max_input_channels"]), float(d["default_samplerate"]), i == default_in
        )
        for i, d in enumerate(devices)
        if int(d["max_input_channels"]) > 0
    ]


def list_choices() -> list[InputChoice]:
    """PortAudio's inputs as microphones, by ``portaudio:NAME``."""
    return [
        InputChoice(PORTAUDIO + device.name, device.name, MICROPHONES, device.is_default)
        for device in list_input_devices()
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
    """A sound-card input through sounddevice (PortAudio): ``device`` is its name or index, None the default."""

    def __init__(self, device: int | str | None = None, block_s: float = 0.03) -> None:
        self.device = device
        self.block_s = block_s
        self.name = "default microphone" if device is None else str(device)
        self._queue: queue.Queue[np.ndarray | None] = queue.Queue()
        self._stream: Any = None
        self._pump: threading.Thread | None = None
        self._stopping = threading.Event()

    @property
    def input_id(self) -> str:
        """The id this input has in ``captioneer devices`` (a lost one falls back to the default microphone)."""
        return MIC_DEFAULT if self.device is None else PORTAUDIO + str(self.device)

    def start(self, sink: Sink, on_end: Callable[[str | None], None]) -> None:
        sd = sounddevice_module()
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
            raise InputDeviceError(
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
