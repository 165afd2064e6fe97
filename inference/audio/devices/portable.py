"""Windows and macOS inputs through the soundcard library (untested here: no such machine in CI).

soundcard records WASAPI loopback of an output on Windows (``include_loopback=True``). On macOS it offers
microphones only; system audio comes through ScreenCaptureKit (``screencapture``, macOS 13+), else needs a
loopback device (BlackHole, Loopback) that then lists as a microphone.
"""

from __future__ import annotations

import sys
from typing import Any

from inference.audio.devices import screencapture
from inference.audio.devices.choices import (
    MIC_DEFAULT,
    MICROPHONES,
    SOUNDCARD_LOOPBACK,
    SOUNDCARD_MIC,
    SYSTEM_AUDIO,
    SYSTEM_DEFAULT,
    SYSTEM_DEFAULT_LABEL,
    InputChoice,
    InputDeviceError,
)

MACOS_SYSTEM_AUDIO_FIX = "on macOS, " + screencapture.LOOPBACK_FIX


def soundcard_module() -> Any:
    """The soundcard library; on Linux it connects to PulseAudio as it is imported, so a missing server fails
    here, with a sentence instead of its AssertionError."""
    try:
        import soundcard
    except Exception as exc:  # ImportError, OSError (no libpulse), AssertionError (no server answered)
        raise InputDeviceError(
            f"cannot reach the sound system ({type(exc).__name__}: {exc})",
            "start the sound server (PulseAudio, or PipeWire with pipewire-pulse) and try again",
        ) from exc
    return soundcard


def list_choices() -> list[InputChoice]:
    sc = soundcard_module()
    try:
        default_mic = sc.default_microphone().id
        devices = sc.all_microphones(include_loopback=sys.platform == "win32")
    except Exception as exc:
        raise InputDeviceError(f"cannot list the audio inputs: {exc}", "check the sound settings") from exc
    microphones = [
        InputChoice(SOUNDCARD_MIC + str(d.id), str(d.name), MICROPHONES, d.id == default_mic)
        for d in devices
        if not d.isloopback
    ]
    loopbacks = [
        InputChoice(SOUNDCARD_LOOPBACK + str(d.id), str(d.name), SYSTEM_AUDIO)
        for d in devices
        if d.isloopback
    ]
    offers_system = bool(loopbacks) or (
        sys.platform == "darwin" and screencapture.unavailable_reason() is None
    )
    system = [InputChoice(SYSTEM_DEFAULT, SYSTEM_DEFAULT_LABEL, SYSTEM_AUDIO, True)] if offers_system else []
    return microphones + system + loopbacks


def open_device(input_id: str) -> tuple[Any, str]:
    """The soundcard microphone object for ``input_id`` and what to call it."""
    sc = soundcard_module()
    try:
        if input_id == MIC_DEFAULT:
            device = sc.default_microphone()
        elif input_id == SYSTEM_DEFAULT:
            if sys.platform != "win32":
                raise InputDeviceError(
                    "this system offers no capture of what it plays", MACOS_SYSTEM_AUDIO_FIX
                )
            device = sc.get_microphone(sc.default_speaker().id, include_loopback=True)
        elif input_id.startswith(SOUNDCARD_LOOPBACK):
            device = sc.get_microphone(input_id[len(SOUNDCARD_LOOPBACK) :], include_loopback=True)
        else:
            device = sc.get_microphone(input_id[len(SOUNDCARD_MIC) :])
    except InputDeviceError:
        raise
    except Exception as exc:  # IndexError for an id that is gone
        raise InputDeviceError(
            f"the input {input_id!r} is not there ({exc})", "choose another input"
        ) from exc
    return device, str(device.name)
