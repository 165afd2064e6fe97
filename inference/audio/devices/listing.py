"""The inputs of this computer, from the sound server where there is one (Linux), else from soundcard."""

from __future__ import annotations

import sys

from inference.audio.devices import portable, pulse
from inference.audio.devices.choices import InputChoice


def uses_pulse() -> bool:
    return sys.platform.startswith("linux")


def list_inputs() -> list[InputChoice]:
    """Microphones, then system audio; raises InputDeviceError (with a fix) when no sound server answers."""
    if uses_pulse():
        return pulse.choices_from(pulse.read_state())
    return portable.list_choices()
