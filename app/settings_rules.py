"""What each setting may hold beyond its type (Qt-free): the choices the menus offer and the ranges the dialogs
allow. A value from ``settings.json`` outside them falls back to the default with a warning, so a hand edit or
a hostile file cannot reach the UI or the dictation capture (which refuses out-of-range values)."""

from __future__ import annotations

import math
import re
from collections.abc import Callable

from app.dictation.capture import LIMITS as CAPTURE_LIMITS

Rule = Callable[[object], bool]
_COLOR = re.compile(r"#(?:[0-9a-fA-F]{3}|[0-9a-fA-F]{6}|[0-9a-fA-F]{8})")  # also keeps it out of style sheets


def one_of(*choices: str) -> Rule:
    return lambda value: value in choices


def between(low: float, high: float) -> Rule:
    return lambda value: isinstance(value, int | float) and math.isfinite(value) and low <= value <= high


def _color(value: object) -> bool:
    return isinstance(value, str) and _COLOR.fullmatch(value) is not None


def _positions(value: object) -> bool:
    """screen name -> [x, y] in integer pixels."""
    return isinstance(value, dict) and all(
        isinstance(name, str)
        and isinstance(point, list)
        and len(point) == 2
        and all(type(c) is int and abs(c) < 1 << 20 for c in point)
        for name, point in value.items()
    )


def _optional(rule: Rule) -> Rule:
    return lambda value: value is None or rule(value)


_CAPTURE_MS = between(*(1000 * bound for bound in CAPTURE_LIMITS["padding_s"]))

RULES: dict[str, Rule] = {
    "threads": _optional(between(1, 4096)),
    "caption_font_size": between(6, 96),
    "caption_theme": one_of("system", "dark", "high_contrast"),
    "caption_mode": one_of("auto", "segmented"),
    "overlay_opacity": between(0.1, 1.0),
    "overlay_lines": between(1, 6),
    "overlay_font_size": between(8, 96),
    "overlay_text_color": _color,
    "overlay_provisional_color": _color,
    "overlay_background": _color,
    "overlay_hold_s": between(0.5, 120.0),
    "overlay_position": one_of("bottom", "top", "custom"),
    "overlay_after_fade": one_of("new", "last_line"),
    "overlay_custom_positions": _positions,
    "push_to_talk_mode": one_of("hold", "toggle", "hybrid"),
    "trailing_silence_ms": between(*(1000 * bound for bound in CAPTURE_LIMITS["trailing_s"])),
    "dictation_padding_ms": _CAPTURE_MS,
    "dictation_pre_roll_ms": between(*(1000 * bound for bound in CAPTURE_LIMITS["pre_roll_s"])),
    "dictation_output": one_of("paste", "type", "copy"),
    "dictation_trailing": one_of("space", "newline", "none"),
    "parakeet_weights": one_of("native", "int8"),
    # a user may raise it (docs/audio_input.md), but not to infinity
    "max_file_audio_s": between(1.0, 30 * 24 * 3600.0),
}
