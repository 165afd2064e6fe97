"""A private PulseAudio for tests, as ../shared/tools/sound.sh sets up by hand: a null sink as the speakers
(its monitor is what the computer plays) and a virtual microphone fed by a second null sink.

Each server has its own XDG_RUNTIME_DIR under the test's tmp folder and is killed at teardown; child
processes reach it through ``env``. Speech is made with espeak-ng and played with paplay.
"""

from __future__ import annotations

import ctypes
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

SPEAKERS = "speakers"
MIC_FEED = "mic_feed"
MIC = "mic"
START_DEADLINE_S = 60.0  # generous: a busy machine starts a daemon slowly


@dataclass
class SoundServer:
    runtime_dir: Path
    process: subprocess.Popen[bytes]

    @property
    def env(self) -> dict[str, str]:
        env = dict(os.environ)
        env["XDG_RUNTIME_DIR"] = str(self.runtime_dir)
        env["PULSE_SERVER"] = f"unix:{self.runtime_dir}/pulse/native"
        env.pop("PULSE_SINK", None)
        env.pop("PULSE_SOURCE", None)
        return env

    def pactl(self, *args: str) -> str:
        done = subprocess.run(["pactl", *args], env=self.env, capture_output=True, text=True, timeout=60)
        if done.returncode != 0:
            raise AssertionError(f"pactl {' '.join(args)} failed: {done.stderr}")
        return done.stdout

    def play(self, wav: Path, device: str) -> None:
        """Play ``wav`` into ``device`` (a sink) and return when it has been played."""
        subprocess.run(["paplay", f"--device={device}", str(wav)], env=self.env, check=True, timeout=120)

    def add_output(self, name: str, description: str) -> str:
        """A new null sink (a plugged-in headset); returns the module id to unload it with."""
        return self.pactl(
            "load-module",
            "module-null-sink",
            f"sink_name={name}",
            f"sink_properties=device.description={description}",
        ).strip()

    def remove_module(self, module_id: str) -> None:
        self.pactl("unload-module", module_id)


def die_with_parent() -> None:
    """For ``preexec_fn``: a test's server or child ends when the test process dies, even by SIGKILL (Linux), and
    gets Ctrl-C back when the tests run as a background job (which ignores SIGINT)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    PR_SET_PDEATHSIG = 1
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


def speech_wav(folder: Path, name: str, sentence: str) -> Path:
    """espeak-ng speaking ``sentence``, with a second of silence after it (so a pause ends the segment)."""
    if shutil.which("espeak-ng") is None:
        pytest.skip("espeak-ng is not installed (CI installs it: see .ci/run)")
    wav = folder / f"{name}.wav"
    subprocess.run(["espeak-ng", "-s", "150", "-w", str(wav), sentence], check=True, timeout=60)
    padded = folder / f"{name}-padded.wav"
    subprocess.run(["sox", str(wav), str(padded), "pad", "0", "1.5"], check=True, timeout=60)
    return padded


def start_sound_server(folder: Path) -> Iterator[SoundServer]:
    for tool in ("pulseaudio", "pactl", "paplay", "sox"):
        if shutil.which(tool) is None:
            pytest.skip(f"{tool} is not installed (CI installs pulseaudio pulseaudio-utils sox: see .ci/run)")
    runtime = folder / "xdg"
    runtime.mkdir(parents=True)
    runtime.chmod(0o700)
    env = dict(os.environ, XDG_RUNTIME_DIR=str(runtime), HOME=str(folder))
    process = subprocess.Popen(
        [
            "pulseaudio", "-n", "--daemonize=no", "--exit-idle-time=-1", "--disallow-exit",
            "--log-target=stderr", "-L", "module-native-protocol-unix", "-L", "module-always-sink",
            "-L", f"module-null-sink sink_name={SPEAKERS} sink_properties=device.description=Speakers",
            "-L", f"module-null-sink sink_name={MIC_FEED} sink_properties=device.description=Mic-feed",
            "-L", f"module-remap-source master={MIC_FEED}.monitor source_name={MIC} "
            "source_properties=device.description=Virtual-microphone",
        ],
        env=env,
        preexec_fn=die_with_parent,
        stdout=subprocess.DEVNULL,
        stderr=(folder / "pulseaudio.log").open("wb"),
    )  # fmt: skip
    server = SoundServer(runtime, process)
    deadline = time.monotonic() + START_DEADLINE_S
    while True:
        ready = subprocess.run(["pactl", "info"], env=server.env, capture_output=True, timeout=60)
        if ready.returncode == 0:
            break
        if process.poll() is not None or time.monotonic() > deadline:
            process.kill()
            log = (folder / "pulseaudio.log").read_text(errors="replace")[-2000:]
            raise AssertionError(f"the test sound server did not start:\n{log}")
        time.sleep(0.1)  # polling the condition (the server answers), not a stand-in for it
    server.pactl("set-default-sink", SPEAKERS)
    server.pactl("set-default-source", MIC)
    try:
        yield server
    finally:
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=30)


def without_trailing_silence(wav: Path, out: Path) -> Path:
    """``wav`` cut right after its last sound (above -40 dBFS): espeak-ng ends its files with ~0.4 s of silence,
    so a player that returns at the file's end returns as the last word ends."""
    import numpy as np
    import soundfile

    audio, rate = soundfile.read(str(wav), dtype="float32")
    loud = np.flatnonzero(np.abs(audio) > 0.01)
    soundfile.write(str(out), audio[: int(loud[-1]) + 1 if loud.size else 0], rate)
    return out
