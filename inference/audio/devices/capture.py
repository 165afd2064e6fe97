"""Live capture of one input (a microphone or what the computer plays) as float32 mono 16 kHz blocks.

Recording goes through the sound server with soundcard (libpulse on Linux, WASAPI on Windows, CoreAudio on
macOS), which converts to the rate and channel count asked for, so no hw: device a server already holds is
opened. On macOS "What this computer plays" goes through ScreenCaptureKit instead (``screencapture``). On
Linux a PulseWatcher ends the capture with a sentence when its source is removed or, for a
``*:default`` id, when the default changes: the owner then reopens on the (new) default.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

import numpy as np

from inference.audio.devices import portable, pulse, screencapture
from inference.audio.devices.choices import MIC_DEFAULT, SYSTEM_DEFAULT, InputDeviceError, expand_short_name
from inference.audio.devices.listing import uses_pulse
from inference.contract import SAMPLE_RATE

log = logging.getLogger("captioneer.audio.capture")
Sink = Callable[[np.ndarray], None]
BLOCK_SAMPLES = 480  # 30 ms: small enough for a lively level meter, large enough to keep Python calls rare
# A new record stream gets its first audio only when the server next renders: up to ~2 s later for a null sink
# or a timer-scheduled output that had nothing asking for low latency. What plays before that never reaches
# the stream, so a caller waits for it before saying "listening" (bounded: a slow server must not hang it).
FIRST_AUDIO_WAIT_S = 10.0


class SoundServerCapture:
    """An input by id (see ``choices``); ``start(sink, on_end)`` delivers blocks on its own thread until
    ``stop()``, every sample once ``wait_until_delivering()`` has returned True; ``on_end(reason)`` when the
    input went away by itself."""

    def __init__(self, input_id: str, block_samples: int = BLOCK_SAMPLES) -> None:
        self.input_id = expand_short_name(input_id)
        self.block_samples = block_samples
        self.name = self.input_id
        self.source_name: str | None = None  # the PulseAudio source recorded (Linux)
        self._stop = threading.Event()
        self._ended: str | None = None
        self._thread: threading.Thread | None = None
        self._delivering = threading.Event()  # the first block reached the sink (or the recording ended)
        self._watcher: pulse.PulseWatcher | None = None
        self._screen: screencapture.ScreenCaptureAudio | None = None  # macOS system audio

    @property
    def follows_default(self) -> bool:
        return self.input_id in (MIC_DEFAULT, SYSTEM_DEFAULT)

    def start(self, sink: Sink, on_end: Callable[[str | None], None]) -> None:
        if screencapture.applies_to(self.input_id):
            self._screen = screencapture.ScreenCaptureAudio(self.block_samples)
            self.name = self._screen.name
            self._screen.start(sink, on_end)
            return
        device = self._open_device()
        try:
            recorder = device.recorder(samplerate=SAMPLE_RATE, channels=1, blocksize=self.block_samples)
            recorder.__enter__()
        except Exception as exc:
            raise InputDeviceError(
                f"cannot open the input {self.name!r}: {exc}",
                "choose another input, or check the sound settings",
            ) from exc
        if uses_pulse():
            self._watcher = pulse.PulseWatcher(self._on_server_change)
            try:
                self._watcher.start()
            except InputDeviceError:
                recorder.__exit__(None, None, None)
                raise
        self._thread = threading.Thread(
            target=self._record, args=(recorder, sink, on_end), name="captioneer-capture", daemon=True
        )
        self._thread.start()

    def wait_until_delivering(self, timeout_s: float = FIRST_AUDIO_WAIT_S) -> bool:
        """Block until the stream's first audio came (True) or the recording ended or ``timeout_s`` passed
        (False): from then on every sample reaches the sink. Call it before telling a person to speak; not on
        a GUI thread (a null sink takes up to ~2 s)."""
        if self._screen is not None:
            return self._screen.wait_until_delivering(timeout_s)
        if not self._delivering.wait(timeout_s):
            log.warning("no audio from %r within %g s of opening it", self.name, timeout_s)
            return False
        return (
            self._ended is None
            and not self._stop.is_set()
            and self._thread is not None
            and self._thread.is_alive()
        )

    def _open_device(self) -> Any:
        if not uses_pulse():
            device, self.name = portable.open_device(self.input_id)
            return device
        self.source_name, self.name = pulse.resolve(self.input_id, pulse.read_state())
        sc = portable.soundcard_module()
        sc.set_name(pulse.CLIENT_NAME)
        try:
            return sc.get_microphone(self.source_name, include_loopback=True)
        except Exception as exc:  # gone between listing and opening
            raise InputDeviceError(
                f"the input {self.name!r} is not there ({exc})", "choose another input"
            ) from exc

    def _record(self, recorder: Any, sink: Sink, on_end: Callable[[str | None], None]) -> None:
        failure: str | None = None
        try:
            while not self._stop.is_set() and self._ended is None:
                block = recorder.record(self.block_samples)
                sink(np.ascontiguousarray(block[:, 0] if block.ndim == 2 else block, dtype=np.float32))
                self._delivering.set()  # after the sink: a waiter finds the first block delivered
        except Exception as exc:  # the server died or the device failed
            log.debug("capture failed", exc_info=True)
            failure = f"the input {self.name!r} stopped delivering audio ({exc})"
        finally:
            self._delivering.set()
            try:
                recorder.__exit__(None, None, None)
            except Exception:
                log.debug("closing the recorder failed", exc_info=True)
        reason = failure or self._ended
        if reason is not None and not self._stop.is_set():
            on_end(reason)

    def _on_server_change(self, state: pulse.PulseState) -> None:
        """On the watcher's thread: end the capture (with the reason) when what it records is no longer right."""
        if self.follows_default:
            try:
                now, label = pulse.resolve(self.input_id, state)
            except InputDeviceError as exc:
                self._ended = exc.message
                return
            if now != self.source_name:
                kind = "output" if self.input_id == SYSTEM_DEFAULT else "microphone"
                self._ended = f"the default {kind} changed: now {label!r}"
            return
        if all(source.name != self.source_name for source in state.sources):
            self._ended = f"the input {self.name!r} was unplugged or removed"

    def stop(self) -> None:
        self._stop.set()
        if self._screen is not None:
            self._screen.stop()
        if self._watcher is not None:
            self._watcher.stop()
            self._watcher = None
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=5)
