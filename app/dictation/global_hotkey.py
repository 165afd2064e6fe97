"""The global push-to-talk key, per platform, behind one small interface (``start``/``stop``).

``choose_backend`` picks X11's ``XGrabKey``, pynput with a swallowing filter (Windows, macOS), evdev on Wayland with
access to ``/dev/input``, or else a desktop shortcut bound to ``captioneer dictate --toggle`` (docs/dictation.md §2).
The hotkey string uses pynput's format (``<ctrl>+<alt>+<space>``, ``<f9>``): modifiers, matched exactly, plus
exactly one key.
"""

from __future__ import annotations

import logging
import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from app.dictation.evdev_hotkey import EvdevHotkey, EvdevProbe, describe_evdev, probe_input_devices
from app.dictation.hotkey_text import parse_hotkey
from app.dictation.key_filters import DarwinHotkeyFilter, Win32HotkeyFilter
from inference.errors import UsageError

log = logging.getLogger("captioneer.app.hotkey")


def session_kind(env: dict[str, str] | None = None) -> str:
    """ "wayland", "x11", "windows", "macos" or "unknown"."""
    env = dict(os.environ if env is None else env)
    if sys.platform == "win32":
        return "windows"
    if sys.platform == "darwin":
        return "macos"
    if env.get("XDG_SESSION_TYPE") == "wayland" or (env.get("WAYLAND_DISPLAY") and not env.get("DISPLAY")):
        return "wayland"
    if env.get("DISPLAY"):
        return "x11"
    return "unknown"


@dataclass(frozen=True)
class HotkeyBackend:
    name: str  # "x11-grab" | "pynput" | "evdev" | "command"
    kind: str  # the session kind it was chosen for
    note: str  # what the user is told: which backend is active and why
    grab: bool = True  # evdev only: grab the keyboards (False: the key also reaches the app)


def choose_backend(kind: str, hotkey: str, probe: Callable[[str], EvdevProbe] | None = None) -> HotkeyBackend:
    """X11 → XGrabKey; Windows/macOS → pynput with a swallowing filter; Wayland → evdev where the keyboards
    are readable, else the ``dictate --toggle`` command."""
    if kind == "x11":
        return HotkeyBackend(
            "x11-grab", kind, "Global hotkey: active (X11; grabbed, so it never reaches other apps)."
        )
    if kind == "windows":
        return HotkeyBackend(
            "pynput", kind, "Global hotkey: active (Windows; swallowed, so it never reaches other apps)."
        )
    if kind == "macos":
        return HotkeyBackend(
            "pynput",
            kind,
            "Global hotkey: needs Captioneer to be allowed in System Settings → "
            "Privacy & Security → Accessibility and Input Monitoring (then it never reaches "
            "other apps).",
        )
    if kind == "wayland":
        found = (probe or probe_input_devices)(hotkey)
        if found.usable:
            return HotkeyBackend("evdev", kind, describe_evdev(found), grab=found.can_grab)
        return HotkeyBackend("command", kind, describe_evdev(found))
    return HotkeyBackend(
        "command",
        kind,
        "No graphical session found: bind `captioneer dictate --toggle` to a shortcut instead.",
    )


class GlobalHotkey:
    """pynput's listener (Windows, macOS) with a filter that decides on, and swallows, the hotkey's events."""

    def __init__(
        self,
        hotkey: str,
        on_press: Callable[[], None],
        on_release: Callable[[], None],
        platform: str = sys.platform,
    ) -> None:
        names = parse_hotkey(hotkey)
        self.platform = platform
        self._listener: Any = None
        self.filter: Win32HotkeyFilter | DarwinHotkeyFilter
        if platform == "win32":
            self.filter = Win32HotkeyFilter(names, on_press, on_release)
        elif platform == "darwin":
            self.filter = DarwinHotkeyFilter(names, on_press, on_release)
        else:
            raise UsageError(
                f"the pynput hotkey is for Windows and macOS, not {platform}",
                "on Linux the X11 grab or the input-device reader is used",
            )

    def listener_options(self) -> dict[str, Any]:
        """Keyword arguments for ``pynput.keyboard.Listener``: the platform's filter."""
        if self.platform == "win32":
            return {"win32_event_filter": self.win32_event_filter}
        return {"darwin_intercept": self.darwin_intercept}

    def win32_event_filter(self, msg: int, data: Any) -> bool:
        assert isinstance(self.filter, Win32HotkeyFilter)
        if self.filter.decide(msg, data) and self._listener is not None:
            self._listener.suppress_event()  # raises: the low-level hook returns 1, no app sees the event
        return False  # the filter already decided everything: pynput's own callbacks are not needed

    def darwin_intercept(self, event_type: int, event: Any) -> Any:
        assert isinstance(self.filter, DarwinHotkeyFilter)
        return None if self.filter.decide(event_type, event) else event

    def start(self) -> None:
        from pynput import keyboard

        self._listener = keyboard.Listener(**self.listener_options())  # set before any event can arrive
        self._listener.start()
        self._listener.wait()  # keys pressed before the listener is ready would be lost

    def stop(self) -> None:
        if self._listener is not None:
            self._listener.stop()
            self._listener = None


_X11_MODIFIERS = {"ctrl": "ControlMask", "alt": "Mod1Mask", "shift": "ShiftMask", "cmd": "Mod4Mask"}


class X11GrabHotkey:
    """The hotkey grabbed from the X server: nobody else sees it, and auto-repeat is filtered out."""

    def __init__(self, hotkey: str, on_press: Callable[[], None], on_release: Callable[[], None]) -> None:
        self.names = parse_hotkey(hotkey)
        keys = [n for n in self.names if n not in _X11_MODIFIERS]
        if len(keys) != 1:
            raise UsageError(
                f"the hotkey {hotkey!r} needs exactly one key besides ctrl/alt/shift/cmd",
                "write it like <ctrl>+<alt>+<space> or <f9>",
            )
        self.key = keys[0]
        self.on_press = on_press
        self.on_release = on_release
        self._display: Any = None
        self._thread: Any = None
        self._stopping = False

    def start(self) -> None:
        import threading

        from Xlib import XK, X, display

        self._display = display.Display()
        root = self._display.screen().root
        keysym = XK.string_to_keysym(
            self.key.upper() if self.key.startswith("f") and self.key[1:].isdigit() else self.key
        )
        self._keycode = self._display.keysym_to_keycode(keysym)
        if not keysym or not self._keycode:
            raise UsageError(f"this keyboard has no {self.key!r} key", "choose another hotkey")
        modifiers = 0
        for name in self.names & _X11_MODIFIERS.keys():
            modifiers |= getattr(X, _X11_MODIFIERS[name])
        self._grabs = [modifiers | extra for extra in (0, X.LockMask, X.Mod2Mask, X.LockMask | X.Mod2Mask)]
        for mask in self._grabs:  # also with Caps Lock / Num Lock on
            root.grab_key(self._keycode, mask, True, X.GrabModeAsync, X.GrabModeAsync)
        self._display.sync()
        self._thread = threading.Thread(target=self._run, name="captioneer-hotkey", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        from Xlib import X

        display = self._display
        down = False
        try:
            while not self._stopping:
                event = display.next_event()
                if event.type == X.KeyPress and event.detail == self._keycode:
                    if not down:
                        down = True
                        self.on_press()
                elif event.type == X.KeyRelease and event.detail == self._keycode:
                    # Auto-repeat sends a release and a press with the same time stamp: not a real release. The
                    # press follows within microseconds; 20 ms of patience makes sure it has arrived.
                    time.sleep(0.02)
                    if display.pending_events():
                        following = display.next_event()
                        if (
                            following.type == X.KeyPress
                            and following.detail == self._keycode
                            and (following.time - event.time <= 1)
                        ):
                            continue
                    down = False
                    self.on_release()
        except Exception:  # the display was closed by stop(), or the X server went away
            if not self._stopping:
                log.exception("the X11 hotkey listener stopped")

    def stop(self) -> None:
        self._stopping = True
        if self._display is not None:
            try:
                root = self._display.screen().root
                for mask in self._grabs:
                    root.ungrab_key(self._keycode, mask)
                self._display.sync()
                self._display.close()
            except Exception:
                log.debug("releasing the X11 hotkey failed", exc_info=True)
            self._display = None


def make_hotkey(
    hotkey: str, on_press: Callable[[], None], on_release: Callable[[], None], backend: HotkeyBackend
) -> Any:
    """The global hotkey for the chosen backend (None where only the command-line toggle works)."""
    if backend.name == "x11-grab":
        return X11GrabHotkey(hotkey, on_press, on_release)
    if backend.name == "pynput":
        return GlobalHotkey(hotkey, on_press, on_release)
    if backend.name == "evdev":
        return EvdevHotkey(hotkey, on_press, on_release, grab=backend.grab)
    return None
