"""The inputs of this computer, from the sound server where there is one (Linux), else from soundcard, else
(no sound server) from PortAudio."""

from __future__ import annotations

import sys

from inference.audio.devices import portable, portaudio, pulse
from inference.audio.devices.choices import InputChoice, InputDeviceError, NoSoundServerError

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
