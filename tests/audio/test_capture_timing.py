"""Capture through a real (private) PulseAudio delivers every sample played once it says it delivers
(``wait_until_delivering``): a click track played right then comes back with every click, each exactly the
track's own spacing after the one before (the sound server's clock, not the wall clock: no sample lost or
added, 5.5 s of clicks counted to the sample).

A new record stream gets its first audio only when the server next renders (0.6-2.5 s later on a null
sink); before the capture could be waited on, "listening on" was said while nothing was recorded yet. The track begins with LEAD_S of
silence: a sink's monitor cannot hand over what the sink rendered ahead before a new player connected (a
rewind of at most its latency, 30 ms at our block size: measured with clicks every 50 ms, one lost)."""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.live_cli import REPO_ROOT
from tests.sound_server import MIC, MIC_FEED, SPEAKERS, SoundServer

CLICKS = 12
SPACING_S = 0.5
TAIL_S = 1.0
LEAD_S = 0.1
RATE = 16_000


def click_track(folder: Path) -> Path:
    """LEAD_S of silence, then a 1 ms click every SPACING_S, then TAIL_S of silence; 48 kHz stereo, as a
    player sends."""
    click, gap, track = folder / "click.wav", folder / "gap.wav", folder / "clicks.wav"
    subprocess.run(["sox", "-n", "-r", "48000", "-c", "2", str(click), "synth", "0.001", "square", "1000",
                    "vol", "0.8"], check=True, timeout=60)  # fmt: skip
    subprocess.run(["sox", "-n", "-r", "48000", "-c", "2", str(gap), "trim", "0", str(SPACING_S - 0.001)],
                   check=True, timeout=60)  # fmt: skip
    parts = [str(p) for _ in range(CLICKS - 1) for p in (click, gap)]
    subprocess.run(
        ["sox", *parts, str(click), str(track), "pad", str(LEAD_S), str(TAIL_S)], check=True, timeout=60
    )
    return track


@pytest.mark.parametrize(("input_id", "sink"), [("system", SPEAKERS), (f"pulse:source:{MIC}", MIC_FEED)])
def test_every_sample_played_after_start_is_delivered(
    sound_server: SoundServer, tmp_path: Path, input_id: str, sink: str
) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "tests.audio.capture_clicks_child", input_id, sink, str(click_track(tmp_path)),
         str(TAIL_S)],
        cwd=REPO_ROOT, env=sound_server.env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert not report["ended"], report
    assert report["live_at_start"], "the capture said it delivers before audio came: words said then are lost"
    clicks = report["clicks"]
    assert len(clicks) == CLICKS, f"{CLICKS - len(clicks)} of the first clicks were not captured: {clicks}"
    assert [b - a for a, b in itertools.pairwise(clicks)] == [int(SPACING_S * RATE)] * (CLICKS - 1), clicks
