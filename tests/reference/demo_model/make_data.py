"""Synthesise the demo model's English speech corpus with espeak-ng (reproducible from --seed).

Splits (sentences from sentences.py, each tagged with its structure id; voices from voices.py, built only
from combinations espeak-ng renders differently, held-out voices checked to differ from every training voice):
* train:            training structures, training voices (base voice x variant, deduplicated).
* test:             held-out sentences of the training structures, held-out variants on the training bases.
* test_structures:  sentences of TEST_STRUCTURES (never produced for training), held-out variants.
* unseen:           held-out sentences, half of training structures and half of TEST_STRUCTURES, base voices
                    and variants never used in training.
* unseen_fresh:     (only with --unseen-fresh N) as unseen, on voices.FRESH_VARIANTS of the unseen bases.

A second corpus can reuse another one's held-out splits (--held-out-from DIR: none of DIR's sentences, of any
split, is drawn again), use grammar revision 2 for its training split (--grammar 2, sentences.GRAMMARS; held-out
splits always use revision 1) and speak part of its training clips with an accent-like pronunciation profile
(--accent-fraction, accents.py: espeak-ng's phonemes for the text, rewritten, spoken back as `[[...]]` input).

Every clip: espeak-ng (random speed 130..200 wpm, pitch 30..70, word gap), resampled to 16 kHz mono
by sox, random gain, 0.05..0.8 s silence padding each side, and (80 % of clips) white or pink noise
at a random SNR of 15..40 dB. Features come from the reference `ParakeetFeatureExtractor` (128 mels)
and are cached as float16 shards so training never recomputes them.

Output (under --out): <split>/shard_XXX.npz with `features` (concatenated frames x 128, float16),
`offsets`, `lengths`, and for held-out splits `audio` (int16, concatenated) + `audio_offsets`;
<split>/meta.jsonl with one line per clip (text, structure, voice, speed, pitch, snr, ...);
voices.json (the voice sets, the dropped identical renders and every render hash).

Run (nice'd, 2 worker processes; DEMO_WORK is any work directory outside the repository):
    nice -n 15 .venv-ref/bin/python tests/reference/demo_model/make_data.py --out $DEMO_WORK/data4
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
from accents import accent_input  # noqa: E402
from sentences import make_sentences  # noqa: E402
from voices import FRESH_VARIANTS, VoiceSets, build_voice_sets, espeak_render  # noqa: E402

SAMPLE_RATE = 16000
# The bundled samples' sentences (resources/samples): never in a training split.
SAMPLE_TEXTS = {"emma quickly closed the early bottle and sang", "there are twenty hearts in the garden"}
HELD_OUT_SPLITS = ("test", "test_structures", "unseen", "unseen_fresh")
SHARD_SIZE = 250


def synthesize(text: str, voice: str, speed: int, pitch: int, gap: int) -> np.ndarray:
    """espeak-ng WAV on stdout -> sox -> 16 kHz mono float32."""
    espeak = subprocess.run(
        ["espeak-ng", "--stdout", "-v", voice, "-s", str(speed), "-p", str(pitch), "-g", str(gap), text],
        check=True,
        capture_output=True,
    )
    sox = subprocess.run(
        # -R: repeatable dither (sox otherwise seeds its dither from the clock)
        [
            "sox",
            "-R",
            "-t",
            "wav",
            "-",
            "-t",
            "raw",
            "-r",
            str(SAMPLE_RATE),
            "-c",
            "1",
            "-b",
            "16",
            "-e",
            "signed",
            "-",
        ],
        input=espeak.stdout,
        check=True,
        capture_output=True,
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
    if job.get("accent_feature_prob"):
        # its own seeded stream, so the clip's other draws (noise) do not depend on the accent's
        job["espeak_input"], job["accent_features"] = accent_input(
            job["text"], job["voice"], random.Random(job["seed"]), job["accent_feature_prob"]
        )
    speech = synthesize(
        job.get("espeak_input", job["text"]), job["voice"], job["speed"], job["pitch"], job["gap"]
    )
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


def split_voices(split: str, voices: VoiceSets) -> list[str]:
    return {
        "train": voices.train,
        "test": voices.test,
        "test_structures": voices.test,
        "unseen": voices.unseen,
        "unseen_fresh": voices.fresh,
    }[split]


def split_sentences(
    split: str, count: int, seed: int, exclude: set[str], offset: int, grammar: int = 1
) -> list[tuple[str, str]]:
    """(text, structure) pairs for a split; `offset` separates the splits' random streams; `grammar` is the
    training split's grammar revision (held-out splits use revision 1)."""
    base = seed * 1000 + offset
    if split == "train":
        return make_sentences(base, count, exclude, grammar=grammar)
    if split == "test":
        return make_sentences(base, count, exclude)
    if split == "test_structures":
        return make_sentences(base, count, exclude, held_out=True)
    seen = make_sentences(base, count - count // 2, exclude)
    return seen + make_sentences(base + 500, count // 2, exclude | {t for t, _ in seen}, held_out=True)


SPLIT_OFFSETS = {"train": 0, "test": 1, "unseen": 2, "test_structures": 3, "unseen_fresh": 4}


def plan_jobs(
    split: str,
    count: int,
    seed: int,
    exclude: set[str],
    voices: list[str],
    offset_shift: int = 0,
    grammar: int = 1,
    accent_fraction: float = 0.0,
    accent_feature_prob: float = 0.3,
) -> list[dict]:
    offset = SPLIT_OFFSETS[split] + offset_shift
    texts = split_sentences(split, count, seed, exclude, offset, grammar)
    rng = random.Random(seed * 7919 + offset)
    accent_rng = random.Random(seed * 7927 + offset)  # its own stream: accent_fraction 0 plans as before
    jobs = []
    for i, (text, structure) in enumerate(texts):
        noisy = rng.random() < 0.8
        jobs.append(
            {
                "index": i,
                "text": text,
                "structure": structure,
                "voice": rng.choice(voices),
                "speed": rng.randint(130, 200),
                "pitch": rng.randint(30, 70),
                "gap": rng.choice([0, 0, 0, 1, 2]),
                "gain": round(rng.uniform(0.15, 0.95), 3),
                "pad_lead": round(rng.uniform(0.05, 0.8), 3),
                "pad_tail": round(rng.uniform(0.05, 0.8), 3),
                "noise": rng.choice(["white", "pink"]) if noisy else "none",
                "snr_db": round(rng.uniform(15, 40), 1) if noisy else None,
                "seed": seed * 1_000_003 + offset * 100_000 + i,
            }
        )
        if accent_fraction > 0 and accent_rng.random() < accent_fraction:
            jobs[-1]["accent_feature_prob"] = accent_feature_prob
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
    parser.add_argument("--seed", type=int, default=20261201)
    parser.add_argument("--train", type=int, default=5000)
    parser.add_argument("--test", type=int, default=300)
    parser.add_argument("--test-structures", type=int, default=300)
    parser.add_argument("--unseen", type=int, default=300)
    parser.add_argument(
        "--unseen-fresh",
        type=int,
        default=0,
        help="clips of the unseen_fresh split (FRESH_VARIANTS on the unseen bases)",
    )
    parser.add_argument(
        "--held-out-from",
        type=Path,
        help="an earlier corpus whose held-out splits this one reuses: test, test_structures and "
        "unseen are not generated, and no sentence of that corpus (any split) is drawn again",
    )
    parser.add_argument("--grammar", type=int, default=1, help="grammar revision of the train split")
    parser.add_argument(
        "--accent-fraction",
        type=float,
        default=0.0,
        help="fraction of train clips spoken with an accent-like profile (accents.py)",
    )
    parser.add_argument(
        "--accent-feature-prob",
        type=float,
        default=0.3,
        help="probability of each accent feature in a clip's profile",
    )
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument(
        "--train-offset",
        type=int,
        default=0,
        help="shifts the training split's sentence/voice seed (a second corpus with new sentences)",
    )
    parser.add_argument(
        "--time-budget-s",
        type=float,
        default=1200.0,
        help="stop starting new train shards after this many seconds",
    )
    args = parser.parse_args()

    start = time.monotonic()
    voices = build_voice_sets(espeak_render, fresh_variants=FRESH_VARIANTS if args.unseen_fresh else None)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "voices.json").write_text(json.dumps(voices.__dict__, indent=1) + "\n")
    print(
        f"voices: train {len(voices.train)}, held-out variants {len(voices.test)}, unseen {len(voices.unseen)}, "
        f"fresh unseen {len(voices.fresh)}; dropped {len(voices.dropped)} identical renders",
        flush=True,
    )
    # held-out sentences first, so the training split can exclude them
    held_out = set(SAMPLE_TEXTS)
    counts = {split: getattr(args, split) for split in HELD_OUT_SPLITS}
    if args.held_out_from is not None:
        for meta_path in sorted(args.held_out_from.glob("*/meta.jsonl")):
            held_out |= {json.loads(line)["text"] for line in meta_path.read_text().splitlines() if line}
        counts.update(test=0, test_structures=0, unseen=0)
    plans = []
    for split in HELD_OUT_SPLITS:
        if not counts[split]:
            continue
        jobs = plan_jobs(split, counts[split], args.seed, held_out, split_voices(split, voices))
        held_out |= {j["text"] for j in jobs}
        plans.append((split, jobs))
    plans.append(
        (
            "train",
            plan_jobs(
                "train",
                args.train,
                args.seed,
                held_out,
                voices.train,
                10 * args.train_offset,
                args.grammar,
                args.accent_fraction,
                args.accent_feature_prob,
            ),
        )
    )

    with mp.Pool(args.workers) as pool:
        for split, jobs in plans:
            keep_audio = split in HELD_OUT_SPLITS
            split_dir = args.out / split
            split_dir.mkdir(parents=True, exist_ok=True)
            with open(split_dir / "meta.jsonl", "w") as meta:
                for shard, first in enumerate(range(0, len(jobs), SHARD_SIZE)):
                    if split == "train" and time.monotonic() - start > args.time_budget_s:
                        print(f"time budget reached: {first} train clips", flush=True)
                        break
                    results = pool.map(work, jobs[first : first + SHARD_SIZE], chunksize=8)
                    write_shard(split_dir / f"shard_{shard:03d}.npz", results, keep_audio)
                    for job, audio, feats in results:
                        meta.write(
                            json.dumps(
                                {
                                    **job,
                                    "shard": shard,
                                    "seconds": len(audio) / SAMPLE_RATE,
                                    "frames": len(feats),
                                }
                            )
                            + "\n"
                        )
                    meta.flush()
                    hours = sum(len(r[1]) for r in results) / SAMPLE_RATE / 3600
                    print(
                        f"{split} shard {shard}: {len(results)} clips {hours:.3f} h "
                        f"t={time.monotonic() - start:.0f}s",
                        flush=True,
                    )


if __name__ == "__main__":
    main()
