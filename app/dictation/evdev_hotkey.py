"""The push-to-talk hotkey read from Linux input devices (python-evdev), for Wayland sessions.

Every keyboard is grabbed and all events but the hotkey's are re-emitted through ``/dev/uinput``, so the hotkey
never reaches the focused app; without ``/dev/uinput`` nothing is grabbed and the UI says the key leaks. Grabs
start only once no key is held and end when the listener stops (docs/dictation.md §4).
"""

from __future__ import annotations

import contextlib
import errno
import glob
import logging
import os
import select
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from app.dictation.hotkey_text import parse_hotkey
from app.dictation.key_filters import EV_KEY, EV_LED, EVDEV_KEY, EvdevHotkeyFilter, split_hotkey
from inference.errors import UsageError

log = logging.getLogger("captioneer.app.hotkey")

VIRTUAL_KEYBOARD_NAME = "Captioneer keyboard pass-through"
INPUT_GROUP_FIX = (
    "add yourself to the input group (sudo usermod -aG input $USER), then log out and in again; "
    "or bind `captioneer dictate --toggle` to a shortcut in your desktop's keyboard settings"
)
_LETTERS = (EVDEV_KEY["a"], EVDEV_KEY["z"], EVDEV_KEY["space"])


def open_input_device(path: str) -> Any:
    import evdev

    return evdev.InputDevice(path)


def make_virtual_keyboard(devices: Sequence[Any]) -> Any:
    import evdev

    return evdev.UInput.from_device(*devices, name=VIRTUAL_KEYBOARD_NAME)


def is_keyboard(device: Any, trigger_code: int) -> bool:
    """A real keyboard with the hotkey's key (not a power button, a mouse or our own virtual keyboard)."""
    if device.name == VIRTUAL_KEYBOARD_NAME:
        return False
    keys = set(device.capabilities().get(EV_KEY, []))
    return trigger_code in keys and all(code in keys for code in _LETTERS)


@dataclass(frozen=True)
class EvdevProbe:
    keyboards: tuple[str, ...] = ()  # readable keyboards with the hotkey's key
    denied: tuple[str, ...] = ()  # event devices this user may not open
    can_grab: bool = False  # /dev/uinput is writable: grab the keyboards and re-emit all but the hotkey
    problem: str = ""  # why the hotkey cannot be read this way ("" when it can)

    @property
    def usable(self) -> bool:
        return bool(self.keyboards)


def probe_input_devices(
    hotkey: str,
    input_dir: str = "/dev/input",
    uinput_path: str = "/dev/uinput",
    open_device: Callable[[str], Any] | None = None,
) -> EvdevProbe:
    """Which keyboards this user can read, and whether the hotkey can be kept from the focused app."""
    if open_device is None:
        try:
            import evdev  # noqa: F401 - only to say clearly that it is missing
        except ImportError:
            return EvdevProbe(problem="python-evdev is not installed (pip install evdev)")
        open_device = open_input_device
    trigger, _modifiers = split_hotkey(parse_hotkey(hotkey), hotkey)
    trigger_code = EVDEV_KEY.get(trigger)
    if trigger_code is None:
        return EvdevProbe(problem=f"the hotkey key {trigger!r} cannot be read from input devices")
    paths = sorted(glob.glob(os.path.join(input_dir, "event*")), key=_event_number)
    keyboards, denied = [], []
    for path in paths:
        try:
            device = open_device(path)
        except PermissionError:
            denied.append(path)
            continue
        except OSError as exc:  # unplugged meanwhile, or not an input device
            log.debug("skipping %s: %s", path, exc)
            continue
        try:
            if is_keyboard(device, trigger_code):
                keyboards.append(path)
        finally:
            device.close()
    can_grab = os.access(uinput_path, os.W_OK)
    if keyboards:
        problem = ""
    elif denied:
        problem = (
            f"this user may not read the keyboard ({', '.join(denied[:3])}{'…' if len(denied) > 3 else ''}: "
            "permission denied)"
        )
    elif paths:
        problem = f"no keyboard with the {trigger!r} key among {len(paths)} input devices"
    else:
        problem = f"no input devices in {input_dir}"
    return EvdevProbe(tuple(keyboards), tuple(denied), can_grab, problem)


def _event_number(path: str) -> int:
    digits = "".join(ch for ch in os.path.basename(path) if ch.isdigit())
    return int(digits) if digits else -1


def describe_evdev(probe: EvdevProbe) -> str:
    """What the UI says about the input-device hotkey: active and grabbed, active but leaking, or why not."""
    if not probe.usable and probe.denied:
        return f"Wayland: no global hotkey, because {probe.problem}. Fix: {INPUT_GROUP_FIX}."
    if not probe.usable:
        return (
            f"Wayland: no global hotkey, because {probe.problem}: bind `captioneer dictate --toggle` to a "
            "shortcut in your desktop's keyboard settings."
        )
    if probe.can_grab:
        return "Global hotkey: active (Wayland; read from /dev/input and grabbed, so it never reaches other apps)."
    return (
        "Global hotkey: active (Wayland; read from /dev/input), but the key also reaches the focused app: "
        "/dev/uinput is not writable, so the keyboard cannot be grabbed. Pick a combination that does "
        "nothing in your apps, or give your user write access to /dev/uinput."
    )


def wait_readable(devices: Sequence[Any], timeout_s: float) -> list[Any]:
    readable, _w, _x = select.select(list(devices), [], [], timeout_s)
    return readable


class EvdevHotkey:
    """Reads keyboards on a thread; swallows the hotkey's events and re-emits the rest when grabbed."""

    def __init__(
        self,
        hotkey: str,
        on_press: Callable[[], None],
        on_release: Callable[[], None],
        *,
        paths: Sequence[str] | None = None,
        grab: bool = True,
        open_device: Callable[[str], Any] = open_input_device,
        make_uinput: Callable[[Sequence[Any]], Any] = make_virtual_keyboard,
        wait: Callable[[Sequence[Any], float], list[Any]] = wait_readable,
    ) -> None:
        self.hotkey = hotkey
        self.filter = EvdevHotkeyFilter(parse_hotkey(hotkey), on_press, on_release)
        self.paths = list(paths) if paths is not None else None
        self.want_grab = grab
        self.open_device, self.make_uinput, self.wait = open_device, make_uinput, wait
        self.devices: list[Any] = []
        self.uinput: Any = None
        self.grabbed = False
        self.note = ""
        self._stopping = threading.Event()
        self._ready = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        if self.paths is None:
            custom = None if self.open_device is open_input_device else self.open_device
            probe = probe_input_devices(self.hotkey, open_device=custom)
            if not probe.usable:
                raise UsageError(f"the push-to-talk key cannot be read: {probe.problem}", INPUT_GROUP_FIX)
            self.paths = list(probe.keyboards)
        try:
            self.devices = [self.open_device(path) for path in self.paths]
        except PermissionError as exc:
            self._close_devices()
            raise UsageError(
                f"cannot read the keyboard {exc.filename or ''} (permission denied)", INPUT_GROUP_FIX
            ) from exc
        if not self.devices:
            raise UsageError("no keyboard to read the push-to-talk key from", INPUT_GROUP_FIX)
        if self.want_grab:
            try:
                self.uinput = self.make_uinput(self.devices)
            except OSError as exc:  # usually PermissionError on /dev/uinput
                log.warning("not grabbing the keyboard, /dev/uinput cannot be used: %s", exc)
                self.uinput = None
        self.note = describe_evdev(EvdevProbe(tuple(self.paths), can_grab=self.uinput is not None))
        self._thread = threading.Thread(target=self._run, name="captioneer-evdev-hotkey", daemon=True)
        self._thread.start()

    def wait_ready(self, timeout_s: float = 5.0) -> bool:
        """True once the keyboards are grabbed (or it was decided not to grab) and events are read."""
        return self._ready.wait(timeout_s)

    def stop(self) -> None:
        self._stopping.set()
        if self._thread is not None:
            self._thread.join(5)
            self._thread = None
        self._release()

    # ------------------------------------------------------------------ the listener thread
    def _run(self) -> None:
        try:
            if self.uinput is not None:
                self._grab_when_no_key_is_held()
            self._ready.set()
            while not self._stopping.is_set() and self.devices:
                sources = [*self.devices, self.uinput] if self.grabbed else self.devices
                for source in self.wait(sources, 0.2):
                    if source is self.uinput:
                        self._pass_leds_back()
                    else:
                        self._read(source)
        except Exception:
            log.exception("the input-device hotkey listener stopped")
        finally:
            self._ready.set()
            self._release()  # never leave a keyboard grabbed

    def _grab_when_no_key_is_held(self, patience_s: float = 5.0) -> None:
        deadline = time.monotonic() + patience_s
        while any(device.active_keys() for device in self.devices) and time.monotonic() < deadline:
            if self._stopping.wait(0.02):
                return
        try:
            for device in self.devices:
                device.grab()
            self.grabbed = True
        except OSError as exc:  # EBUSY: another program (a key remapper) holds the keyboard
            log.warning("cannot grab the keyboard (%s); the hotkey also reaches the focused app", exc)
            self._ungrab()
            self.note = describe_evdev(EvdevProbe(tuple(self.paths or ()), can_grab=False))

    def _read(self, device: Any) -> None:
        try:
            events = list(device.read())
        except BlockingIOError:
            return
        except OSError as exc:
            if exc.errno != errno.ENODEV:
                raise
            log.warning("the keyboard %s went away", getattr(device, "path", device))
            self.devices.remove(device)
            return
        for event in events:
            self.process(event.type, event.code, event.value)

    def _pass_leds_back(self) -> None:
        """The compositor's Caps/Num/Scroll Lock LED changes, sent to the virtual keyboard, go to the real ones."""
        try:
            events = list(self.uinput.read())
        except BlockingIOError:
            return
        for event in events:
            if event.type == EV_LED:
                for device in self.devices:
                    with contextlib.suppress(OSError):
                        device.set_led(event.code, event.value)

    def process(self, type_: int, code: int, value: int) -> bool:
        """One input event: True if it was swallowed; otherwise re-emitted when the keyboards are grabbed."""
        swallow = self.filter.decide(type_, code, value)
        if not swallow and self.grabbed and self.uinput is not None:
            self.uinput.write(type_, code, value)
        return swallow

    def _ungrab(self) -> None:
        for device in self.devices:
            with contextlib.suppress(OSError):  # unplugged: nothing to release
                device.ungrab()
        self.grabbed = False

    def _release(self) -> None:
        if self.grabbed:
            self._ungrab()
        if self.uinput is not None:
            with contextlib.suppress(OSError):
                self.uinput.close()
            self.uinput = None
        self._close_devices()

    def _close_devices(self) -> None:
        for device in self.devices:
            with contextlib.suppress(OSError):
                device.close()
        self.devices = []
