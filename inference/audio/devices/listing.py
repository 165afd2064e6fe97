"""The inputs of this computer, from the sound server where there is one (Linux), else from soundcard; and
the input to capture for an id, PortAudio's where no sound server answers."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

from inference.audio.devices import portable, portaudio, pulse
from inference.audio.devices.choices import (
    MIC_DEFAULT,
    PORTAUDIO,
    InputChoice,
    InputDeviceError,
    NoSoundServerError,
    expand_short_name,
)

NO_SERVER_NOTE = (
    "no sound server answered; {} instead, through PortAudio (system audio needs a sound server: "
    + pulse.NO_SERVER_FIX
    + ")"
)


def uses_pulse() -> bool:
    return sys.platform.startswith("linux")


def list_inputs() -> list[InputChoice]:
    """Microphones, then system audio; raises InputDeviceError (with a fix) when no sound server answers."""
    if uses_pulse():
        return pulse.choices_from(pulse.read_state())
    return portable.list_choices()


def list_inputs_or_portaudio() -> tuple[list[InputChoice], str | None]:
    """``list_inputs``, or PortAudio's inputs (``portaudio:NAME``) with a note saying why when no sound server
    answers; raises InputDeviceError naming both problems when PortAudio cannot list either."""
    try:
        return list_inputs(), None
    except NoSoundServerError as exc:
        try:
            choices = portaudio.list_choices()
        except InputDeviceError as also:
            raise InputDeviceError(f"{exc.message}; and {also.message}", exc.fix) from exc
        return choices, NO_SERVER_NOTE.format("listing its devices")


def open_capture(input_id: str, notify: Callable[[str], object] = lambda _note: None) -> Any:
    """The capture for ``input_id`` (not started): a ``portaudio:NAME`` id through PortAudio; the default
    microphone through PortAudio where no sound server answers (said through ``notify``); any other id through
    the sound server (``SoundServerCapture``, which names the fix when there is none)."""
    from inference.audio.devices.capture import SoundServerCapture

    input_id = expand_short_name(input_id)
    if input_id.startswith(PORTAUDIO):
        return portaudio.DeviceSource(input_id[len(PORTAUDIO) :])
    if input_id == MIC_DEFAULT and uses_pulse() and not pulse.server_answers():
        notify(NO_SERVER_NOTE.format("capturing the default input"))
        return portaudio.DeviceSource(None)
    return SoundServerCapture(input_id)
