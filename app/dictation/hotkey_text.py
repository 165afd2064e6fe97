"""Reading a push-to-talk hotkey string (pynput's format: ``<ctrl>+<alt>+<space>``, ``<f9>``, ``<ctrl>+d``)."""

from __future__ import annotations

from app.dictation.key_filters import DARWIN_KEYCODE, EVDEV_KEY, MODIFIERS, WIN32_VK
from inference.errors import UsageError

#: The ``<name>`` keys a hotkey may use (pynput's names, left/right variants folded), without importing pynput:
#: it cannot be imported in a Wayland session without an X display.
NAMED_KEYS = frozenset(
    {name for table in (WIN32_VK, DARWIN_KEYCODE, EVDEV_KEY) for name in table if len(name) > 1}
    | set(MODIFIERS)
    | {
        "media_play_pause",
        "media_volume_mute",
        "media_volume_down",
        "media_volume_up",
        "media_previous",
        "media_next",
    }
)


def parse_hotkey(text: str) -> frozenset[str]:
    """Key names of a hotkey string (``<ctrl>+<alt>+<space>``, ``<f9>``, ``<ctrl>+d``); a clear error otherwise."""
    names = set()
    for part in (p.strip() for p in text.split("+")):
        if len(part) == 1:
            names.add(part.lower())
        elif (
            len(part) > 2
            and part.startswith("<")
            and part.endswith(">")
            and _base_name(part[1:-1].lower()) in NAMED_KEYS
        ):
            names.add(_base_name(part[1:-1].lower()))  # by name: key values differ between backends
        else:
            raise UsageError(
                f"cannot read the hotkey {text!r} (at {part!r})",
                "write it like <ctrl>+<alt>+<space>, <f9> or <ctrl>+d",
            )
    return frozenset(names)


def _base_name(name: str) -> str:
    for suffix in ("_l", "_r", "_gr"):
        if name.endswith(suffix):
            return name[: -len(suffix)]
    return name
