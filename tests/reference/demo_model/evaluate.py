"""Word error rate of the demo model on the held-out synthetic speech, with torch or Captioneer's engine.

Sources of clips (one of):
* --data DIR --split SPLIT [--split SPLIT ...]   the make_data.py corpus (audio kept for the held-out splits
                                                 test, test_structures, unseen, unseen_fresh)
* --fixtures DIR                                 tests/fixtures/demo_model (manifest.json + WAVs)

Per split it reports the WER overall, for clips of training structures and of held-out structures
(TEST_STRUCTURES), per base voice, and with --known-words FILE also for the clips whose every reference word is in FILE
(e.g. an older model's vocabulary, for a like-for-like baseline). --compare-with A.json checks that this
run's hypotheses (text and token ids) equal another run's, e.g. Captioneer's engine against torch greedy.

Engines:
* torch       transformers 5.23 ParakeetForTDT greedy `generate()`, one clip at a time (batched
              generation is buggy for Parakeet, docs/reference_parity.md §1.5). Needs the reference venv (.venv-ref).
* captioneer  `inference.engine.load_engine(model).transcribe(audio)`. Needs the dev venv.

    .venv-ref/bin/python tests/reference/demo_model/evaluate.py --engine torch --model resources/demo_model \
        --data $DEMO_WORK/data4 --split test --split test_structures --split unseen --json-out torch.json
    .venv/bin/python tests/reference/demo_model/evaluate.py --engine captioneer --model resources/demo_model \
        --data $DEMO_WORK/data4 --split test --split test_structures --split unseen --compare-with torch.json
    (add --session-option weight_type=int8 --session-option conv_weight_type=int8 for a storage type's WER)
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import wave
from collections.abc import Callable
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from wer import corpus_wer  # noqa: E402

Transcriber = Callable[[np.ndarray], tuple[str, list[int]]]


def read_wav(path: Path) -> np.ndarray:
    with wave.open(str(path), "rb") as wav:
        if wav.getframerate() != 16000 or wav.getnchannels() != 1 or wav.getsampwidth() != 2:
            raise ValueError(f"{path} must be 16 kHz mono 16-bit PCM")
        return np.frombuffer(wav.readframes(wav.getnframes()), dtype="<i2").astype(np.float32) / 32768.0


def torch_transcriber(model_dir: Path, threads: int) -> Transcriber:
    import torch
    from transformers import ParakeetForTDT, ParakeetProcessor

    torch.set_num_threads(threads)
    processor = ParakeetProcessor.from_pretrained(model_dir)
    model = ParakeetForTDT.from_pretrained(model_dir).eval()
    blank, pad = model.config.blank_token_id, model.config.pad_token_id

    def transcribe(audio: np.ndarray) -> tuple[str, list[int]]:
        inputs = processor(audio, sampling_rate=16000, return_tensors="pt")
        with torch.no_grad():
            output = model.generate(
                input_features=inputs["input_features"], attention_mask=inputs["attention_mask"]
            )
        sequence = output.sequences[0].tolist()
        text = processor.decode(sequence, skip_special_tokens=True)
        return text, [t for t in sequence if t not in (blank, pad)]

    return transcribe


def captioneer_transcriber(
    model_dir: Path, threads: int, session_options: dict[str, str] | None = None
) -> Transcriber:
    from inference.engine import load_engine

    engine = load_engine(model_dir, session_options=session_options or {}, threads=threads)

    def transcribe(audio: np.ndarray) -> tuple[str, list[int]]:
        transcript = engine.transcribe(audio)
        return transcript.text, list(transcript.token_ids)

    return transcribe


def corpus_clips(data_dir: Path, split: str, limit: int | None) -> list[dict]:
    from corpus import load_split

    clips = load_split(data_dir, split)[:limit]
    return [
        {
            "id": f"{split}_{c.meta['index']:04d}",
            "split": split,
            "text": c.text,
            "voice": c.voice,
            "structure": c.meta.get("structure"),
            "audio": c.audio.astype(np.float32) / 32768.0,
        }
        for c in clips
    ]


def fixture_clips(fixtures_dir: Path) -> list[dict]:
    manifest = json.loads((fixtures_dir / "manifest.json").read_text())
    return [{**entry, "audio": read_wav(fixtures_dir / entry["wav"])} for entry in manifest["clips"]]


def evaluate(transcribe: Transcriber, clips: list[dict]) -> dict:
    results = []
    start = time.monotonic()
    for clip in clips:
        text, token_ids = transcribe(clip["audio"])
        results.append(
            {
                "id": clip["id"],
                "split": clip.get("split"),
                "voice": clip.get("voice"),
                "structure": clip.get("structure"),
                "reference": clip["text"],
                "hypothesis": text,
                "token_ids": token_ids,
            }
        )
    return {
        "clips": len(results),
        "wer": corpus_wer([(r["reference"], r["hypothesis"]) for r in results]),
        "seconds": round(time.monotonic() - start, 1),
        "results": results,
    }


def breakdown(results: list[dict], known_words: set[str] | None) -> dict[str, dict]:
    """WER per split, and within it for training vs held-out structures (and known-word clips)."""
    from sentences import TEST_STRUCTURES

    groups: dict[str, list[dict]] = {}
    for r in results:
        split = r.get("split") or "fixtures"
        keys = [split]
        if r.get("structure"):
            keys.append(f"{split}/{'held_out' if r['structure'] in TEST_STRUCTURES else 'train'}_structures")
        if known_words is not None and set(r["reference"].split()) <= known_words:
            keys.append(f"{split}/known_words")
        if r.get("voice"):
            keys.append(f"{split}/voice:{r['voice'].split('+')[0]}")
        for key in keys:
            groups.setdefault(key, []).append(r)
    return {
        key: {
            "clips": len(rs),
            "wer": corpus_wer([(r["reference"], r["hypothesis"]) for r in rs]),
            "clips_with_errors": sum(r["reference"].split() != r["hypothesis"].split() for r in rs),
        }
        for key, rs in sorted(groups.items())
    }


def compare(results: list[dict], other_path: Path) -> list[str]:
    """Ids whose text or token ids differ from another run's JSON report (or are missing from it)."""
    other = {r["id"]: r for r in json.loads(other_path.read_text())["results"]}
    return [
        r["id"]
        for r in results
        if r["id"] not in other
        or other[r["id"]]["hypothesis"] != r["hypothesis"]
        or other[r["id"]]["token_ids"] != r["token_ids"]
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--engine", choices=["torch", "captioneer"], default="torch")
    parser.add_argument("--model", type=Path, required=True)
    parser.add_argument("--data", type=Path)
    parser.add_argument(
        "--split",
        action="append",
        choices=["test", "test_structures", "unseen", "unseen_fresh"],
        help="repeatable; default test",
    )
    parser.add_argument("--fixtures", type=Path)
    parser.add_argument("--limit", type=int, help="at most this many clips per split")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument(
        "--session-option",
        action="append",
        default=[],
        metavar="K=V",
        help="captioneer engine session option, e.g. weight_type=int8 (repeatable)",
    )
    parser.add_argument("--known-words", type=Path, help="a word list, one per line")
    parser.add_argument("--compare-with", type=Path, help="another run's --json-out, to check equal outputs")
    parser.add_argument("--json-out", type=Path, help="write every hypothesis here")
    args = parser.parse_args()
    if (args.data is None) == (args.fixtures is None):
        parser.error("give exactly one of --data or --fixtures")

    if args.fixtures:
        clips = fixture_clips(args.fixtures)
    else:
        clips = [
            clip for split in args.split or ["test"] for clip in corpus_clips(args.data, split, args.limit)
        ]
    options = dict(option.split("=", 1) for option in args.session_option)
    if options and args.engine != "captioneer":
        parser.error("--session-option applies to --engine captioneer")
    if args.engine == "torch":
        transcriber = torch_transcriber(args.model, args.threads)
    else:
        transcriber = captioneer_transcriber(args.model, args.threads, options)
    report = evaluate(transcriber, clips)
    known = set(args.known_words.read_text().split()) if args.known_words else None
    report.update(
        engine=args.engine,
        model=str(args.model),
        session_options=options,
        source=str(args.fixtures or f"{args.data}:{','.join(args.split or ['test'])}"),
        breakdown=breakdown(report["results"], known),
    )
    if args.compare_with:
        report["differs_from_compared"] = compare(report["results"], args.compare_with)
    if args.json_out:
        args.json_out.write_text(json.dumps(report, indent=1) + "\n")
    worst = sorted(report["results"], key=lambda r: r["reference"] == r["hypothesis"])[:5]
    for r in worst:
        print(f"  ref: {r['reference']}\n  hyp: {r['hypothesis']}")
    for key, row in report["breakdown"].items():
        print(
            f"{args.engine} {key}: {row['clips']} clips, WER {100 * row['wer']:.2f} %, "
            f"{row['clips_with_errors']} clips with errors"
        )
    print(
        f"{args.engine} {report['source']}: {report['clips']} clips, WER {100 * report['wer']:.2f} % "
        f"({report['seconds']} s)"
    )
    if args.compare_with:
        print(
            f"outputs differing from {args.compare_with}: {len(report['differs_from_compared'])} "
            f"{report['differs_from_compared'][:10]}"
        )


if __name__ == "__main__":
    main()
