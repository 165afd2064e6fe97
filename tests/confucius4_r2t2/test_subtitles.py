"""Subtitles of Confucius4-R2T2 (text without word times): the CLI gives the cues the VAD's voiced stretches, so
a 6 s silence inside a 30 s span is not covered by a cue."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import soundfile

from tests.conftest import REPO_ROOT
from tests.confucius4_r2t2.r2t2_fixtures import HF_CHECKPOINT


def test_cli_subtitles_of_a_text_only_model_skip_a_long_silence(tmp_path: Path) -> None:
    first, rate = soundfile.read(REPO_ROOT / "resources/samples/demo_sample_1.wav", dtype="float32")
    second, _ = soundfile.read(REPO_ROOT / "resources/samples/demo_sample_2.wav", dtype="float32")
    wav = tmp_path / "gap.wav"
    soundfile.write(wav, np.concatenate([first, np.zeros(6 * rate, np.float32), second]), rate)
    gap = (first.size / rate + 0.5, first.size / rate + 5.5)
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "inference.cli",
            "transcribe",
            str(wav),
            "--model",
            str(HF_CHECKPOINT),
            "--format",
            "srt",
        ],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    stamps = [line.split(" --> ") for line in done.stdout.splitlines() if " --> " in line]
    assert stamps, done.stdout

    def seconds(stamp: str) -> float:
        hours, minutes, rest = stamp.split(":")
        return int(hours) * 3600 + int(minutes) * 60 + float(rest.replace(",", "."))

    for start, end in stamps:
        assert not (seconds(start) < gap[0] and seconds(end) > gap[1]), (start, end)
