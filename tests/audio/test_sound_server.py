"""Live inputs through a real (private) PulseAudio: listing by id, system audio and the virtual microphone
captioned by the command line, and a device unplugged and plugged back in mid-session."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.live_cli import DEADLINE_S, REPO_ROOT, LiveCli, share_of_words, words
from tests.sound_server import MIC_FEED, SPEAKERS, SoundServer, die_with_parent, speech_wav
from tests.text_metrics import word_edits

EMMA = "Emma quickly closed the early bottle and sang."
HEARTS = "There are twenty hearts in the garden."
SHARE = 0.8  # the demo model knows these words (its own samples' sentences); leave room for one slip


@pytest.fixture
def live_cli(sound_server: SoundServer) -> Iterator[list[LiveCli]]:
    started: list[LiveCli] = []
    yield started
    for cli in started:
        cli.kill()


def start_cli(started: list[LiveCli], server: SoundServer, input_id: str) -> LiveCli:
    cli = LiveCli(["transcribe", "--input", input_id, "--mode", "streaming", "--format", "jsonl"], server.env)
    started.append(cli)
    cli.wait_note("listening on")
    return cli


def test_devices_lists_microphones_and_system_audio_by_id(sound_server: SoundServer) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "inference.cli", "devices"],
        cwd=REPO_ROOT,
        env=sound_server.env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    microphones, system = done.stdout.split("System audio:")
    assert "pulse:source:mic  Virtual-microphone (default)" in microphones
    assert "monitor" not in microphones  # outputs' monitors are system audio, not microphones
    assert "system:default                 What this computer plays (default)" in system
    assert f"pulse:source:{SPEAKERS}.monitor  Speakers" in system
    assert f"pulse:source:{MIC_FEED}.monitor  Mic-feed" in system


def test_cli_captions_what_the_computer_plays(
    sound_server: SoundServer, live_cli: list[LiveCli], tmp_path: Path
) -> None:
    cli = start_cli(live_cli, sound_server, "system")
    assert "What this computer plays (Speakers)" in cli.notes[-1]
    sound_server.play(speech_wav(tmp_path, "emma", EMMA), SPEAKERS)
    cli.wait_words(EMMA, SHARE)
    final = cli.interrupt()
    assert word_edits(" ".join(words(str(final["text"]))), " ".join(words(EMMA))) <= 1, final["text"]


def test_cli_captions_the_default_microphone(
    sound_server: SoundServer, live_cli: list[LiveCli], tmp_path: Path
) -> None:
    cli = start_cli(live_cli, sound_server, "mic")
    assert "Virtual-microphone" in cli.notes[-1]
    sound_server.play(speech_wav(tmp_path, "hearts", HEARTS), MIC_FEED)
    cli.wait_words(HEARTS, SHARE)
    speakers_only = speech_wav(tmp_path, "emma", EMMA)
    sound_server.play(speakers_only, SPEAKERS)  # what the computer plays is not the microphone
    final = cli.interrupt()
    assert not {"emma", "quickly", "bottle", "sang"} & set(words(str(final["text"]))), final["text"]


def test_an_unplugged_input_is_announced_and_captioning_goes_on(
    sound_server: SoundServer, live_cli: list[LiveCli], tmp_path: Path
) -> None:
    module = sound_server.add_output("usb", "USB-headset")
    cli = start_cli(live_cli, sound_server, "pulse:source:usb.monitor")
    assert "USB-headset" in cli.notes[-1]
    sound_server.play(speech_wav(tmp_path, "emma", EMMA), "usb")
    cli.wait_words(EMMA, SHARE)

    sound_server.remove_module(module)  # unplugged mid-session
    note = cli.wait_note("now listening on")
    assert "'USB-headset' was unplugged or removed" in note
    assert "What this computer plays (Speakers)" in note
    sound_server.play(speech_wav(tmp_path, "hearts", HEARTS), SPEAKERS)  # the session goes on, on the default
    cli.wait_words(EMMA + " " + HEARTS, SHARE)
    gap = wait_gap_marker(cli)
    assert "'USB-headset' was unplugged or removed" in gap, gap

    sound_server.add_output("usb", "USB-headset")  # plugged back in: listed again, the session undisturbed
    assert "usb.monitor" in sound_server.pactl("list", "short", "sources")
    final = cli.interrupt()
    assert {"emma", "quickly", "twenty", "hearts"} <= set(words(str(final["text"]))), final["text"]
    assert_marked_between(str(final["text"]), gap.strip(), "emma", "hearts")
    assert_marked_between(cli.committed(), gap.strip(), "emma", "hearts")


def test_a_changed_default_output_is_followed(
    sound_server: SoundServer, live_cli: list[LiveCli], tmp_path: Path
) -> None:
    cli = start_cli(live_cli, sound_server, "system")
    sound_server.pactl("set-default-sink", MIC_FEED)
    note = cli.wait_note("now listening on")
    assert "the default output changed" in note and "Mic-feed" in note
    sound_server.play(speech_wav(tmp_path, "emma", EMMA), MIC_FEED)
    cli.wait_words(EMMA, SHARE)
    gap = wait_gap_marker(cli)
    assert "the default output changed" in gap and "Mic-feed" in gap, gap
    final = cli.interrupt(signal.SIGTERM)  # `kill PID` from a script finishes the transcript as Ctrl-C does
    assert {"emma", "quickly", "bottle"} <= set(words(str(final["text"]))), final["text"]
    assert gap.strip() in str(final["text"]) and str(final["text"]).index(gap.strip()) < str(
        final["text"]
    ).lower().index("emma"), final["text"]  # the gap came before the words played on the new default


def wait_gap_marker(cli: LiveCli) -> str:
    """The text of the gap marker (a delta with a negative segment id, as the window shows it)."""
    event = cli.wait_event(
        lambda e: e.get("type") == "delta" and int(str(e.get("segment_id", 0))) < 0, "a gap marker"
    )
    text = str(event["text"])
    assert "no audio for" in text, text
    return text


def assert_marked_between(text: str, marker: str, before: str, after: str) -> None:
    """``marker`` in ``text`` after the word ``before`` and ahead of the word ``after``."""
    assert marker in text, text
    at = text.index(marker)
    assert before in text[:at].lower() and after in text[at:].lower(), text


def test_text_output_shows_the_gap_marker_where_the_input_changed(
    sound_server: SoundServer, tmp_path: Path
) -> None:
    """``--format text``: the running line and the final text both carry the marker, before the words played
    on the new default."""
    output = tmp_path / "captions.txt"
    with output.open("w") as stdout:
        process = subprocess.Popen(
            [sys.executable, "-m", "inference.cli", "transcribe", "--input", "system", "--mode", "streaming"],
            cwd=REPO_ROOT, env=sound_server.env, stdout=stdout, stderr=subprocess.PIPE, text=True,
            preexec_fn=die_with_parent,
        )  # fmt: skip
    try:
        assert process.stderr is not None
        notes = [process.stderr.readline()]
        while "listening on" not in notes[-1]:
            notes.append(process.stderr.readline())
            assert notes[-1], f"captioneer exited: {notes}"
        sound_server.pactl("set-default-sink", MIC_FEED)
        while "now listening on" not in notes[-1]:
            notes.append(process.stderr.readline())
            assert notes[-1], f"captioneer exited: {notes}"
        sound_server.play(speech_wav(tmp_path, "emma", EMMA), MIC_FEED)
        deadline = time.monotonic() + DEADLINE_S  # a bound for a failing run; the loop waits for the words
        while share_of_words(EMMA, output.read_text()) < SHARE:
            assert time.monotonic() < deadline and process.poll() is None, output.read_text()
            time.sleep(
                0.2
            )  # polling the condition (the captions file holds the words), not a stand-in for it
        process.send_signal(signal.SIGINT)
        process.wait(timeout=DEADLINE_S)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(timeout=60)
    running, final = output.read_text().rstrip("\n").split("\n")[-2:]
    for line in (running, final):
        assert "no audio for" in line and "the default output changed" in line, line
        assert line.index("no audio for") < line.lower().index("emma"), line
