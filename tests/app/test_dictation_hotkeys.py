"""The push-to-talk hotkey never reaches the focused app: the swallow decisions for Windows (low-level hook),
macOS (event tap) and Linux input devices (evdev grab + uinput), fed with event objects shaped like the
real ones; the evdev listener with fake devices; which backend a session gets and what the UI says.

Windows and macOS are exercised only through these fakes (no such machine here)."""

from __future__ import annotations

import os
import select as select_module
import threading
import time
from types import SimpleNamespace
from typing import Any

import pytest

from app.dictation.evdev_hotkey import VIRTUAL_KEYBOARD_NAME, EvdevHotkey, EvdevProbe, probe_input_devices
from app.dictation.global_hotkey import GlobalHotkey, choose_backend, make_hotkey, parse_hotkey
from app.dictation.key_filters import (
    EV_KEY,
    EV_LED,
    EV_SYN,
    EVDEV_KEY,
    KCG_EVENT_KEY_DOWN,
    KCG_EVENT_KEY_UP,
    KCG_FLAGS,
    LLKHF_INJECTED,
    WM_KEYDOWN,
    WM_KEYUP,
    WM_SYSKEYDOWN,
    WM_SYSKEYUP,
    DarwinHotkeyFilter,
    EvdevHotkeyFilter,
    Win32HotkeyFilter,
)
from inference.errors import UsageError


class Recorder:
    def __init__(self) -> None:
        self.calls: list[str] = []

    def press(self) -> None:
        self.calls.append("down")

    def release(self) -> None:
        self.calls.append("up")


# ------------------------------------------------------------------------------------------ Windows

VK_SPACE, VK_LCONTROL, VK_RCONTROL, VK_LMENU, VK_LSHIFT, VK_A = 0x20, 0xA2, 0xA3, 0xA4, 0xA0, 0x41


def kbd(vk: int, flags: int = 0) -> SimpleNamespace:
    """A KBDLLHOOKSTRUCT as pynput passes it to ``win32_event_filter``."""
    return SimpleNamespace(vkCode=vk, scanCode=0, flags=flags, time=0, dwExtraInfo=0)


def test_windows_swallows_the_trigger_press_repeats_and_release_while_the_modifiers_are_held() -> None:
    rec = Recorder()
    f = Win32HotkeyFilter(parse_hotkey("<ctrl>+<alt>+<space>"), rec.press, rec.release)
    events = [
        (WM_KEYDOWN, VK_LCONTROL),
        (WM_SYSKEYDOWN, VK_LMENU),  # Ctrl, then Alt (a "system" key)
        (WM_SYSKEYDOWN, VK_SPACE),
        (WM_SYSKEYDOWN, VK_SPACE),
        (WM_SYSKEYDOWN, VK_SPACE),  # press + 2 repeats
        (WM_KEYDOWN, VK_A),
        (WM_KEYUP, VK_A),  # another key while holding: the app gets it
        (WM_SYSKEYUP, VK_LMENU),  # a modifier goes up first
        (WM_KEYUP, VK_SPACE),  # the release is still ours
        (WM_KEYUP, VK_LCONTROL),
    ]
    swallowed = [f.decide(msg, kbd(vk)) for msg, vk in events]
    assert swallowed == [False, False, True, True, True, False, False, False, True, False]
    assert rec.calls == ["down", "up"]  # repeats are not presses


def test_windows_passes_other_combinations_plain_space_and_injected_events() -> None:
    rec = Recorder()
    f = Win32HotkeyFilter(parse_hotkey("<ctrl>+<alt>+<space>"), rec.press, rec.release)
    assert not f.decide(WM_KEYDOWN, kbd(VK_SPACE)) and not f.decide(WM_KEYUP, kbd(VK_SPACE))  # typing a space
    f.decide(WM_KEYDOWN, kbd(VK_RCONTROL))
    assert not f.decide(WM_KEYDOWN, kbd(VK_SPACE))  # Ctrl+Space: not ours (Alt missing)
    assert not f.decide(WM_KEYDOWN, kbd(VK_SPACE))  # and its repeats stay the app's ...
    f.decide(WM_SYSKEYDOWN, kbd(VK_LMENU))
    assert not f.decide(WM_SYSKEYDOWN, kbd(VK_SPACE))  # ... even once Alt joins
    assert not f.decide(WM_KEYUP, kbd(VK_SPACE))
    f.decide(WM_KEYDOWN, kbd(VK_LSHIFT))
    assert not f.decide(WM_SYSKEYDOWN, kbd(VK_SPACE))  # Ctrl+Alt+Shift+Space: another shortcut
    assert not f.decide(WM_SYSKEYUP, kbd(VK_SPACE))
    f.decide(WM_KEYUP, kbd(VK_LSHIFT))
    assert not f.decide(WM_SYSKEYDOWN, kbd(VK_SPACE, flags=LLKHF_INJECTED))  # synthetic: never ours
    assert not f.decide(WM_SYSKEYUP, kbd(VK_SPACE, flags=LLKHF_INJECTED))
    assert f.decide(WM_SYSKEYDOWN, kbd(VK_SPACE)) and f.decide(WM_SYSKEYUP, kbd(VK_SPACE))
    assert rec.calls == ["down", "up"]
    assert not f.decide(0x0200, kbd(VK_SPACE))  # not a key message


def test_windows_filter_is_wired_into_pynput_and_suppresses_through_the_listener() -> None:
    rec = Recorder()
    hotkey = GlobalHotkey("<ctrl>+<f9>", rec.press, rec.release, platform="win32")

    class Suppressed(Exception):
        pass

    class FakeListener:  # pynput's win32 Listener.suppress_event raises to make the hook return 1
        def suppress_event(self) -> None:
            raise Suppressed

    hotkey._listener = FakeListener()
    option = hotkey.listener_options()["win32_event_filter"]
    assert option(WM_KEYDOWN, kbd(VK_LCONTROL)) is False  # passed on to apps (not suppressed)
    with pytest.raises(Suppressed):
        option(WM_KEYDOWN, kbd(0x78))  # F9
    with pytest.raises(Suppressed):
        option(WM_KEYUP, kbd(0x78))
    assert option(WM_KEYDOWN, kbd(VK_A)) is False
    assert rec.calls == ["down", "up"]


# ------------------------------------------------------------------------------------------ macOS


def cg_event(keycode: int, *modifiers: str) -> SimpleNamespace:
    """Stands for a CGEvent; the test reader plays the Quartz calls (key code field, flags)."""
    flags = 0
    for name in modifiers:
        flags |= KCG_FLAGS[name]
    return SimpleNamespace(keycode=keycode, flags=flags | 0x100)  # plus a device-dependent bit


def read_fake(event: SimpleNamespace) -> tuple[int, int]:
    return event.keycode, event.flags


KCG_FLAGS_CHANGED, KVK_SPACE, KVK_A = 12, 49, 0


def test_macos_swallows_exactly_the_hotkey_and_returns_other_events_unchanged() -> None:
    rec = Recorder()
    f = DarwinHotkeyFilter(parse_hotkey("<cmd>+<shift>+<space>"), rec.press, rec.release, read_key=read_fake)
    sequence = [
        (KCG_FLAGS_CHANGED, cg_event(55, "cmd")),
        (KCG_FLAGS_CHANGED, cg_event(56, "cmd", "shift")),
        (KCG_EVENT_KEY_DOWN, cg_event(KVK_SPACE, "cmd", "shift")),
        (KCG_EVENT_KEY_DOWN, cg_event(KVK_SPACE, "cmd", "shift")),  # auto-repeat
        (KCG_EVENT_KEY_DOWN, cg_event(KVK_A, "cmd", "shift")),
        (KCG_EVENT_KEY_UP, cg_event(KVK_A, "cmd", "shift")),
        (KCG_FLAGS_CHANGED, cg_event(56, "cmd")),  # shift up first
        (KCG_EVENT_KEY_UP, cg_event(KVK_SPACE, "cmd")),
        (KCG_EVENT_KEY_DOWN, cg_event(KVK_SPACE, "cmd")),
        (KCG_EVENT_KEY_UP, cg_event(KVK_SPACE, "cmd")),  # Cmd+Space
    ]
    assert [f.decide(t, e) for t, e in sequence] == [
        False,
        False,
        True,
        True,
        False,
        False,
        False,
        True,
        False,
        False,
    ]
    assert rec.calls == ["down", "up"]
    hotkey = GlobalHotkey("<cmd>+<shift>+<space>", rec.press, rec.release, platform="darwin")
    hotkey.filter = DarwinHotkeyFilter(
        parse_hotkey("<cmd>+<shift>+<space>"), rec.press, rec.release, read_fake
    )
    intercept = hotkey.listener_options()["darwin_intercept"]
    other = cg_event(KVK_A)
    assert intercept(KCG_EVENT_KEY_DOWN, other) is other  # returned: delivered
    assert intercept(KCG_EVENT_KEY_DOWN, cg_event(KVK_SPACE, "cmd", "shift")) is None  # None: swallowed
    assert intercept(KCG_EVENT_KEY_UP, cg_event(KVK_SPACE, "cmd", "shift")) is None


def test_keys_that_cannot_be_watched_and_hotkeys_without_a_key_are_clear_errors() -> None:
    with pytest.raises(UsageError, match="needs exactly one key besides"):
        Win32HotkeyFilter(parse_hotkey("<ctrl>+<alt>"), lambda: None, lambda: None)
    with pytest.raises(UsageError, match="cannot be watched on macOS"):
        DarwinHotkeyFilter(parse_hotkey("<ctrl>+<media_next>"), lambda: None, lambda: None, read_fake)
    with pytest.raises(UsageError, match="cannot read the hotkey"):
        parse_hotkey("<ctrl>+<nokey>")
    with pytest.raises(UsageError, match="Windows and macOS"):
        GlobalHotkey("<f9>", lambda: None, lambda: None, platform="linux")
    assert parse_hotkey("<ctrl_r>+<alt_gr>+d") == {"ctrl", "alt", "d"}  # either side, letters by name


# ------------------------------------------------------------------------------------------ evdev decisions

KEY_LEFTCTRL, KEY_LEFTALT, KEY_LEFTSHIFT, KEY_SPACE, KEY_A = 29, 56, 42, 57, 30


def test_the_evdev_key_table_matches_the_kernels_codes() -> None:
    from evdev import ecodes

    names = {
        "esc": "ESC",
        "enter": "ENTER",
        "page_up": "PAGEUP",
        "page_down": "PAGEDOWN",
        "caps_lock": "CAPSLOCK",
        "num_lock": "NUMLOCK",
        "scroll_lock": "SCROLLLOCK",
        "print_screen": "SYSRQ",
        "menu": "COMPOSE",
        "-": "MINUS",
        "=": "EQUAL",
        "[": "LEFTBRACE",
        "]": "RIGHTBRACE",
        ";": "SEMICOLON",
        "'": "APOSTROPHE",
        "`": "GRAVE",
        "\\": "BACKSLASH",
        ",": "COMMA",
        ".": "DOT",
        "/": "SLASH",
    }
    for name, code in EVDEV_KEY.items():
        assert ecodes.ecodes[f"KEY_{names.get(name, name.upper())}"] == code, name


def test_evdev_swallows_press_repeat_release_and_passes_everything_else() -> None:
    rec = Recorder()
    f = EvdevHotkeyFilter(parse_hotkey("<ctrl>+<alt>+<space>"), rec.press, rec.release)
    events = [
        (EV_KEY, KEY_LEFTCTRL, 1),
        (EV_SYN, 0, 0),
        (EV_KEY, KEY_LEFTALT, 1),
        (EV_SYN, 0, 0),
        (EV_KEY, KEY_SPACE, 1),
        (EV_SYN, 0, 0),
        (EV_KEY, KEY_SPACE, 2),
        (EV_KEY, KEY_SPACE, 2),
        (EV_KEY, KEY_A, 1),
        (EV_KEY, KEY_A, 0),
        (EV_KEY, KEY_LEFTCTRL, 0),
        (EV_KEY, KEY_SPACE, 0),
        (EV_KEY, KEY_LEFTALT, 0),
        (EV_KEY, KEY_SPACE, 1),
        (EV_KEY, KEY_SPACE, 2),
        (EV_KEY, KEY_SPACE, 0),  # a plain space: typing
    ]
    swallowed = [f.decide(*e) for e in events]
    assert swallowed == [False] * 4 + [True, False, True, True] + [False] * 3 + [True, False] + [False] * 3
    assert rec.calls == ["down", "up"]


# ------------------------------------------------------------------------------------------ evdev devices


class FakeDevice:
    """Shaped like evdev.InputDevice: capabilities, read (non-blocking), grab/ungrab, active_keys, close."""

    def __init__(
        self, path: str, name: str = "AT keyboard", keys: tuple[int, ...] = (), held: int = 0
    ) -> None:
        self.path, self.name = path, name
        self.keys = keys or tuple(range(1, 128))
        self.pending: list[SimpleNamespace] = []
        self.lock = threading.Lock()
        self.grabbed = self.closed = False
        self.grab_error: OSError | None = None
        self.held_polls = held  # active_keys() reports a held key this many times
        self.grabbed_while_held = False
        self.leds: list[tuple[int, int]] = []

    def capabilities(self) -> dict[int, list[int]]:
        return {EV_SYN: [0], EV_KEY: list(self.keys)}

    def push(self, *events: tuple[int, int, int]) -> None:
        with self.lock:
            self.pending += [SimpleNamespace(type=t, code=c, value=v) for t, c, v in events]

    def read(self) -> list[SimpleNamespace]:
        with self.lock:
            if not self.pending:
                raise BlockingIOError
            out, self.pending = self.pending, []
        return out

    def active_keys(self) -> list[int]:
        if self.held_polls:
            self.held_polls -= 1
            return [28]  # Enter, still held from launching the app
        return []

    def grab(self) -> None:
        if self.grab_error is not None:
            raise self.grab_error
        self.grabbed_while_held = self.held_polls > 0
        self.grabbed = True

    def ungrab(self) -> None:
        self.grabbed = False

    def set_led(self, led: int, value: int) -> None:
        self.leds.append((led, value))

    def close(self) -> None:
        self.closed = True


class FakeUInput:
    """Shaped like evdev.UInput: write, and read for what the compositor sends back (LEDs)."""

    def __init__(self) -> None:
        self.written: list[tuple[int, int, int]] = []
        self.pending: list[SimpleNamespace] = []
        self.closed = False

    def write(self, type_: int, code: int, value: int) -> None:
        self.written.append((type_, code, value))

    def read(self) -> list[SimpleNamespace]:
        if not self.pending:
            raise BlockingIOError
        out, self.pending = self.pending, []
        return out

    def close(self) -> None:
        self.closed = True


class FakeSelect:
    """Stands in for select() on the listener thread, and tells the test when the listener has handled every
    event pushed so far: it came back for more and found nothing to read."""

    def __init__(self) -> None:
        self.polled = threading.Condition()
        self.idle_polls = 0

    def __call__(self, devices: Any, timeout_s: float) -> list[Any]:
        ready = [d for d in devices if d.pending]
        if not ready:
            with self.polled:
                self.idle_polls += 1
                self.polled.notify_all()
            time.sleep(min(timeout_s, 0.01))  # select's timeout: the listener checks its stop flag
        return ready

    def wait_handled(self, timeout_s: float = 10.0) -> bool:
        """The first idle poll from now may have looked before the last push; the second looked after it,
        and the listener only gets there once it read and handled what the push left."""
        with self.polled:
            first = self.idle_polls
            return self.polled.wait_for(lambda: self.idle_polls >= first + 2, timeout_s)


def test_the_evdev_listener_grabs_forwards_all_but_the_hotkey_and_releases_on_stop() -> None:
    rec = Recorder()
    keyboard = FakeDevice("/dev/input/event3", held=3)
    uinput, select = FakeUInput(), FakeSelect()
    hotkey = EvdevHotkey(
        "<ctrl>+<space>",
        rec.press,
        rec.release,
        paths=[keyboard.path],
        open_device=lambda _p: keyboard,
        make_uinput=lambda _d: uinput,
        wait=select,
    )
    hotkey.start()
    assert (
        hotkey.wait_ready() and keyboard.grabbed and not keyboard.grabbed_while_held
    )  # waited for Enter's release
    assert "never reaches other apps" in hotkey.note
    keyboard.push(
        (EV_KEY, KEY_A, 1),
        (EV_SYN, 0, 0),
        (EV_KEY, KEY_A, 0),
        (EV_SYN, 0, 0),
        (EV_KEY, KEY_LEFTCTRL, 1),
        (EV_SYN, 0, 0),
        (EV_KEY, KEY_SPACE, 1),
        (EV_SYN, 0, 0),
        (EV_KEY, KEY_SPACE, 2),
        (EV_SYN, 0, 0),
        (EV_KEY, KEY_SPACE, 0),
        (EV_SYN, 0, 0),
        (EV_KEY, KEY_LEFTCTRL, 0),
        (EV_SYN, 0, 0),
    )
    uinput.pending.append(SimpleNamespace(type=EV_LED, code=1, value=1))  # the compositor: Caps Lock light on
    assert select.wait_handled()
    hotkey.stop()
    assert keyboard.leds == [(1, 1)]  # passed on to the real keyboard
    assert uinput.written == [
        (EV_KEY, KEY_A, 1),
        (EV_SYN, 0, 0),
        (EV_KEY, KEY_A, 0),
        (EV_SYN, 0, 0),
        (EV_KEY, KEY_LEFTCTRL, 1),
        (EV_SYN, 0, 0),
        (EV_SYN, 0, 0),
        (EV_SYN, 0, 0),
        (EV_SYN, 0, 0),
        (EV_KEY, KEY_LEFTCTRL, 0),
        (EV_SYN, 0, 0),
    ]
    assert rec.calls == ["down", "up"]
    assert not keyboard.grabbed and keyboard.closed and uinput.closed


def test_without_uinput_the_keyboard_is_not_grabbed_and_the_ui_says_the_key_also_reaches_the_app() -> None:
    rec = Recorder()
    keyboard = FakeDevice("/dev/input/event3")

    def no_uinput(_devices: Any) -> Any:
        raise PermissionError(13, "Permission denied", "/dev/uinput")

    select = FakeSelect()
    hotkey = EvdevHotkey(
        "<f9>",
        rec.press,
        rec.release,
        paths=[keyboard.path],
        open_device=lambda _p: keyboard,
        make_uinput=no_uinput,
        wait=select,
    )
    hotkey.start()
    assert hotkey.wait_ready() and not keyboard.grabbed
    keyboard.push((EV_KEY, 67, 1), (EV_KEY, 67, 2), (EV_KEY, 67, 0))  # F9 down, repeat, up
    assert select.wait_handled()
    hotkey.stop()
    assert rec.calls == ["down", "up"]  # the hotkey works, repeat ignored
    assert "also reaches the focused app" in hotkey.note and "/dev/uinput" in hotkey.note


def test_a_keyboard_held_by_another_program_is_read_without_grabbing() -> None:
    keyboard = FakeDevice("/dev/input/event3")
    keyboard.grab_error = OSError(16, "Device or resource busy")
    uinput, select = FakeUInput(), FakeSelect()
    hotkey = EvdevHotkey(
        "<f9>",
        lambda: None,
        lambda: None,
        paths=[keyboard.path],
        open_device=lambda _p: keyboard,
        make_uinput=lambda _d: uinput,
        wait=select,
    )
    hotkey.start()
    assert hotkey.wait_ready()
    keyboard.push((EV_KEY, KEY_A, 1))
    assert select.wait_handled() and not keyboard.pending  # read, and not re-emitted
    hotkey.stop()
    assert not hotkey.grabbed and uinput.written == []  # not grabbed: the compositor still sees the keyboard
    assert "also reaches the focused app" in hotkey.note


def fake_input_dir(tmp_path: Any, names: list[str]) -> str:
    for name in names:
        (tmp_path / name).write_text("")
    return str(tmp_path)


def test_device_selection_keeps_readable_keyboards_with_the_hotkeys_key(tmp_path: Any) -> None:
    directory = fake_input_dir(tmp_path, ["event0", "event1", "event2", "event3", "event10", "mice"])
    devices = {
        "event0": FakeDevice("event0", "Power Button", keys=(116,)),
        "event1": FakeDevice("event1", "AT Translated Set 2 keyboard"),
        "event2": FakeDevice("event2", VIRTUAL_KEYBOARD_NAME),  # our own pass-through: never read back
        "event3": FakeDevice("event3", "Logitech mouse", keys=(272, 273, 274)),
        "event10": FakeDevice("event10", "USB keyboard"),
    }
    found = probe_input_devices(
        "<ctrl>+<alt>+<space>",
        input_dir=directory,
        uinput_path=str(tmp_path / "none"),
        open_device=lambda path: devices[os.path.basename(path)],
    )
    assert [os.path.basename(p) for p in found.keyboards] == ["event1", "event10"]  # numeric order
    assert found.usable and not found.can_grab and not found.problem
    assert all(d.closed for d in devices.values())  # probing leaves nothing open


def test_permission_errors_name_the_devices_and_the_fix(tmp_path: Any) -> None:
    directory = fake_input_dir(tmp_path, ["event0", "event1"])

    def denied(path: str) -> Any:
        raise PermissionError(13, "Permission denied", path)

    found = probe_input_devices("<f9>", input_dir=directory, open_device=denied)
    assert not found.usable and len(found.denied) == 2
    backend = choose_backend("wayland", "<f9>", probe=lambda _hotkey: found)
    assert backend.name == "command"
    assert "permission denied" in backend.note and "usermod -aG input" in backend.note
    assert "captioneer dictate --toggle" in backend.note
    with pytest.raises(UsageError, match="permission denied") as error:
        EvdevHotkey(
            "<f9>", lambda: None, lambda: None, paths=[f"{directory}/event0"], open_device=denied
        ).start()
    assert "usermod -aG input" in (error.value.fix or "")
    empty = probe_input_devices("<f9>", input_dir=str(tmp_path / "nothing"), open_device=denied)
    assert "no input devices" in empty.problem
    nothing = choose_backend("wayland", "<f9>", probe=lambda _hotkey: empty)
    assert nothing.name == "command" and "usermod" not in nothing.note and "dictate --toggle" in nothing.note


def test_the_backend_follows_the_session_and_says_which_is_active() -> None:
    readable = EvdevProbe(keyboards=("/dev/input/event3",), can_grab=True)
    no_uinput = EvdevProbe(keyboards=("/dev/input/event3",), can_grab=False)
    assert choose_backend("x11", "<f9>").name == "x11-grab"
    assert (
        choose_backend("windows", "<f9>").name == "pynput"
        and "swallowed" in choose_backend("windows", "<f9>").note
    )
    assert "Accessibility" in choose_backend("macos", "<f9>").note
    grabbed = choose_backend("wayland", "<f9>", probe=lambda _h: readable)
    assert (grabbed.name, grabbed.grab) == ("evdev", True) and "grabbed" in grabbed.note
    leaky = choose_backend("wayland", "<f9>", probe=lambda _h: no_uinput)
    assert (leaky.name, leaky.grab) == ("evdev", False) and "also reaches the focused app" in leaky.note
    assert isinstance(make_hotkey("<f9>", lambda: None, lambda: None, leaky), EvdevHotkey)
    assert make_hotkey("<f9>", lambda: None, lambda: None, choose_backend("unknown", "<f9>")) is None
    assert "dictate --toggle" in choose_backend("unknown", "<f9>").note


# ------------------------------------------------------------------------------------------ a real uinput device


def _uinput_unavailable() -> str:
    if not os.path.exists("/dev/uinput"):
        return "the kernel device /dev/uinput does not exist in this environment"
    if not os.access("/dev/uinput", os.W_OK):
        return "/dev/uinput is not writable by this user"
    return ""


@pytest.mark.skipif(bool(_uinput_unavailable()), reason=_uinput_unavailable() or "uinput available")
def test_a_real_virtual_keyboard_is_grabbed_and_only_the_hotkey_is_swallowed() -> None:
    """A uinput keyboard plays the physical one: the listener grabs it, and a second virtual keyboard
    (the pass-through) must carry every key but the hotkey."""
    import evdev
    from evdev import ecodes

    def device_named(name: str) -> Any:
        # udev creates the event node some time after the device: look until it is there.
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            found = [evdev.InputDevice(p) for p in evdev.list_devices()]
            match = next((d for d in found if d.name == name), None)
            for device in found:
                if device is not match:
                    device.close()
            if match is not None:
                return match
            time.sleep(0.05)
        raise AssertionError(f"no input device named {name!r} appeared")

    source = evdev.UInput({ecodes.EV_KEY: list(range(1, 128))}, name="captioneer test keyboard")
    try:
        keyboard = device_named("captioneer test keyboard")
        rec = Recorder()
        hotkey = EvdevHotkey("<ctrl>+<space>", rec.press, rec.release, paths=[keyboard.path])
        keyboard.close()
        hotkey.start()
        try:
            assert hotkey.wait_ready() and hotkey.grabbed
            passthrough = device_named(VIRTUAL_KEYBOARD_NAME)
            for code, value in [
                (KEY_A, 1),
                (KEY_A, 0),
                (KEY_LEFTCTRL, 1),
                (KEY_SPACE, 1),
                (KEY_SPACE, 2),
                (KEY_SPACE, 0),
                (KEY_LEFTCTRL, 0),
            ]:
                source.write(ecodes.EV_KEY, code, value)
                source.syn()
            # Read until the last key comes through: anything forwarded wrongly arrives before it.
            keys: list[tuple[int, int]] = []
            deadline = time.monotonic() + 10
            while (KEY_LEFTCTRL, 0) not in keys and time.monotonic() < deadline:
                if select_module.select([passthrough], [], [], 0.1)[0]:
                    keys += [(e.code, e.value) for e in passthrough.read() if e.type == ecodes.EV_KEY]
            passthrough.close()
        finally:
            hotkey.stop()
        assert keys == [(KEY_A, 1), (KEY_A, 0), (KEY_LEFTCTRL, 1), (KEY_LEFTCTRL, 0)]
        assert rec.calls == ["down", "up"]
    finally:
        source.close()
