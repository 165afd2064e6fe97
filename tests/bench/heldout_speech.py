"""The demo model's held-out evaluation clips, rendered again with espeak-ng + sox (no torch): the same sentences,
voices and settings as the corpora's held-out splits (resources/demo_model/PROVENANCE.md), each clean and with
20 dB noise.

Splits: ``test`` (held-out sentences of training structures, held-out variants of the training voices),
``test_structures`` (structures never produced for training), ``unseen`` (unseen base voices; data4, seed
20261201) and ``unseen_fresh`` (the confirmation split of data5, seed 20261202). The plans come from
``tests/reference/demo_model/make_data.py`` itself, so no sentence is one the model trained on.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

REFERENCE = Path(__file__).resolve().parents[1] / "reference" / "demo_model"
DATA4_SEED, DATA5_SEED = 20261201, 20261202
DATA4_COUNTS = {"test": 300, "test_structures": 400, "unseen": 400}
DATA4_TRAIN, FRESH_COUNT = 36000, 300
SPLITS = ("test", "test_structures", "unseen", "unseen_fresh")
CONDITIONS = ("corpus", "clean", "noise20")
LONG_CONDITION = "long20"  # LONG_GROUP clips of a split in one recording, 0.5-3 s apart, 20 dB noise over all
LONG_GROUP = 8
NOISY_SNR_DB = 20.0
SAMPLE_RATE = 16000


def _make_data() -> Any:
    if str(REFERENCE) not in sys.path:
        sys.path.insert(0, str(REFERENCE))
    import make_data  # type: ignore[import-not-found]

    return make_data


@dataclass(frozen=True)
class HeldOutClip:
    split: str
    index: int
    text: str
    structure: str
    voice: str
    job: dict[str, Any]


@lru_cache(maxsize=1)
def held_out_plans() -> dict[str, list[HeldOutClip]]:
    """Every held-out split's clips, planned exactly as make_data.py planned data4 and data5."""
    md = _make_data()
    voices = md.build_voice_sets(md.espeak_render, fresh_variants=md.FRESH_VARIANTS)
    held_out = set(md.SAMPLE_TEXTS)
    plans: dict[str, list[dict[str, Any]]] = {}
    for split, count in DATA4_COUNTS.items():
        plans[split] = md.plan_jobs(split, count, DATA4_SEED, held_out, md.split_voices(split, voices))
        held_out |= {job["text"] for job in plans[split]}
    # data5 excluded every data4 sentence, its training split included (--held-out-from).
    train = md.plan_jobs("train", DATA4_TRAIN, DATA4_SEED, held_out, voices.train)
    excluded = held_out | {job["text"] for job in train}
    plans["unseen_fresh"] = md.plan_jobs("unseen_fresh", FRESH_COUNT, DATA5_SEED, excluded, voices.fresh)
    return {
        split: [HeldOutClip(split, j["index"], j["text"], j["structure"], j["voice"], j) for j in jobs]
        for split, jobs in plans.items()
    }


def render(clip: HeldOutClip, condition: str) -> np.ndarray:
    """The clip's audio (float32, 16 kHz): ``corpus`` as the corpus has it, ``clean`` without noise, ``noise20``
    with its own noise kind (white or pink alternating for clips planned clean) at 20 dB SNR."""
    job = dict(clip.job)
    if condition == "corpus":
        pass
    elif condition == "clean":
        job["noise"] = "none"
    elif condition == "noise20":
        if job["noise"] == "none":
            job["noise"] = "white" if clip.index % 2 else "pink"
        job["snr_db"] = NOISY_SNR_DB
    else:
        raise ValueError(f"unknown condition {condition!r}; use one of {CONDITIONS}")
    _job, audio = _make_data().render_clip(job)
    return audio.astype(np.float32) / 32768.0


def long_recording(clips: list[HeldOutClip]) -> tuple[str, np.ndarray]:
    """The clips' clean renders one after another with 0.5-3 s of silence between them, then white or pink noise
    over the whole recording at 20 dB below the renders' level: the reference text and the audio."""
    md = _make_data()
    rng = np.random.default_rng(clips[0].job["seed"])
    pieces: list[np.ndarray] = []
    for i, clip in enumerate(clips):
        if i:
            pieces.append(np.zeros(int(rng.uniform(0.5, 3.0) * SAMPLE_RATE), np.float32))
        pieces.append(render(clip, "clean"))
    speech_rms = float(np.sqrt(np.mean(np.concatenate(pieces[::2]) ** 2))) + 1e-9
    audio = np.concatenate(pieces)
    noise = md.noise(rng, audio.size, "white" if clips[0].index % 2 else "pink")
    noise *= speech_rms / (float(np.sqrt(np.mean(noise**2))) + 1e-9) / (10 ** (NOISY_SNR_DB / 20))
    return " ".join(clip.text for clip in clips), np.clip(audio + noise, -1.0, 1.0).astype(np.float32)
