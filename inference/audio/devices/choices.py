"""What a person can caption: microphones and system audio, each with a stable id kept in settings.

Ids survive restarts and re-plugging (they name the sound server's device, never a list position):

* ``mic:default`` — whatever the system's default microphone is now;
* ``system:default`` — "What this computer plays": the monitor of the default output, following it;
* ``pulse:source:NAME`` — one PulseAudio/PipeWire source (a microphone, or ``SINK.monitor`` for an output);
* ``soundcard:mic:ID`` / ``soundcard:loopback:ID`` — a device on Windows or macOS, by the soundcard library's id;
* ``portaudio:NAME`` — a PortAudio device, by its name, where no sound server answers (the command line);
* ``meeting:default`` — meeting mode: the default microphone ("You") and what the computer plays ("Others"),
  captured together (the window's third group; ``meeting_choices``).
"""

from __future__ import annotations

from dataclasses import dataclass

from inference.errors import CaptioneerError

MIC_DEFAULT = "mic:default"
SYSTEM_DEFAULT = "system:default"
PULSE_SOURCE = "pulse:source:"
SOUNDCARD_MIC = "soundcard:mic:"
SOUNDCARD_LOOPBACK = "soundcard:loopback:"
PORTAUDIO = "portaudio:"  # PortAudio's devices by name, where no sound server answers
MEETING_DEFAULT = "meeting:default"
MICROPHONES = "Microphones"
SYSTEM_AUDIO = "System audio"
MEETING = "Meeting: microphone + system audio"
SYSTEM_DEFAULT_LABEL = "What this computer plays"
MEETING_LABEL = "You (microphone) and Others (what this computer plays)"
# `captioneer transcribe --input system`
SHORT_NAMES = {"mic": MIC_DEFAULT, "system": SYSTEM_DEFAULT, "meeting": MEETING_DEFAULT}


class InputDeviceError(CaptioneerError):
    """The sound server is unreachable, or the chosen input is gone or cannot be opened."""


class NoSoundServerError(InputDeviceError):
    """No sound server answered at all (as opposed to one that lacks the input asked for)."""


@dataclass(frozen=True)
class InputChoice:
    """One entry of the input list: ``id`` for settings and the command line, ``label`` for people."""

    id: str
    label: str
    group: str  # MICROPHONES, SYSTEM_AUDIO or MEETING
    is_default: bool = False

    @property
    def is_system_audio(self) -> bool:
        return self.group == SYSTEM_AUDIO


def expand_short_name(input_id: str) -> str:
    """``mic`` and ``system`` are short for the defaults; any other id is taken as it is."""
    return SHORT_NAMES.get(input_id, input_id)


def is_input_id(value: str) -> bool:
    """Whether ``value`` is one of this module's ids (older settings hold PortAudio device names instead)."""
    return value in (MIC_DEFAULT, SYSTEM_DEFAULT) or value.startswith(
        (PULSE_SOURCE, SOUNDCARD_MIC, SOUNDCARD_LOOPBACK)
    )


def meeting_choices(choices: list[InputChoice]) -> list[InputChoice]:
    """The meeting entry, where there is a microphone and system audio to capture together."""
    groups = {choice.group for choice in choices}
    if MICROPHONES in groups and SYSTEM_AUDIO in groups:
        return [InputChoice(MEETING_DEFAULT, MEETING_LABEL, MEETING, True)]
    return []


def fallback_for(input_id: str) -> str:
    """The default that replaces a device that is gone: system audio stays system audio."""
    if input_id == SYSTEM_DEFAULT or input_id.startswith(SOUNDCARD_LOOPBACK):
        return SYSTEM_DEFAULT
    if input_id.startswith(PULSE_SOURCE) and input_id.endswith(".monitor"):
        return SYSTEM_DEFAULT
    return MIC_DEFAULT


def find_choice(choices: list[InputChoice], input_id: str) -> InputChoice | None:
    return next((choice for choice in choices if choice.id == input_id), None)


def render_listing(choices: list[InputChoice]) -> str:
    """The ``captioneer devices`` table: one group after another, the id first (what ``--input`` takes)."""
    lines: list[str] = []
    for group in (MICROPHONES, SYSTEM_AUDIO):
        members = [choice for choice in choices if choice.group == group]
        lines.append(f"{group}:")
        if not members:
            lines.append("  (none found)")
        width = max((len(choice.id) for choice in members), default=0)
        for choice in members:
            mark = " (default)" if choice.is_default else ""
            lines.append(f"  {choice.id.ljust(width)}  {choice.label}{mark}")
    lines.append("Short names for --input: mic (the default microphone), system (what this computer plays)")
    return "\n".join(lines) + "\n"
