"""The global push-to-talk key, per platform, behind one small interface.

* X11: the combination is grabbed on the root window (python-xlib, ``XGrabKey``), so the X server gives it
  to Captioneer alone: the hotkey never leaks into the focused application, and auto-repeat is filtered.
* Windows, macOS: pynput's keyboard listener sees key presses in every application. macOS asks for the
  Accessibility (and Input Monitoring) permission the first time; until it is granted no key arrives,
  which ``describe_backend`` explains.
* Wayland: applications cannot watch the keyboard globally. Bind ``captioneer dictate --toggle`` to a
  shortcut in the desktop's keyboard settings: it toggles dictation in the running app through a local
  socket (``DictationCommandServer`` in the controller).

The hotkey string uses pynput's format, e.g. ``<ctrl>+<alt>+<space>`` or ``<f9>``. pynput cannot swallow one
key combination on X11 without grabbing the whole keyboard, so pick a combination that does nothing in
your applications (the default, Ctrl+Alt+Space, is free almost everywhere).
"""

from __future__ import annotations

import logging
import os
import sys
import time
from collections.abc import Callable
from typing import Any

from inference.errors import UsageError

log = logging.getLogger("captioneer.app.hotkey")


def session_kind(env: dict[str, str] | None = None) -> str:
    """"wayland", "x11", "windows", "macos" or "unknown"."""
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


def describe_backend(kind: str) -> str:
    return {
        "x11": "Global hotkey: active (X11; grabbed, so it never reaches other apps).",
        "windows": "Global hotkey: active.",
        "macos": "Global hotkey: needs Captioneer to be allowed in System Settings → Privacy & Security → "
        "Accessibility and Input Monitoring.",
        "wayland": "Wayland does not let apps watch the keyboard: bind `captioneer dictate --toggle` to a shortcut "
        "in your desktop's keyboard settings.",
        "unknown": "No graphical session found: bind `captioneer dictate --toggle` to a shortcut instead.",
    }[kind]


def parse_hotkey(text: str) -> frozenset[str]:
    """Key names of a hotkey string (``<ctrl>+<alt>+<space>``, ``<f9>``, ``<ctrl>+d``); a clear error otherwise."""
    from pynput.keyboard import Key

    names = set()
    for part in (p.strip() for p in text.split("+")):
        if len(part) == 1:
            names.add(part.lower())
        elif len(part) > 2 and part.startswith("<") and part.endswith(">") and part[1:-1].lower() in Key.__members__:
            names.add(_base_name(part[1:-1].lower()))  # by name: key values differ between backends
        else:
            raise UsageError(f"cannot read the hotkey {text!r} (at {part!r})",
                             "write it like <ctrl>+<alt>+<space>, <f9> or <ctrl>+d")  # fmt: skip
    return frozenset(names)


def key_name(key: Any) -> str:
    """One name per physical key role: left/right modifiers alike, letters in lower case."""
    name = getattr(key, "name", None)
    if name:
        return _base_name(str(name))
    char = getattr(key, "char", None)
    if char:
        return str(char).lower()
    return f"vk{getattr(key, 'vk', '?')}"


def _base_name(name: str) -> str:
    for suffix in ("_l", "_r", "_gr"):
        if name.endswith(suffix):
            return name[: -len(suffix)]
    return name


class GlobalHotkey:
    """Calls ``on_press``/``on_release`` when the whole combination goes down / when any of it goes up."""

    def __init__(self, hotkey: str, on_press: Callable[[], None], on_release: Callable[[], None]) -> None:
        self.keys = parse_hotkey(hotkey)  # names, so the comparison does not depend on the platform's key codes
        self.on_press = on_press
        self.on_release = on_release
        self._down: set[Any] = set()
        self._active = False
        self._listener: Any = None

    def start(self) -> None:
        from pynput import keyboard

        listener = keyboard.Listener(on_press=self._press, on_release=self._release)
        listener.start()
        listener.wait()  # keys pressed before the listener is ready would be lost
        self._listener = listener

    def stop(self) -> None:
        if self._listener is not None:
            self._listener.stop()
            self._listener = None

    def handle(self, key: Any, pressed: bool) -> None:
        """One key event (a pynput key); used by the listener and by tests."""
        key = key_name(key)
        if pressed:
            self._down.add(key)
            if not self._active and all(k in self._down for k in self.keys):
                self._active = True
                self.on_press()
        else:
            self._down.discard(key)
            if self._active and key in self.keys:
                self._active = False
                self.on_release()

    def _press(self, key: Any) -> None:
        if key is not None:
            self.handle(key, True)

    def _release(self, key: Any) -> None:
        if key is not None:
            self.handle(key, False)


_X11_MODIFIERS = {"ctrl": "ControlMask", "alt": "Mod1Mask", "shift": "ShiftMask", "cmd": "Mod4Mask"}


class X11GrabHotkey:
    """The hotkey grabbed from the X server: nobody else sees it, and auto-repeat is filtered out."""

    def __init__(self, hotkey: str, on_press: Callable[[], None], on_release: Callable[[], None]) -> None:
        self.names = parse_hotkey(hotkey)
        keys = [n for n in self.names if n not in _X11_MODIFIERS]
        if len(keys) != 1:
            raise UsageError(f"the hotkey {hotkey!r} needs exactly one key besides ctrl/alt/shift/cmd",
                             "write it like <ctrl>+<alt>+<space> or <f9>")  # fmt: skip
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
        keysym = XK.string_to_keysym(self.key.upper() if self.key.startswith("f") and self.key[1:].isdigit()
                                     else self.key)  # fmt: skip
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
                        if following.type == X.KeyPress and following.detail == self._keycode and (
                            following.time - event.time <= 1
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


def make_hotkey(hotkey: str, on_press: Callable[[], None], on_release: Callable[[], None], kind: str) -> Any:
    """The right global hotkey for this session kind (None where only the command-line toggle works)."""
    if kind == "x11":
        return X11GrabHotkey(hotkey, on_press, on_release)
    if kind in ("windows", "macos"):
        return GlobalHotkey(hotkey, on_press, on_release)
    return None
