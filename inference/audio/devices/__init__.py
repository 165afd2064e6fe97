"""Audio inputs by stable id — microphones and system audio — listed and captured through the sound server."""

from inference.audio.devices.capture import SoundServerCapture
from inference.audio.devices.choices import (
    MEETING,
    MEETING_DEFAULT,
    MIC_DEFAULT,
    MICROPHONES,
    SYSTEM_AUDIO,
    SYSTEM_DEFAULT,
    InputChoice,
    InputDeviceError,
    expand_short_name,
    fallback_for,
    find_choice,
    is_input_id,
    meeting_choices,
    render_listing,
)
from inference.audio.devices.listing import list_inputs

__all__ = [
    "MEETING",
    "MEETING_DEFAULT",
    "MICROPHONES",
    "MIC_DEFAULT",
    "SYSTEM_AUDIO",
    "SYSTEM_DEFAULT",
    "InputChoice",
    "InputDeviceError",
    "SoundServerCapture",
    "expand_short_name",
    "fallback_for",
    "find_choice",
    "is_input_id",
    "list_inputs",
    "meeting_choices",
    "render_listing",
]
