"""A real X11 window system (Xvfb): the overlay is placed as configured, drawn above the caption window,
and never takes the keyboard focus from it. Screenshots are kept in the test's temporary folder."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tests.conftest import REPO_ROOT
from tests.xvfb import start_xvfb

pytestmark = pytest.mark.skipif(shutil.which("Xvfb") is None, reason="needs Xvfb (installed by .ci/run)")


@pytest.fixture
def display():  # type: ignore[no-untyped-def]
    try:
        server, name = start_xvfb()
    except RuntimeError as exc:
        pytest.fail(str(exc))
    yield name
    server.terminate()
    server.wait(10)


def test_overlay_on_a_real_screen(display: str, tmp_path: Path) -> None:
    env = {**os.environ, "DISPLAY": display, "QT_QPA_PLATFORM": "xcb", "PYTHONPATH": str(REPO_ROOT)}
    done = subprocess.run(
        [sys.executable, "-m", "tests.app.xvfb_overlay_child", str(tmp_path)],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    facts = json.loads(done.stdout.strip().splitlines()[-1])
    sx, sy, sw, sh = facts["screen"]
    ox, oy, ow, oh = facts["overlay"]
    assert facts["overlay_visible"]
    assert abs((ox + ow / 2) - (sx + sw / 2)) <= 2  # centred
    assert sy + sh - 24 - oh - 2 <= oy <= sy + sh - 24 - oh + 2  # the bottom preset, 24 px above the edge
    assert facts["focus_before_is_window"] and facts["focus_after_is_window"]  # showing it took no focus
    assert not facts["overlay_is_active"]
    red, green, blue = facts["pixel_at_overlay"]
    assert green > 200 and red < 60 and blue < 60  # the overlay's colour, drawn above the window
    red, green, blue = facts["pixel_after_fade"]
    assert not (green > 200 and red < 60 and blue < 60)  # faded: the screen no longer shows it
    assert "lazy dog" in facts["overlay_text"] and "and then" in facts["overlay_text"]
    assert (tmp_path / "screen.png").stat().st_size > 1000


@pytest.mark.skipif(shutil.which("xdotool") is None, reason="needs xdotool (installed by .ci/run)")
def test_push_to_talk_with_the_real_hotkey_types_into_the_focused_window(display: str) -> None:
    env = {**os.environ, "DISPLAY": display, "QT_QPA_PLATFORM": "xcb", "PYTHONPATH": str(REPO_ROOT)}
    env.pop("PYNPUT_BACKEND", None)  # the real X11 backend: the hotkey is read from the X server
    child = subprocess.Popen(
        [sys.executable, "-m", "tests.app.xvfb_dictation_child"],
        cwd=REPO_ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout is not None
        ready = json.loads(child.stdout.readline() or "{}")
        assert ready.get("ready"), child.stderr.read() if child.stderr else ""
        xdotool = ["xdotool"]
        subprocess.run([*xdotool, "keydown", "ctrl+alt+space"], env=env, check=True)
        time.sleep(1.0 + ready["speech_s"] + 0.2)  # real time: the recording plays as a microphone would
        subprocess.run([*xdotool, "keyup", "ctrl+alt+space"], env=env, check=True)
        result = json.loads(child.stdout.readline() or "{}")
    finally:
        child.wait(90)
    assert result["result"] == ["emma quickly closed the early bottle and sang"]
    assert result["field"] == "Emma quickly closed the early bottle and sang"  # typed into the focused window


@pytest.mark.parametrize("reader_delay_ms", [0, 1200])
def test_paste_restores_the_users_clipboard_only_after_another_app_read_the_dictation(
    display: str, reader_delay_ms: int
) -> None:
    """Two real X clients: one owns the user's clipboard (text, HTML, a custom binary format) and has focus;
    the other pastes a dictation with real Ctrl+V events. The reader takes the text ``reader_delay_ms``
    after the key (a busy app): it must get the dictation, and only then the user's clipboard comes back,
    every format intact."""
    env = {**os.environ, "DISPLAY": display, "QT_QPA_PLATFORM": "xcb", "PYTHONPATH": str(REPO_ROOT)}
    env.pop("PYNPUT_BACKEND", None)
    child = [sys.executable, "-m", "tests.app.xvfb_dictation_child"]
    reader = subprocess.Popen(
        [*child, "clipboard-reader", str(reader_delay_ms)],
        cwd=REPO_ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    owner = None
    try:
        assert reader.stdout is not None
        assert json.loads(reader.stdout.readline() or "{}").get("ready"), (
            reader.stderr.read() if reader.stderr else ""
        )
        owner = subprocess.Popen(
            [*child, "paste-owner", "Dictated words "],
            cwd=REPO_ROOT,
            env=env,
            text=True,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        assert owner.stdout is not None and owner.stdin is not None
        pasted = json.loads(owner.stdout.readline() or "{}")
        assert pasted, owner.stderr.read() if owner.stderr else ""
        found = json.loads(reader.stdout.readline() or "{}")
        assert found, reader.stderr.read() if reader.stderr else ""
        owner.stdin.write("quit\n")
        owner.stdin.flush()
    finally:
        reader.wait(30)
        if owner is not None:
            owner.wait(30)
    assert pasted["how"] == "pasted" and not pasted["error"] and pasted["reason"] == "read"
    assert found["pasted"] == "Dictated words "  # the reader got the dictation, not the user's text
    assert found["key_at"] - pasted["started_at"] < 2.0
    assert pasted["restored_at"] > found["pasted_at"]  # restored after the read, not before
    assert pasted["restored_at"] - found["pasted_at"] < 1.0  # and soon after it
    assert found["text"] == "the user's own text"
    assert "<b>the user's own text</b>" in found["html"]
    assert bytes.fromhex(found["binary"]) == b"\x00\x01binary\xff"


@pytest.mark.skipif(
    shutil.which("xterm") is None or shutil.which("xdotool") is None,
    reason="needs xterm and xdotool (installed by .ci/run)",
)
def test_dictation_pastes_into_a_terminal_and_says_so_only_when_it_arrived(
    display: str, tmp_path: Path
) -> None:
    """xterm ignores pynput's synthetic letters (XSendEvent) and does not paste on Ctrl+V; the paste goes through
    XTest as Shift+Insert with the text in both selections. A window that takes nothing is reported as such."""
    env = {**os.environ, "DISPLAY": display, "QT_QPA_PLATFORM": "xcb", "PYTHONPATH": str(REPO_ROOT)}
    env.pop("PYNPUT_BACKEND", None)
    received = tmp_path / "typed.txt"
    received.touch()
    term = subprocess.Popen(
        ["xterm", "-T", "dictation-target", "-e", "sh", "-c", f"stty -icanon -echo; cat > '{received}'"],
        env=env,
    )
    try:
        window = ""
        deadline = time.monotonic() + 20
        while not window and time.monotonic() < deadline:
            found = subprocess.run(
                ["xdotool", "search", "--name", "dictation-target"], env=env, capture_output=True, text=True
            )
            window = found.stdout.split()[0] if found.stdout.split() else ""
            time.sleep(0.1)
        assert window, "xterm did not start"
        subprocess.run(["xdotool", "windowfocus", "--sync", window], env=env, check=True)
        child = [sys.executable, "-m", "tests.app.xvfb_terminal_paste_child"]
        done = subprocess.run(
            [*child, "Hello from dictation "],
            cwd=REPO_ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 0, done.stderr[-3000:]
        facts = json.loads(done.stdout.strip().splitlines()[-1])
        deadline = time.monotonic() + 5
        while (
            "Hello from dictation" not in received.read_text(errors="replace") and time.monotonic() < deadline
        ):
            time.sleep(0.05)
        assert received.read_text() == "Hello from dictation "
        assert facts["outcome"] == [["pasted", ""]] and facts["clipboard"] == "the user's clipboard"
        # Typing mode: key by key through XTest, letters no key produces included (a spare keycode is mapped).
        done = subprocess.run(
            [*child, "Café ñ 20 € ok\n", "type"],
            cwd=REPO_ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 0, done.stderr[-3000:]
        deadline = time.monotonic() + 5
        while "ok" not in received.read_text(errors="replace") and time.monotonic() < deadline:
            time.sleep(0.05)
        assert received.read_text() == "Hello from dictation Café ñ 20 € ok\n"
        term.kill()
        term.wait(10)
        # Nothing takes a paste now (no window has the focus): not "pasted", and the text stays to paste by hand.
        done = subprocess.run(
            [*child, "Lost words "], cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=60
        )
        facts = json.loads(done.stdout.strip().splitlines()[-1])
        assert facts["outcome"] == [["left on the clipboard", ""]] and facts["clipboard"] == "Lost words "
    finally:
        if term.poll() is None:
            term.kill()


def test_typing_keeps_spare_keycodes_mapped_until_a_slow_client_has_read_them(
    display: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Clients look a keycode up when they handle the key, not when it is sent: a busy one (xterm on a loaded
    machine) read a spare keycode already emptied and dropped the "é". The mapping now outlives the text."""
    from Xlib import X
    from Xlib import display as xdisplay

    from app.dictation.output import XTestTyping

    monkeypatch.setenv("DISPLAY", display)
    client = xdisplay.Display(display)
    window = client.screen().root.create_window(
        0, 0, 100, 100, 0, client.screen().root_depth, event_mask=X.KeyPressMask
    )
    window.map()
    client.sync()
    window.set_input_focus(X.RevertToParent, X.CurrentTime)
    client.sync()
    first = client.display.info.min_keycode
    count = client.display.info.max_keycode - first + 1

    def keysyms_on_server() -> set[int]:
        return {keysym for row in client.get_keyboard_mapping(first, count) for keysym in row}

    typing = XTestTyping()
    sender = threading.Thread(target=typing.type, args=("é€a",))
    sender.start()
    time.sleep(0.1)  # the client is busy: it handles its key events 100 ms late
    seen = []
    while len(seen) < 3:
        event = client.next_event()
        if event.type == X.KeyPress:
            seen.append(client.get_keyboard_mapping(event.detail, 1)[0][0])  # the lookup a client makes now
    sender.join(10)
    assert seen == [0xE9, 0x010020AC, ord("a")]
    assert not {0xE9, 0x010020AC} & keysyms_on_server()  # the spare keycodes are given back afterwards
