"""Synthesise the demo model's English speech corpus with espeak-ng (reproducible from --seed).

Splits:
* train:   training sentences, training voices (base voice + variant combinations below).
* test:    held-out sentences, held-out variants on the training base voices.
* unseen:  held-out sentences, base voices AND variants never used in training.

Every clip: espeak-ng (random speed 130..200 wpm, pitch 30..70, word gap), resampled to 16 kHz mono
by sox, random gain, 0.05..0.8 s silence padding each side, and (80 % of clips) white or pink noise
at a random SNR of 15..40 dB. Features come from the reference `ParakeetFeatureExtractor` (128 mels)
and are cached as float16 shards so training never recomputes them.

Output (under --out): <split>/shard_XXX.npz with `features` (concatenated frames x 128, float16),
`offsets`, `lengths`, and for test splits `audio` (int16, concatenated) + `audio_offsets`;
<split>/meta.jsonl with one line per clip (text, voice, speed, pitch, snr, ...).

Run (nice'd, 2 worker processes):
    nice -n 15 /work/refvenv/bin/python tests/reference/demo_model/make_data.py --out /work/demo_work/data
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import random
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from sentences import make_sentences  # noqa: E402

SAMPLE_RATE = 16000
TRAIN_BASES = ["en-us", "en-gb", "en-gb-x-rp", "en-gb-scotland", "en-us-nyc", "en-gb-x-gbclan"]
TRAIN_VARIANTS = ["", "m1", "m2", "m3", "m4", "m5", "m6", "f1", "f2", "f3", "f4", "klatt", "klatt2",
                  "Alex", "Annie", "Gene", "Lee", "max", "paul", "Andy", "Jacky"]
# --voices extended adds these to the training variants (speaker diversity for unseen voices). Left out on
# purpose: near-copies of held-out variants (edward2, anikaRobot) and effects voices (robosoft*, whisper*,
# Demonic, UniRobot, croak).
EXTRA_TRAIN_VARIANTS = [
    "Alicia", "Andrea", "AnxiousAndy", "Denis", "Diogo", "Gene2", "Henrique", "Hugo", "Marco", "Mario", "Michael",
    "Mike", "Nguyen", "RicishayMax", "RicishayMax2", "RicishayMax3", "Storm", "Tweaky", "adam", "announcer",
    "antonio", "aunty", "benjamin", "boris", "caleb", "ed", "fast", "grandma", "grandpa", "gustave", "iven",
    "iven2", "iven3", "iven4", "kaukovalta", "klatt4", "klatt5", "klatt6", "marcelo", "michel", "miguel", "pablo",
    "pedro", "quincy", "rob", "robert", "sandro", "shelby", "steph", "steph2", "steph3", "travis", "victor", "zac",
]
TEST_VARIANTS = ["m7", "f5", "john", "linda", "klatt3"]
UNSEEN_BASES = ["en-029", "en-gb-x-gbcwmd"]
UNSEEN_VARIANTS = ["m8", "edward", "david", "anika", "norbert", "belinda"]

SPLITS = {
    # name: (sentence seed offset, bases, variants, keep audio)
    "train": (0, TRAIN_BASES, TRAIN_VARIANTS, False),
    "test": (1, TRAIN_BASES, TEST_VARIANTS, True),
    "unseen": (2, UNSEEN_BASES, UNSEEN_VARIANTS, True),
}
SHARD_SIZE = 250


def voice_name(base: str, variant: str) -> str:
    return f"{base}+{variant}" if variant else base


def synthesize(text: str, voice: str, speed: int, pitch: int, gap: int) -> np.ndarray:
    """espeak-ng WAV on stdout -> sox -> 16 kHz mono float32."""
    espeak = subprocess.run(
        ["espeak-ng", "--stdout", "-v", voice, "-s", str(speed), "-p", str(pitch), "-g", str(gap), text],
        check=True, capture_output=True,
    )
    sox = subprocess.run(
        # -R: repeatable dither (sox otherwise seeds its dither from the clock)
        ["sox", "-R", "-t", "wav", "-", "-t", "raw", "-r", str(SAMPLE_RATE), "-c", "1", "-b", "16", "-e", "signed",
         "-"],
        input=espeak.stdout, check=True, capture_output=True,
    )
    return np.frombuffer(sox.stdout, dtype="<i2").astype(np.float32) / 32768.0


def noise(rng: np.random.Generator, n: int, kind: str) -> np.ndarray:
    white = rng.standard_normal(n).astype(np.float32)
    if kind == "white":
        return white
    # pink: shape the white spectrum by 1/sqrt(f)
    spec = np.fft.rfft(white)
    freqs = np.arange(len(spec), dtype=np.float64)
    freqs[0] = 1.0
    return np.fft.irfft(spec / np.sqrt(freqs), n).astype(np.float32)


def render_clip(job: dict) -> tuple[dict, np.ndarray]:
    rng = np.random.default_rng(job["seed"])
    speech = synthesize(job["text"], job["voice"], job["speed"], job["pitch"], job["gap"])
    peak = float(np.max(np.abs(speech))) or 1.0
    speech = speech / peak * job["gain"]
    lead = np.zeros(int(job["pad_lead"] * SAMPLE_RATE), np.float32)
    tail = np.zeros(int(job["pad_tail"] * SAMPLE_RATE), np.float32)
    audio = np.concatenate([lead, speech, tail])
    if job["noise"] != "none":
        speech_rms = float(np.sqrt(np.mean(speech**2))) + 1e-9
        n = noise(rng, len(audio), job["noise"])
        n *= speech_rms / (float(np.sqrt(np.mean(n**2))) + 1e-9) / (10 ** (job["snr_db"] / 20))
        audio = audio + n
    audio = np.clip(audio, -1.0, 1.0)
    return job, (audio * 32767).astype(np.int16)


def plan_jobs(split: str, count: int, seed: int, exclude: set[str], offset_shift: int = 0,
              extra_variants: tuple[str, ...] = ()) -> list[dict]:
    offset, bases, variants, _ = SPLITS[split]
    offset += offset_shift
    variants = [*variants, *extra_variants]
    texts = make_sentences(seed * 1000 + offset, count, exclude)
    rng = random.Random(seed * 7919 + offset)
    jobs = []
    for i, text in enumerate(texts):
        noisy = rng.random() < 0.8
        jobs.append({
            "index": i,
            "text": text,
            "voice": voice_name(rng.choice(bases), rng.choice(variants)),
            "speed": rng.randint(130, 200),
            "pitch": rng.randint(30, 70),
            "gap": rng.choice([0, 0, 0, 1, 2]),
            "gain": round(rng.uniform(0.15, 0.95), 3),
            "pad_lead": round(rng.uniform(0.05, 0.8), 3),
            "pad_tail": round(rng.uniform(0.05, 0.8), 3),
            "noise": rng.choice(["white", "pink"]) if noisy else "none",
            "snr_db": round(rng.uniform(15, 40), 1) if noisy else None,
            "seed": seed * 1_000_003 + offset * 100_000 + i,
        })
    return jobs


_EXTRACTOR = None


def features_of(audio_i16: np.ndarray) -> np.ndarray:
    global _EXTRACTOR  # one extractor per worker process, built lazily
    if _EXTRACTOR is None:
        import torch
        from transformers import ParakeetFeatureExtractor

        torch.set_num_threads(1)
        _EXTRACTOR = ParakeetFeatureExtractor(feature_size=128)
    out = _EXTRACTOR(audio_i16.astype(np.float32) / 32768.0, sampling_rate=SAMPLE_RATE, return_tensors="np")
    n = int(out["attention_mask"][0].sum())
    return out["input_features"][0, :n].astype(np.float16)


def work(job: dict) -> tuple[dict, np.ndarray, np.ndarray]:
    job, audio = render_clip(job)
    return job, audio, features_of(audio)


def write_shard(path: Path, results: list, keep_audio: bool) -> None:
    feats = [r[2] for r in results]
    lengths = np.array([len(f) for f in feats], np.int32)
    arrays = {
        "features": np.concatenate(feats),
        "offsets": np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(np.int64),
        "lengths": lengths,
    }
    if keep_audio:
        audios = [r[1] for r in results]
        alen = np.array([len(a) for a in audios], np.int64)
        arrays["audio"] = np.concatenate(audios)
        arrays["audio_offsets"] = np.concatenate([[0], np.cumsum(alen)[:-1]]).astype(np.int64)
        arrays["audio_lengths"] = alen
    np.savez(path, **arrays)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--seed", type=int, default=20240607)
    parser.add_argument("--train", type=int, default=5000)
    parser.add_argument("--test", type=int, default=300)
    parser.add_argument("--unseen", type=int, default=300)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--voices", choices=["base", "extended"], default="base",
                        help="training variants: the base list, or it plus EXTRA_TRAIN_VARIANTS")
    parser.add_argument("--train-offset", type=int, default=0,
                        help="shifts the training split's sentence/voice seed (a second corpus with new sentences)")
    parser.add_argument("--time-budget-s", type=float, default=600.0,
                        help="stop starting new train shards after this many seconds")
    args = parser.parse_args()

    start = time.monotonic()
    # held-out sentences first, so the training split can exclude them
    test_jobs = plan_jobs("test", args.test, args.seed, set())
    unseen_jobs = plan_jobs("unseen", args.unseen, args.seed, {j["text"] for j in test_jobs})
    held_out = {j["text"] for j in test_jobs + unseen_jobs}
    extra = tuple(EXTRA_TRAIN_VARIANTS) if args.voices == "extended" else ()
    assert not set(extra) & set(TEST_VARIANTS + UNSEEN_VARIANTS)
    train_jobs = plan_jobs("train", args.train, args.seed, held_out, 10 * args.train_offset, extra)
    plans = [("test", test_jobs), ("unseen", unseen_jobs), ("train", train_jobs)]

    with mp.Pool(args.workers) as pool:
        for split, jobs in plans:
            keep_audio = SPLITS[split][3]
            split_dir = args.out / split
            split_dir.mkdir(parents=True, exist_ok=True)
            with open(split_dir / "meta.jsonl", "w") as meta:
                for shard, first in enumerate(range(0, len(jobs), SHARD_SIZE)):
                    if split == "train" and time.monotonic() - start > args.time_budget_s:
                        print(f"time budget reached: {first} train clips", flush=True)
                        break
                    results = pool.map(work, jobs[first:first + SHARD_SIZE], chunksize=8)
                    write_shard(split_dir / f"shard_{shard:03d}.npz", results, keep_audio)
                    for job, audio, feats in results:
                        meta.write(json.dumps({**job, "shard": shard, "seconds": len(audio) / SAMPLE_RATE,
                                               "frames": len(feats)}) + "\n")
                    meta.flush()
                    hours = sum(len(r[1]) for r in results) / SAMPLE_RATE / 3600
                    print(f"{split} shard {shard}: {len(results)} clips {hours:.3f} h "
                          f"t={time.monotonic() - start:.0f}s", flush=True)


if __name__ == "__main__":
    main()
