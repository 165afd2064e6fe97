"""Push-to-talk end to end on a real X server (Xvfb) and a real (private) PulseAudio: the hotkey pressed with
XTest (xdotool), an espeak-ng sentence played into the virtual microphone with paplay, the key released the
moment paplay returns (the last word has just been played), and the text arrives in an xterm running ``cat``
and in a Qt text field. The last word is there: the 0.3 s of audio taken after the release and the 0.3 s of
padding keep it."""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import soundfile

from tests.live_cli import REPO_ROOT, JsonLinesChild, words
from tests.sound_server import MIC_FEED, SoundServer, without_trailing_silence
from tests.xvfb import start_xvfb

pytestmark = pytest.mark.skipif(
    any(shutil.which(tool) is None for tool in ("Xvfb", "xdotool", "xterm", "espeak-ng")),
    reason="needs Xvfb, xdotool, xterm and espeak-ng (installed by .ci/run)",
)
HEARTS = "There are twenty hearts in the garden."
HOTKEY = "ctrl+alt+space"


@pytest.fixture
def desktop(sound_server: SoundServer) -> Iterator[dict[str, str]]:
    """The sound server's environment with a private X display."""
    try:
        server, display = start_xvfb()
    except RuntimeError as exc:
        pytest.fail(str(exc))
    env = {**sound_server.env, "DISPLAY": display, "QT_QPA_PLATFORM": "xcb", "PYTHONPATH": str(REPO_ROOT)}
    env.pop("PYNPUT_BACKEND", None)  # the real X11 backend: the hotkey is grabbed from the X server
    yield env
    server.terminate()
    server.wait(10)


def spoken(folder: Path) -> Path:
    """The sentence with no silence after it: the key is released right as its last word ends."""
    wav = folder / "hearts.wav"
    subprocess.run(["espeak-ng", "-s", "150", "-w", str(wav), HEARTS], check=True, timeout=60)
    return without_trailing_silence(wav, folder / "hearts-cut.wav")


def window_named(env: dict[str, str], name: str) -> str:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        found = subprocess.run(["xdotool", "search", "--name", name], env=env, capture_output=True, text=True)
        if found.stdout.split():
            return found.stdout.split()[0]
        time.sleep(0.1)  # polling for the window to exist
    raise AssertionError(f"no window named {name!r}")


def dictate(env: dict[str, str], server: SoundServer, wav: Path, target: str) -> None:
    subprocess.run(["xdotool", "windowfocus", "--sync", target], env=env, check=True, timeout=60)
    subprocess.run(["xdotool", "keydown", HOTKEY], env=env, check=True, timeout=60)
    server.play(wav, MIC_FEED)  # returns once the sentence was played into the microphone
    subprocess.run(["xdotool", "keyup", HOTKEY], env=env, check=True, timeout=60)


def test_push_to_talk_through_the_sound_server_types_into_a_terminal_and_a_text_field(
    sound_server: SoundServer, desktop: dict[str, str], tmp_path: Path
) -> None:
    wav = spoken(tmp_path)
    received = tmp_path / "typed.txt"
    received.touch()
    term = subprocess.Popen(
        ["xterm", "-T", "terminal-target", "-e", "sh", "-c", f"stty -icanon -echo; cat > '{received}'"],
        env=desktop,
    )
    child = JsonLinesChild([sys.executable, "-m", "tests.app.xvfb_sound_dictation_child"], desktop)
    try:
        ready = child.wait_event(lambda e: bool(e.get("ready")), "the hotkey grabbed and the microphone on")
        assert ready["source"] == "Virtual-microphone"  # the sound server's microphone, by its description

        dictate(desktop, sound_server, wav, window_named(desktop, "terminal-target"))
        first = child.wait_event(lambda e: "result" in e, "the first dictation")
        child.wait_for(
            "the text in the terminal", lambda: "garden" in received.read_text(errors="replace").lower()
        )
        typed = received.read_text()
        assert words(typed)[-1] == "garden", typed  # the last word, released as it ended, is not cut
        assert len(set(words(typed)) & set(words(HEARTS))) >= 6, typed

        dictate(desktop, sound_server, wav, window_named(desktop, "dictation field"))
        field = child.wait_event(
            lambda e: "garden" in str(e.get("field", "")).lower(), "the text in the field"
        )
        assert words(str(field["field"]))[-1] == "garden", field
        # The recording holds the sentence, 0.3 s of audio after the release and 0.3 s of digital silence.
        speech_s = soundfile.info(str(wav)).duration
        assert float(str(first["audio_s"])) >= speech_s + 0.6, first
        for utterance in [e["utterance"] for e in child.events if "utterance" in e]:
            assert utterance["trailing_s"] == 0.3 and utterance["padding_s"] == 0.3, utterance
            assert utterance["ends_in_zeros"], utterance
    finally:
        if child.process.stdin is not None:
            child.process.stdin.close()
        try:
            child.process.wait(60)
        except subprocess.TimeoutExpired:
            child.kill()
        term.kill()
        term.wait(10)
