"""Without any sound server: ``captioneer devices`` lists PortAudio's inputs and ``transcribe --input mic``
records PortAudio's default input, each saying why. ALSA's default device (a ``.asoundrc`` in the test's
HOME) records a second of silence from a file (the ``file`` plugin's ``infile``; ALSA has no paced virtual
capture device without a kernel module, so it is read as fast as it is asked for and the session is ended at
once); no PulseAudio answers at the address given."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.live_cli import REPO_ROOT, LiveCli

SPEAKING_ALSA = """pcm.nullsink {{ type null }}
pcm.speechfile {{ type file slave.pcm "nullsink" file "/dev/null" infile "{raw}" format "raw" }}
pcm.!default {{ type plug slave {{ pcm "speechfile" format S16_LE rate 16000 channels 1 }} }}
"""


@pytest.fixture
def no_server_env(tmp_path: Path) -> dict[str, str]:
    raw = tmp_path / "silence.raw"
    raw.write_bytes(bytes(2 * 16000))
    home = tmp_path / "home"
    home.mkdir()
    (home / ".asoundrc").write_text(SPEAKING_ALSA.format(raw=raw))
    runtime = tmp_path / "xdg"
    runtime.mkdir(mode=0o700)
    env = dict(os.environ, HOME=str(home), XDG_RUNTIME_DIR=str(runtime))
    env["PULSE_SERVER"] = f"unix:{runtime}/pulse/native"  # nothing listens there (and libpulse spawns none)
    env.pop("PULSE_SOURCE", None)
    return env


@pytest.fixture
def live_cli() -> Iterator[list[LiveCli]]:
    started: list[LiveCli] = []
    yield started
    for cli in started:
        cli.kill()


def test_devices_lists_portaudio_inputs_with_a_note(no_server_env: dict[str, str]) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "inference.cli", "devices"],
        cwd=REPO_ROOT,
        env=no_server_env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert "no sound server answered" in done.stderr and "through PortAudio" in done.stderr
    microphones, system = done.stdout.split("System audio:")
    assert "portaudio:speechfile  speechfile" in microphones
    assert "portaudio:default     default (default)" in microphones
    assert "(none found)" in system  # PortAudio offers no monitor of an output


def test_transcribe_input_mic_records_portaudios_default(
    no_server_env: dict[str, str], live_cli: list[LiveCli]
) -> None:
    cli = LiveCli(["transcribe", "--input", "mic", "--mode", "streaming", "--format", "jsonl"], no_server_env)
    live_cli.append(cli)
    listening = cli.wait_note("listening on")
    assert "listening on default" in listening
    assert any("no sound server answered; capturing the default input instead" in n for n in cli.notes)
    final = cli.interrupt()
    assert final["text"] == ""  # silence
    assert not any("error" in note for note in cli.notes), cli.notes


def test_transcribe_system_audio_names_the_fix(no_server_env: dict[str, str]) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "inference.cli", "transcribe", "--input", "system", "--mode", "streaming"],
        cwd=REPO_ROOT,
        env=no_server_env,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert done.returncode == 1
    assert "no sound server answered" in done.stderr and "pipewire-pulse" in done.stderr
