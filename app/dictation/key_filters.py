"""Which raw key events belong to the push-to-talk hotkey, so they can be swallowed (pure logic).

The focused application must never see the hotkey: exactly the hotkey's own press, repeats and release are
swallowed, everything else (the modifiers included, and injected events on Windows) passes. Adapters take the
Windows hook's, the macOS event tap's and evdev's event shapes (docs/dictation.md §3).
"""

from __future__ import annotations

import string
from collections.abc import Callable, Iterable
from typing import Any

from inference.errors import UsageError

MODIFIERS = ("ctrl", "alt", "shift", "cmd")


def split_hotkey(names: Iterable[str], hotkey: str = "") -> tuple[str, frozenset[str]]:
    """(trigger key, modifiers) of a parsed hotkey; a clear error unless there is exactly one trigger."""
    names = frozenset(names)
    triggers = sorted(names - set(MODIFIERS))
    if len(triggers) != 1:
        raise UsageError(
            f"the hotkey {hotkey or '+'.join(sorted(names))!r} needs exactly one key besides "
            "ctrl/alt/shift/cmd",
            "write it like <ctrl>+<alt>+<space> or <f9>",
        )
    return triggers[0], names & frozenset(MODIFIERS)


class TriggerFilter:
    """The decision shared by every platform: given the trigger key's events and the modifiers held at the
    time, swallow or not, and report the hotkey going down (once per real press) and up."""

    def __init__(
        self, modifiers: frozenset[str], on_press: Callable[[], None], on_release: Callable[[], None]
    ) -> None:
        self.modifiers = modifiers
        self.on_press = on_press
        self.on_release = on_release
        self.owned = False  # the trigger went down as the hotkey: its repeats and its release are ours too
        self._down_for_the_app = False  # the trigger went down without the modifiers: the app's press

    def trigger_event(self, down: bool, held: frozenset[str]) -> bool:
        """One event of the trigger key (``down`` for presses and auto-repeats); True: swallow it."""
        if down:
            if self.owned:
                return True  # auto-repeat of our press: swallowed, and not a new press
            if self._down_for_the_app:
                return False  # auto-repeat of a press the app got: the app gets the rest too
            if held == self.modifiers:
                self.owned = True
                self.on_press()
                return True
            self._down_for_the_app = True  # another combination (Ctrl+Shift+Space while ours is Ctrl+Space)
            return False
        self._down_for_the_app = False
        if self.owned:
            self.owned = False
            self.on_release()
            return True
        return False


def _key_table(name: str, table: dict[str, int], platform: str) -> int:
    if name in table:
        return table[name]
    raise UsageError(
        f"the hotkey key {name!r} cannot be watched on {platform}",
        "choose a letter, a digit, space, or a function key such as <f9>",
    )


# ---------------------------------------------------------------------------------------------- Windows

WM_KEYDOWN, WM_KEYUP, WM_SYSKEYDOWN, WM_SYSKEYUP = 0x0100, 0x0101, 0x0104, 0x0105
LLKHF_LOWER_IL_INJECTED, LLKHF_INJECTED = 0x02, 0x10

WIN32_VK: dict[str, int] = {
    **{c: ord(c.upper()) for c in string.ascii_lowercase},
    **{d: ord(d) for d in string.digits},
    **{f"f{n}": 0x70 + n - 1 for n in range(1, 25)},
    "space": 0x20,
    "enter": 0x0D,
    "tab": 0x09,
    "esc": 0x1B,
    "backspace": 0x08,
    "delete": 0x2E,
    "insert": 0x2D,
    "home": 0x24,
    "end": 0x23,
    "page_up": 0x21,
    "page_down": 0x22,
    "left": 0x25,
    "up": 0x26,
    "right": 0x27,
    "down": 0x28,
    "pause": 0x13,
    "print_screen": 0x2C,
    "scroll_lock": 0x91,
    "menu": 0x5D,
    "caps_lock": 0x14,
    "num_lock": 0x90,
    "-": 0xBD,
    "=": 0xBB,
    ",": 0xBC,
    ".": 0xBE,
    ";": 0xBA,
    "/": 0xBF,
    "`": 0xC0,
    "[": 0xDB,
    "]": 0xDD,
    "\\": 0xDC,
    "'": 0xDE,
}
WIN32_MODIFIER_VK: dict[int, str] = {
    0x10: "shift",
    0xA0: "shift",
    0xA1: "shift",
    0x11: "ctrl",
    0xA2: "ctrl",
    0xA3: "ctrl",
    0x12: "alt",
    0xA4: "alt",
    0xA5: "alt",
    0x5B: "cmd",
    0x5C: "cmd",
}


class Win32HotkeyFilter:
    """``decide(msg, data)`` for pynput's ``win32_event_filter``: True means swallow this event."""

    def __init__(
        self, names: Iterable[str], on_press: Callable[[], None], on_release: Callable[[], None]
    ) -> None:
        trigger, modifiers = split_hotkey(names)
        self.trigger_vk = _key_table(trigger, WIN32_VK, "Windows")
        self.core = TriggerFilter(modifiers, on_press, on_release)
        self._held_vks: set[int] = set()

    def held(self) -> frozenset[str]:
        return frozenset(WIN32_MODIFIER_VK[vk] for vk in self._held_vks)

    def decide(self, msg: int, data: Any) -> bool:
        if msg in (WM_KEYDOWN, WM_SYSKEYDOWN):
            down = True
        elif msg in (WM_KEYUP, WM_SYSKEYUP):
            down = False
        else:
            return False
        if data.flags & (LLKHF_INJECTED | LLKHF_LOWER_IL_INJECTED):
            return False  # synthetic: our own paste keys and typed text, or another tool's
        vk = data.vkCode
        if vk in WIN32_MODIFIER_VK:
            (self._held_vks.add if down else self._held_vks.discard)(vk)
            return False
        if vk != self.trigger_vk:
            return False
        return self.core.trigger_event(down, self.held())


# ---------------------------------------------------------------------------------------------- macOS

KCG_EVENT_KEY_DOWN, KCG_EVENT_KEY_UP = 10, 11
KCG_FLAGS = {"shift": 0x00020000, "ctrl": 0x00040000, "alt": 0x00080000, "cmd": 0x00100000}

# Virtual key codes (Carbon's kVK_*), by position on the US (ANSI) layout.
DARWIN_KEYCODE: dict[str, int] = {
    "a": 0,
    "s": 1,
    "d": 2,
    "f": 3,
    "h": 4,
    "g": 5,
    "z": 6,
    "x": 7,
    "c": 8,
    "v": 9,
    "b": 11,
    "q": 12,
    "w": 13,
    "e": 14,
    "r": 15,
    "y": 16,
    "t": 17,
    "1": 18,
    "2": 19,
    "3": 20,
    "4": 21,
    "6": 22,
    "5": 23,
    "=": 24,
    "9": 25,
    "7": 26,
    "-": 27,
    "8": 28,
    "0": 29,
    "]": 30,
    "o": 31,
    "u": 32,
    "[": 33,
    "i": 34,
    "p": 35,
    "enter": 36,
    "l": 37,
    "j": 38,
    "'": 39,
    "k": 40,
    ";": 41,
    "\\": 42,
    ",": 43,
    "/": 44,
    "n": 45,
    "m": 46,
    ".": 47,
    "tab": 48,
    "space": 49,
    "`": 50,
    "backspace": 51,
    "esc": 53,
    "f17": 64,
    "f18": 79,
    "f19": 80,
    "f20": 90,
    "f5": 96,
    "f6": 97,
    "f7": 98,
    "f3": 99,
    "f8": 100,
    "f9": 101,
    "f11": 103,
    "f13": 105,
    "f16": 106,
    "f14": 107,
    "f10": 109,
    "f12": 111,
    "f15": 113,
    "insert": 114,
    "home": 115,
    "page_up": 116,
    "delete": 117,
    "f4": 118,
    "end": 119,
    "f2": 120,
    "page_down": 121,
    "f1": 122,
    "left": 123,
    "right": 124,
    "down": 125,
    "up": 126,
}


def read_quartz_key(event: Any) -> tuple[int, int]:
    """(key code, modifier flags) of a ``CGEvent`` (macOS only: Quartz comes with pynput there)."""
    import Quartz  # type: ignore[import-not-found]

    keycode = Quartz.CGEventGetIntegerValueField(event, Quartz.kCGKeyboardEventKeycode)
    return int(keycode), int(Quartz.CGEventGetFlags(event))


class DarwinHotkeyFilter:
    """``decide(event_type, event)`` for pynput's ``darwin_intercept``: True means swallow (return None)."""

    def __init__(
        self,
        names: Iterable[str],
        on_press: Callable[[], None],
        on_release: Callable[[], None],
        read_key: Callable[[Any], tuple[int, int]] = read_quartz_key,
    ) -> None:
        trigger, modifiers = split_hotkey(names)
        self.trigger_keycode = _key_table(trigger, DARWIN_KEYCODE, "macOS")
        self.core = TriggerFilter(modifiers, on_press, on_release)
        self.read_key = read_key

    def decide(self, event_type: int, event: Any) -> bool:
        if event_type not in (KCG_EVENT_KEY_DOWN, KCG_EVENT_KEY_UP):
            return False  # modifier changes (kCGEventFlagsChanged) and everything else pass
        keycode, flags = self.read_key(event)
        if keycode != self.trigger_keycode:
            return False
        held = frozenset(name for name, mask in KCG_FLAGS.items() if flags & mask)
        return self.core.trigger_event(event_type == KCG_EVENT_KEY_DOWN, held)


# ---------------------------------------------------------------------------------------------- Linux evdev

EV_SYN, EV_KEY, EV_LED = 0x00, 0x01, 0x11
KEY_UP, KEY_DOWN, KEY_REPEAT = 0, 1, 2

EVDEV_KEY: dict[str, int] = {
    "esc": 1,
    **{str(d): 1 + d for d in range(1, 10)},
    "0": 11,
    "-": 12,
    "=": 13,
    "backspace": 14,
    "tab": 15,
    **dict(zip("qwertyuiop", range(16, 26), strict=True)),
    "[": 26,
    "]": 27,
    "enter": 28,
    **dict(zip("asdfghjkl", range(30, 39), strict=True)),
    ";": 39,
    "'": 40,
    "`": 41,
    "\\": 43,
    **dict(zip("zxcvbnm", range(44, 51), strict=True)),
    ",": 51,
    ".": 52,
    "/": 53,
    "space": 57,
    "caps_lock": 58,
    **{f"f{n}": 58 + n for n in range(1, 11)},
    "num_lock": 69,
    "scroll_lock": 70,
    "f11": 87,
    "f12": 88,
    "print_screen": 99,
    "home": 102,
    "up": 103,
    "page_up": 104,
    "left": 105,
    "right": 106,
    "end": 107,
    "down": 108,
    "page_down": 109,
    "insert": 110,
    "delete": 111,
    "pause": 119,
    "menu": 127,
    **{f"f{n}": 183 + n - 13 for n in range(13, 25)},
}
EVDEV_MODIFIER_KEY: dict[int, str] = {
    29: "ctrl",
    97: "ctrl",
    42: "shift",
    54: "shift",
    56: "alt",
    100: "alt",
    125: "cmd",
    126: "cmd",
}


class EvdevHotkeyFilter:
    """``decide(type, code, value)`` for events read from grabbed Linux input devices: True means swallow
    (do not re-emit). Repeats (value 2) of the hotkey are swallowed and are not presses."""

    def __init__(
        self, names: Iterable[str], on_press: Callable[[], None], on_release: Callable[[], None]
    ) -> None:
        trigger, modifiers = split_hotkey(names)
        self.trigger_code = _key_table(trigger, EVDEV_KEY, "Linux input devices")
        self.modifier_codes = {code for code, name in EVDEV_MODIFIER_KEY.items() if name in modifiers}
        self.core = TriggerFilter(modifiers, on_press, on_release)
        self._held_codes: set[int] = set()

    def held(self) -> frozenset[str]:
        return frozenset(EVDEV_MODIFIER_KEY[code] for code in self._held_codes)

    def decide(self, type_: int, code: int, value: int) -> bool:
        if type_ != EV_KEY:
            return False
        if code in EVDEV_MODIFIER_KEY:
            if value == KEY_DOWN:
                self._held_codes.add(code)
            elif value == KEY_UP:
                self._held_codes.discard(code)
            return False
        if code != self.trigger_code:
            return False
        return self.core.trigger_event(value != KEY_UP, self.held())
