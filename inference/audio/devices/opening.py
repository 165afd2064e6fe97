"""The capture for an input id: through the sound server, or PortAudio's where no sound server answers."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from inference.audio.devices import portaudio, pulse
from inference.audio.devices.capture import SoundServerCapture
from inference.audio.devices.choices import MIC_DEFAULT, PORTAUDIO, expand_short_name
from inference.audio.devices.listing import NO_SERVER_NOTE, uses_pulse


def open_capture(input_id: str, notify: Callable[[str], object] = lambda _note: None) -> Any:
    """The capture for ``input_id`` (not started): a ``portaudio:NAME`` id through PortAudio; the default
    microphone through PortAudio where no sound server answers (said through ``notify``); any other id through
    the sound server (``SoundServerCapture``, which names the fix when there is none)."""
    input_id = expand_short_name(input_id)
    if input_id.startswith(PORTAUDIO):
        return portaudio.DeviceSource(input_id[len(PORTAUDIO) :])
    if input_id == MIC_DEFAULT and uses_pulse() and not pulse.server_answers():
        notify(NO_SERVER_NOTE.format("capturing the default input"))
        return portaudio.DeviceSource(None)
    return SoundServerCapture(input_id)
