"""Small end-to-end fixtures from the held-out splits, with the torch greedy output of the shipped model.

Writes tests/fixtures/demo_model/{manifest.json, *.wav} (a few short clips from the `test` and
`unseen` splits) and resources/samples/*.wav (bundled samples for the README run command). The
manifest records the true transcript and the torch greedy text + token ids, so Captioneer's engine can
be asserted equal to the reference.

    .venv-ref/bin/python tests/reference/demo_model/make_fixtures.py \
        --model resources/demo_model --data $DEMO_WORK/data4
"""

from __future__ import annotations

import argparse
import json
import sys
import wave
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from corpus import Clip, load_split  # noqa: E402
from evaluate import torch_transcriber  # noqa: E402
from make_data import SAMPLE_TEXTS, render_clip  # noqa: E402

REPO = Path(__file__).resolve().parents[3]
# (text, espeak-ng voice, length in samples): `gmw/en` is the en-gb voice file, spelled so the variant really
# applies. The lengths are those of the earlier samples (3.970 s, 3.604 s), which tests of the server and app
# state; the trailing silence is chosen to reach them.
SAMPLES = [
    ("emma quickly closed the early bottle and sang", "gmw/en+john", 63518),
    ("there are twenty hearts in the garden", "en-us+klatt3", 57666),
]


def write_wav(path: Path, audio_i16: np.ndarray) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with wave.open(str(path), "wb") as wav:
        wav.setnchannels(1)
        wav.setsampwidth(2)
        wav.setframerate(16000)
        wav.writeframes(audio_i16.astype("<i2").tobytes())


def pick(clips: list[Clip], count: int, min_s: float, max_s: float) -> list[Clip]:
    """First `count` clips in the split's (seeded) order with a duration in range and distinct voices."""
    chosen, voices = [], set()
    for clip in clips:
        seconds = len(clip.audio) / 16000
        if min_s <= seconds <= max_s and clip.voice not in voices:
            chosen.append(clip)
            voices.add(clip.voice)
        if len(chosen) == count:
            break
    return chosen


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", type=Path, default=REPO / "resources" / "demo_model")
    parser.add_argument("--data", type=Path, required=True)
    parser.add_argument("--fixtures", type=Path, default=REPO / "tests" / "fixtures" / "demo_model")
    parser.add_argument("--samples", type=Path, default=REPO / "resources" / "samples")
    args = parser.parse_args()

    transcribe = torch_transcriber(args.model, threads=2)
    for stale in args.fixtures.glob("*.wav"):  # clips of an older manifest
        stale.unlink()
    entries = []
    for split, count in (("test", 3), ("test_structures", 3), ("unseen", 3)):
        for clip in pick(load_split(args.data, split), count, 1.8, 3.0):
            clip_id = f"{split}_{clip.meta['index']:04d}"
            write_wav(args.fixtures / f"{clip_id}.wav", clip.audio)
            text, token_ids = transcribe(clip.audio.astype(np.float32) / 32768.0)
            entries.append(
                {
                    "id": clip_id,
                    "wav": f"{clip_id}.wav",
                    "split": split,
                    "text": clip.text,
                    "voice": clip.voice,
                    "noise": clip.meta["noise"],
                    "snr_db": clip.meta["snr_db"],
                    "torch_greedy_text": text,
                    "torch_greedy_token_ids": token_ids,
                }
            )
    manifest = {
        "model": "resources/demo_model",
        "generator": "tests/reference/demo_model/make_fixtures.py",
        "clips": entries,
    }
    (args.fixtures / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n")

    # bundled samples: fixed sentences (never in training), held-out voices, mild noise
    held_out_voices = json.loads((args.data / "voices.json").read_text())["test"]
    samples = []
    for number, (text, voice, length) in enumerate(SAMPLES, start=1):
        assert text in SAMPLE_TEXTS and voice in held_out_voices, (text, voice)
        job = {
            "text": text,
            "voice": voice,
            "speed": 150,
            "pitch": 50,
            "gap": 0,
            "gain": 0.6,
            "pad_lead": 0.4,
            "pad_tail": 0.0,
            "noise": "pink",
            "snr_db": 35.0,
            "seed": number,
        }
        tail = length - len(render_clip(job)[1])
        assert tail >= 1600, f"sample {number} is too long for {length} samples"
        _, audio = render_clip({**job, "pad_tail": (tail + 0.5) / 16000})
        assert len(audio) == length
        name = f"demo_sample_{number}.wav"
        write_wav(args.samples / name, audio)
        hypothesis, _ = transcribe(audio.astype(np.float32) / 32768.0)
        samples.append({"wav": name, "text": text, "voice": voice, "torch_greedy_text": hypothesis})
    (args.samples / "samples.json").write_text(json.dumps({"samples": samples}, indent=1) + "\n")
    for entry in entries + samples:
        print(f"{entry['voice']:>22}  ref: {entry['text']}\n{'':>22}  hyp: {entry['torch_greedy_text']}")


if __name__ == "__main__":
    main()
