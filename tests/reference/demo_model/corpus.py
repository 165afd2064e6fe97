"""Reading the cached corpus written by make_data.py (features, audio, transcripts)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np


@dataclass(frozen=True)
class Clip:
    text: str
    voice: str
    features: np.ndarray  # (frames, 128) float16, already normalised by the reference extractor
    audio: np.ndarray | None  # int16 16 kHz mono, only kept for the held-out splits
    meta: dict


def load_split(data_dir: Path, split: str) -> list[Clip]:
    split_dir = data_dir / split
    metas = [json.loads(line) for line in (split_dir / "meta.jsonl").read_text().splitlines() if line]
    by_shard: dict[int, list[dict]] = {}
    for meta in metas:
        by_shard.setdefault(meta["shard"], []).append(meta)
    clips: list[Clip] = []
    for shard, shard_metas in sorted(by_shard.items()):
        arrays = np.load(split_dir / f"shard_{shard:03d}.npz")
        feats, offsets, lengths = arrays["features"], arrays["offsets"], arrays["lengths"]
        has_audio = "audio" in arrays
        if has_audio:
            audio, aoff, alen = arrays["audio"], arrays["audio_offsets"], arrays["audio_lengths"]
        for i, meta in enumerate(shard_metas):
            clip_audio = audio[aoff[i] : aoff[i] + alen[i]] if has_audio else None
            clips.append(
                Clip(
                    meta["text"], meta["voice"], feats[offsets[i] : offsets[i] + lengths[i]], clip_audio, meta
                )
            )
    return clips
