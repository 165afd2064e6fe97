"""Speech for the benchmarks: the two bundled sentences with pauses, repeated to any length."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from inference.audio.io import load_audio_file
from inference.contract import SAMPLE_RATE

SAMPLES = Path(__file__).resolve().parents[2] / "resources" / "samples"


def speech_clip(seconds: float, gap_s: float = 0.7) -> np.ndarray:
    clips = [load_audio_file(SAMPLES / f"demo_sample_{i}.wav") for i in (1, 2)]
    gap = np.zeros(int(gap_s * SAMPLE_RATE), np.float32)
    pieces, total = [], 0
    while total < seconds * SAMPLE_RATE:
        for clip in clips:
            pieces += [clip, gap]
            total += clip.size + gap.size
    return np.concatenate(pieces)[: int(seconds * SAMPLE_RATE)]
