"""The caption window against a real (private) PulseAudio: system audio and the virtual microphone captioned
by the real pipeline and the demo model, the level meter showing the source's level, a silent source said so,
and an input unplugged mid-session continued on the default."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.live_cli import JsonLinesChild, share_of_words
from tests.sound_server import MIC_FEED, SPEAKERS, SoundServer, speech_wav

EMMA = "Emma quickly closed the early bottle and sang."
HEARTS = "There are twenty hearts in the garden."
SHARE = 0.8  # the demo model knows these words (its own samples' sentences); leave room for one slip
CHILD = Path(__file__).with_name("sound_window_child.py")


class Window(JsonLinesChild):
    def __init__(self, server: SoundServer) -> None:
        super().__init__([sys.executable, str(CHILD)], server.env)
        self.inputs = self.wait_event(lambda e: e["event"] == "inputs", "the input list")

    def captions(self) -> str:
        texts = [str(e["text"]) for e in self.events if e["event"] == "captions"]
        return texts[-1] if texts else ""

    def start(self, input_id: str) -> dict[str, object]:
        already = len(self.events)
        self.send({"cmd": "start", "input": input_id})
        return self.wait_event(
            lambda e: self.events.index(e) >= already and e["event"] == "state" and e["state"] == "running",
            f"captioning {input_id}",
        )

    def wait_words(self, sentence: str) -> None:
        self.wait_for(
            f"{sentence!r} in the window", lambda: share_of_words(sentence, self.captions()) >= SHARE
        )

    def wait_status(self, fragment: str) -> str:
        event = self.wait_event(
            lambda e: e["event"] == "state" and fragment in str(e["message"]), f"the status {fragment!r}"
        )
        return str(event["message"])

    def peak(self) -> float:
        return max((float(e["dbfs"]) for e in self.events if e["event"] == "peak"), default=-100.0)


@pytest.fixture
def window(sound_server: SoundServer) -> Iterator[Window]:
    win = Window(sound_server)
    yield win
    win.kill()


def test_the_window_captions_system_audio_and_the_virtual_microphone(
    sound_server: SoundServer, window: Window, tmp_path: Path
) -> None:
    items = [tuple(item) for item in window.inputs["items"]]  # type: ignore[union-attr]
    texts = [text for text, _data in items]
    assert (
        texts.index("Microphones")
        < texts.index("    Virtual-microphone (default)")
        < texts.index("System audio")
    )
    assert ("    What this computer plays", "system:default") in items
    assert ("    Speakers", f"pulse:source:{SPEAKERS}.monitor") in items
    assert window.inputs["current"] == "pulse:source:mic"  # the default microphone, at first

    running = window.start("system:default")
    assert "What this computer plays (Speakers)" in str(running["message"])
    assert window.peak() < -60  # nothing plays yet: the meter shows the null sink's silence
    sound_server.play(speech_wav(tmp_path, "emma", EMMA), SPEAKERS)
    window.wait_words(EMMA)
    assert window.peak() > -40, window.peak()  # espeak-ng speech at full scale, not a stand-in level
    window.wait_status("no sound from What this computer plays")  # the speakers fell silent
    window.send({"cmd": "stop"})
    window.wait_event(lambda e: e["event"] == "state" and e["state"] == "idle", "the session to stop")

    window.start("pulse:source:mic")
    sound_server.play(speech_wav(tmp_path, "hearts", HEARTS), MIC_FEED)
    window.wait_for("the microphone's words", lambda: share_of_words(HEARTS, window.captions()) >= SHARE)


def test_an_input_plugged_in_is_listed_and_unplugged_mid_session_continues_on_the_default(
    sound_server: SoundServer, window: Window, tmp_path: Path
) -> None:
    module = sound_server.add_output("usb", "USB-headset")  # plugged in: the list follows by itself
    window.wait_event(
        lambda e: e["event"] == "inputs" and ["    USB-headset", "pulse:source:usb.monitor"] in e["items"],
        "the plugged-in headset in the list",
    )
    window.start("pulse:source:usb.monitor")
    sound_server.remove_module(module)
    message = window.wait_status("now listening on")
    assert "'USB-headset' was unplugged or removed" in message and "What this computer plays" in message
    sound_server.play(
        speech_wav(tmp_path, "emma", EMMA), SPEAKERS
    )  # the same session goes on, on the default
    window.wait_words(EMMA)
    window.wait_for(  # the moment without input is marked in the transcript, before the words said after it
        "the gap marker before the words",
        lambda: (
            "s: no audio for" in window.captions()
            and window.captions().index("was unplugged or removed) …]")
            < window.captions().lower().index("emma")
        ),
    )
    window.wait_event(
        lambda e: e["event"] == "inputs" and "pulse:source:usb.monitor" not in str(e["items"]),
        "the headset gone from the list",
    )

    window.send({"cmd": "fill"})  # the next start: the remembered headset is gone, and the list says so
    listed = window.wait_event(
        lambda e: e["event"] == "inputs" and "not there" in str(e["status"]), "the gone input announced"
    )
    assert listed["current"] == "system:default"
    assert "usb.monitor" in str(listed["status"]) and "What this computer plays" in str(listed["status"])
