"""Non-speech audio for false-word checks: silence, noise at several levels, tones, hum, chords and clicks.

Seeded and generated on the fly (no fixtures): each kind is a distinct structure, not a variation of speech.
"""

from __future__ import annotations

import numpy as np

SAMPLE_RATE = 16000
KINDS = (
    "silence",
    "white_1e-5",
    "white_1e-3",
    "white_2e-2",
    "pink",
    "tone_440",
    "tone_1k",
    "hum_50",
    "chords",
    "clicks",
)


def nonspeech(kind: str, seconds: float, seed: int = 7) -> np.ndarray:
    rng = np.random.default_rng(seed)
    n = int(SAMPLE_RATE * seconds)
    t = np.arange(n) / SAMPLE_RATE
    if kind == "silence":
        audio = np.zeros(n)
    elif kind.startswith("white_"):
        audio = rng.standard_normal(n) * float(kind.split("_")[1])
    elif kind == "pink":
        spectrum = np.fft.rfft(rng.standard_normal(n))
        spectrum[1:] /= np.sqrt(np.arange(1, spectrum.size))
        audio = np.fft.irfft(spectrum, n)
        audio *= 0.1 / np.abs(audio).max()
    elif kind.startswith("tone_"):
        audio = 0.2 * np.sin(2 * np.pi * {"tone_440": 440, "tone_1k": 1000}[kind] * t)
    elif kind == "hum_50":
        audio = 0.05 * np.sin(2 * np.pi * 50 * t) + 0.02 * np.sin(2 * np.pi * 150 * t)
    elif kind == "chords":
        roots = np.array([220, 277, 330, 392, 440, 523])[(np.arange(n) // (SAMPLE_RATE // 2)) % 6]
        audio = sum(np.sin(2 * np.pi * roots * k * t) / k for k in (1, 2, 3)) * 0.05
    elif kind == "clicks":
        audio = rng.standard_normal(n) * 1e-4
        audio[:: SAMPLE_RATE // 3] = 0.5
    else:
        raise ValueError(f"unknown non-speech kind {kind!r}; choose from {KINDS}")
    return np.asarray(audio, dtype=np.float32)
