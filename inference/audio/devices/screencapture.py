"""macOS "What this computer plays" through ScreenCaptureKit (macOS 13+), untested here: no Mac in CI.

CoreAudio offers apps no loopback of the outputs; ScreenCaptureKit's stream of the main display carries the
audio the computer plays (this process's own excluded). The stream asks for 48 kHz stereo float32; each
sample buffer is copied out of its CMBlockBuffer, downmixed, resampled to 16 kHz with soxr on our own thread
and cut into the same blocks as the other captures. macOS asks for the Screen Recording permission the first
time; until it is granted the content query fails, which is said with the System Settings path as the fix.
pyobjc is imported only on this path, so the module imports (and its pure parts test) on any platform.
"""

from __future__ import annotations

import importlib.util
import logging
import platform
import queue
import sys
import threading
from collections.abc import Callable, Iterator
from functools import cache
from typing import Any

import numpy as np
import soxr

from inference.audio.devices.choices import SYSTEM_DEFAULT, SYSTEM_DEFAULT_LABEL, InputDeviceError
from inference.contract import SAMPLE_RATE

log = logging.getLogger("captioneer.audio.screencapture")
Sink = Callable[[np.ndarray], None]
CAPTURE_RATE = 48000  # what ScreenCaptureKit delivers natively (it offers 8, 16, 24 and 48 kHz)
CAPTURE_CHANNELS = 2
FIRST_VERSION = (13, 0)  # SCStreamConfiguration.capturesAudio arrived in macOS 13
NON_INTERLEAVED_FLAG = 1 << 5  # kAudioFormatFlagIsNonInterleaved in AudioStreamBasicDescription.mFormatFlags
CALL_WAIT_S = 10.0  # a completion handler that never comes must not hang the caller
LOOPBACK_FIX = (
    "install a loopback device (for example BlackHole), make it the output (or part of a multi-output device "
    "that keeps the speakers playing) in Audio MIDI Setup, and choose it under Microphones"
)
PERMISSION_FIX = (
    "allow it in System Settings → Privacy & Security → Screen Recording (macOS asks once; the app that runs "
    "Captioneer — Terminal, or Captioneer itself — must be listed and switched on), then quit and start "
    "Captioneer again; or " + LOOPBACK_FIX
)


def macos_version(release: str | None = None) -> tuple[int, ...]:
    """``platform.mac_ver()``'s release as numbers (empty where it is not macOS or unreadable)."""
    text = platform.mac_ver()[0] if release is None else release
    try:
        return tuple(int(part) for part in text.split("."))
    except ValueError:
        return ()


def unavailable_reason() -> str | None:
    """Why ScreenCaptureKit audio cannot be used on this computer, or None where it can."""
    if sys.platform != "darwin":
        return "ScreenCaptureKit is macOS only"
    version = macos_version()
    if version < FIRST_VERSION:
        shown = ".".join(map(str, version)) or "unknown"
        return f"this macOS ({shown}) has no ScreenCaptureKit audio capture (macOS 13 or later)"
    if importlib.util.find_spec("ScreenCaptureKit") is None or importlib.util.find_spec("CoreMedia") is None:
        return "pyobjc-framework-ScreenCaptureKit is not installed (pip install pyobjc-framework-ScreenCaptureKit)"
    return None


def applies_to(input_id: str) -> bool:
    """Whether ``input_id`` is captured through ScreenCaptureKit here: system audio on macOS."""
    return input_id == SYSTEM_DEFAULT and sys.platform == "darwin"


def unavailable_error(reason: str) -> InputDeviceError:
    return InputDeviceError(f"cannot capture what this computer plays: {reason}", LOOPBACK_FIX)


def permission_error(detail: str) -> InputDeviceError:
    """The content query failed: almost always the Screen Recording permission not (yet) granted."""
    return InputDeviceError(
        f"macOS did not let Captioneer capture what this computer plays ({detail}); ScreenCaptureKit needs "
        "the Screen Recording permission",
        PERMISSION_FIX,
    )


def mono_from_bytes(raw: bytes, frames: int, channels: int, non_interleaved: bool) -> np.ndarray:
    """One float32 buffer's samples as mono, channels averaged. Planar data holds one equal plane a channel
    (each ``len(raw) / channels`` bytes, any alignment padding at its end); interleaved data one frame's
    channels together."""
    if non_interleaved:
        plane = len(raw) // channels
        planes = [np.frombuffer(raw, np.float32, count=frames, offset=c * plane) for c in range(channels)]
        shaped = np.stack(planes, axis=1)
    else:
        shaped = np.frombuffer(raw, np.float32, count=frames * channels).reshape(frames, channels)
    mono = shaped.mean(axis=1, dtype=np.float32) if channels > 1 else shaped[:, 0]
    return np.nan_to_num(mono, nan=0.0, posinf=0.0, neginf=0.0).astype(np.float32, copy=False)


class To16kBlocks:
    """Mono chunks at ``rate`` in, float32 blocks of ``block_samples`` at 16 kHz out (soxr keeps its state
    across chunks, so block edges add no clicks)."""

    def __init__(self, rate: int, block_samples: int) -> None:
        self.block_samples = block_samples
        self._resampler = soxr.ResampleStream(rate, SAMPLE_RATE, 1, dtype="float32", quality="VHQ")
        self._pending = np.zeros(0, dtype=np.float32)

    def feed(self, mono: np.ndarray) -> Iterator[np.ndarray]:
        resampled = self._resampler.resample_chunk(np.asarray(mono, dtype=np.float32))
        self._pending = np.concatenate([self._pending, resampled])
        while len(self._pending) >= self.block_samples:
            block, self._pending = self._pending[: self.block_samples], self._pending[self.block_samples :]
            yield np.ascontiguousarray(block)


def sample_buffer_mono(sample_buffer: Any) -> np.ndarray | None:
    """A CMSampleBuffer's audio as mono float32 at the stream's rate (None for an empty or unreadable one)."""
    import CoreMedia  # macOS only

    frames = int(CoreMedia.CMSampleBufferGetNumSamples(sample_buffer))
    block = CoreMedia.CMSampleBufferGetDataBuffer(sample_buffer)
    if frames <= 0 or block is None:
        return None
    channels, non_interleaved = _layout(sample_buffer)
    length = int(CoreMedia.CMBlockBufferGetDataLength(block))
    status, raw = CoreMedia.CMBlockBufferCopyDataBytes(block, 0, length, None)
    if status != 0 or length < frames * channels * 4:
        log.debug("skipped an audio buffer (status %s, %d bytes for %d frames)", status, length, frames)
        return None
    return mono_from_bytes(bytes(raw), frames, channels, non_interleaved)


def _layout(sample_buffer: Any) -> tuple[int, bool]:
    """Channels and whether they are planar, from the format description where pyobjc exposes its
    AudioStreamBasicDescription; else what was configured, in ScreenCaptureKit's planar float32."""
    import CoreMedia

    try:
        description = CoreMedia.CMSampleBufferGetFormatDescription(sample_buffer)
        basic = CoreMedia.CMAudioFormatDescriptionGetStreamBasicDescription(description)
        return int(basic.mChannelsPerFrame), bool(int(basic.mFormatFlags) & NON_INTERLEAVED_FLAG)
    except Exception:  # no struct from this pyobjc
        return CAPTURE_CHANNELS, True


def _wait_for_handler(call: Callable[[Callable[..., None]], None], what: str) -> tuple[Any, ...]:
    """Run an API that answers through a completion handler and wait for its arguments."""
    answered = threading.Event()
    result: list[tuple[Any, ...]] = []

    def handler(*args: Any) -> None:
        result.append(args)
        answered.set()

    call(handler)
    if not answered.wait(CALL_WAIT_S):
        raise InputDeviceError(f"macOS did not answer ({what}) within {CALL_WAIT_S:g} s", PERMISSION_FIX)
    return result[0]


@cache
def _output_class() -> Any:
    """The Objective-C class receiving the stream's buffers (an Objective-C class is defined once a process)."""
    import objc
    import ScreenCaptureKit  # noqa: F401  (registers the protocols named below)
    from Foundation import NSObject

    protocols = [objc.protocolNamed("SCStreamOutput"), objc.protocolNamed("SCStreamDelegate")]

    class CaptioneerAudioOutput(NSObject, protocols=protocols):  # type: ignore[call-arg]  # pyobjc keyword
        def initWithCapture_(self, capture: ScreenCaptureAudio) -> Any:
            self = objc.super(CaptioneerAudioOutput, self).init()
            if self is not None:
                self.capture = capture
            return self

        def stream_didOutputSampleBuffer_ofType_(self, _stream: Any, sample_buffer: Any, kind: int) -> None:
            self.capture.on_sample_buffer(sample_buffer, kind)

        def stream_didStopWithError_(self, _stream: Any, error: Any) -> None:
            self.capture.on_stopped(str(error.localizedDescription()) if error is not None else None)

    return CaptioneerAudioOutput


class ScreenCaptureAudio:
    """What the main display's session plays, as ``SoundServerCapture`` delivers it: ``start(sink, on_end)``
    then blocks of mono float32 16 kHz on its own thread until ``stop()``."""

    def __init__(self, block_samples: int) -> None:
        self.block_samples = block_samples
        self.name = SYSTEM_DEFAULT_LABEL
        self._chunks: queue.Queue[np.ndarray | str | None] = queue.Queue()
        self._delivering = threading.Event()
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        self._stream: Any = None
        self._output: Any = None

    def start(self, sink: Sink, on_end: Callable[[str | None], None]) -> None:
        reason = unavailable_reason()
        if reason is not None:
            raise unavailable_error(reason)
        self._stream, self._output = self._open_stream()
        self.start_delivering(sink, on_end)
        (error,) = _wait_for_handler(self._stream.startCaptureWithCompletionHandler_, "starting the capture")
        if error is not None:
            self.stop()
            raise permission_error(str(error.localizedDescription()))

    def start_delivering(self, sink: Sink, on_end: Callable[[str | None], None]) -> None:
        """The thread that resamples what ``on_audio`` receives and hands blocks to ``sink``."""
        self._thread = threading.Thread(
            target=self._deliver, args=(sink, on_end), name="captioneer-screencapture", daemon=True
        )
        self._thread.start()

    def _open_stream(self) -> tuple[Any, Any]:
        import ScreenCaptureKit as SCK  # macOS only

        content, error = _wait_for_handler(
            SCK.SCShareableContent.getShareableContentWithCompletionHandler_, "listing what can be captured"
        )
        if error is not None or content is None or not content.displays():
            detail = str(error.localizedDescription()) if error is not None else "no display offered"
            raise permission_error(detail)
        display = content.displays()[0]
        content_filter = SCK.SCContentFilter.alloc().initWithDisplay_excludingWindows_(display, [])
        config = SCK.SCStreamConfiguration.alloc().init()
        config.setCapturesAudio_(True)
        config.setExcludesCurrentProcessAudio_(True)  # the app's own sounds are not captions
        config.setSampleRate_(CAPTURE_RATE)
        config.setChannelCount_(CAPTURE_CHANNELS)
        config.setWidth_(2)  # the stream carries video too: keep it as small as allowed, it is never read
        config.setHeight_(2)
        output = _output_class().alloc().initWithCapture_(self)
        stream = SCK.SCStream.alloc().initWithFilter_configuration_delegate_(content_filter, config, output)
        added, add_error = stream.addStreamOutput_type_sampleHandlerQueue_error_(
            output, SCK.SCStreamOutputTypeAudio, None, None
        )
        if not added:
            detail = str(add_error.localizedDescription()) if add_error is not None else "refused"
            raise InputDeviceError(f"cannot receive the system audio ({detail})", LOOPBACK_FIX)
        return stream, output

    def on_sample_buffer(self, sample_buffer: Any, kind: int) -> None:
        """On ScreenCaptureKit's queue: copy the audio out and hand it to the delivering thread."""
        import ScreenCaptureKit as SCK

        if kind != SCK.SCStreamOutputTypeAudio or self._stopping.is_set():
            return
        try:
            mono = sample_buffer_mono(sample_buffer)
        except Exception:
            log.debug("reading an audio buffer failed", exc_info=True)
            return
        if mono is not None:
            self.on_audio(mono)

    def on_audio(self, mono: np.ndarray) -> None:
        """Mono float32 at ``CAPTURE_RATE``, from any thread."""
        self._chunks.put(mono)

    def on_stopped(self, detail: str | None) -> None:
        self._chunks.put(f"macOS stopped the system audio capture ({detail or 'no reason given'})")

    def _deliver(self, sink: Sink, on_end: Callable[[str | None], None]) -> None:
        blocks = To16kBlocks(CAPTURE_RATE, self.block_samples)
        reason: str | None = None
        try:
            while (item := self._chunks.get()) is not None:
                if isinstance(item, str):
                    reason = item
                    break
                for block in blocks.feed(item):
                    sink(block)
                    self._delivering.set()  # after the sink: a waiter finds the first block delivered
        except Exception as exc:
            log.debug("delivering system audio failed", exc_info=True)
            reason = f"the system audio capture failed ({exc})"
        finally:
            self._delivering.set()
        if reason is not None and not self._stopping.is_set():
            on_end(reason)

    def wait_until_delivering(self, timeout_s: float) -> bool:
        if not self._delivering.wait(timeout_s):
            log.warning("no system audio within %g s of starting ScreenCaptureKit", timeout_s)
            return False
        return not self._stopping.is_set() and self._thread is not None and self._thread.is_alive()

    def stop(self) -> None:
        self._stopping.set()
        stream, self._stream = self._stream, None
        if stream is not None:
            try:
                _wait_for_handler(stream.stopCaptureWithCompletionHandler_, "stopping the capture")
            except Exception:
                log.debug("stopping ScreenCaptureKit failed", exc_info=True)
        self._chunks.put(None)
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=5)
