"""Long recordings for live-path tests and soaks: espeak-ng sentences in the demo model's vocabulary (its
held-out sentence structures) with pauses between them, at 16 kHz, reproducible from a seed."""

from __future__ import annotations

import importlib.util
import random
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import numpy as np

from inference.audio.io import load_audio_file
from inference.contract import SAMPLE_RATE

DEMO_REFERENCE = Path(__file__).resolve().parent / "reference" / "demo_model"
VOICES = ("en-us", "gmw/en+john", "en-us+klatt3")


def espeak_available() -> bool:
    return shutil.which("espeak-ng") is not None


@cache
def _sentences_module():  # type: ignore[no-untyped-def]
    if str(DEMO_REFERENCE) not in sys.path:
        sys.path.insert(0, str(DEMO_REFERENCE))  # its siblings import each other by plain name
    spec = importlib.util.spec_from_file_location("demo_sentences", DEMO_REFERENCE / "sentences.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["demo_sentences"] = module
    spec.loader.exec_module(module)
    return module


def say(text: str, voice: str) -> np.ndarray:
    with tempfile.TemporaryDirectory() as folder:
        wav = Path(folder) / "s.wav"
        subprocess.run(
            ["espeak-ng", "-v", voice, "-s", "160", "-w", str(wav), text], check=True, capture_output=True
        )
        return load_audio_file(wav)


@dataclass(frozen=True)
class Recording:
    audio: np.ndarray
    sentences: tuple[tuple[str, float, float], ...]  # text, start s, end s

    @property
    def text(self) -> str:
        return " ".join(text for text, _, _ in self.sentences)


@cache
def recording(
    seconds: float, seed: int = 0, pause_s: tuple[float, float] = (0.6, 1.4), trim: bool = False
) -> Recording:
    """At least ``seconds`` of sentences separated by pauses of ``pause_s`` (uniform), plus a final pause.
    espeak-ng ends every sentence with 0.35 s of silence of its own; ``trim`` cuts it, so that a pause is all the
    silence between two sentences (talk that runs on)."""
    rng = random.Random(seed)
    # about 3.5 s per sentence with its pause; distinct sentences as long as the grammar has them
    texts = [
        text for text, _ in _sentences_module().make_sentences(seed, int(seconds / 2.5) + 20, held_out=True)
    ]
    parts: list[np.ndarray] = [np.zeros(int(0.5 * SAMPLE_RATE), np.float32)]
    sentences: list[tuple[str, float, float]] = []
    total = parts[0].size
    for index, text in enumerate(texts):
        if total >= seconds * SAMPLE_RATE:
            break
        spoken = say(text, VOICES[index % len(VOICES)])
        if trim:
            sound = np.flatnonzero(np.abs(spoken) > 1e-3)
            spoken = spoken[: sound[-1] + 1] if sound.size else spoken
        sentences.append((text, total / SAMPLE_RATE, (total + spoken.size) / SAMPLE_RATE))
        pause = np.zeros(int(rng.uniform(*pause_s) * SAMPLE_RATE), np.float32)
        parts += [spoken, pause]
        total += spoken.size + pause.size
    return Recording(np.concatenate(parts), tuple(sentences))
