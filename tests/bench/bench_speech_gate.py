"""WER of the demo model's speech-gate candidates against full context, on every held-out split, clean and
with 20 dB noise (and as the corpus rendered them), through the engine's offline path.

    .venv/bin/python tests/bench/bench_speech_gate.py [--clips-per-split 0] [--split unseen] [--json-out F]

Each candidate is the shipped model folder with another ``captioneer_model.json`` (``speech_gate``), run with the
default options; ``full`` is ``audio_chunk_mode=none``, ``default`` the folder as shipped. The clips come from
heldout_speech.py (espeak-ng and sox on PATH). Non-speech is measured by bench_false_words.py. A count, not a
speed: load does not change the figures.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from inference.contract import Engine  # noqa: E402
from inference.engine import load_engine  # noqa: E402
from tests.bench.heldout_speech import (  # noqa: E402
    CONDITIONS,
    LONG_CONDITION,
    LONG_GROUP,
    SPLITS,
    HeldOutClip,
    held_out_plans,
    long_recording,
    render,
)
from tests.bench.machine import print_machine_header  # noqa: E402
from tests.text_metrics import word_edits  # noqa: E402

MODEL = Path(__file__).resolve().parents[2] / "resources" / "demo_model"
TRAITS = "captioneer_model.json"
# name -> the speech_gate of the model folder (None: the shipped file) and the request options
CANDIDATES: dict[str, tuple[dict[str, Any] | None, dict[str, Any]]] = {
    "full": (None, {"audio_chunk_mode": "none"}),
    "default": (None, {}),
    "fixed": (None, {"audio_chunk_mode": "fixed"}),  # long-form windows, no gate
    "spans20": ({"method": "spans", "max_span_sec": 20}, {}),  # the gate shipped before issue 39
    "words_m0.5": ({"method": "words", "margin_sec": 0.5}, {}),
    "windows_pad0.5": ({"method": "windows", "padding_sec": 0.5}, {}),
    "windows_pad0.75": ({"method": "windows", "padding_sec": 0.75}, {}),
    "windows_pad1": ({"method": "windows", "padding_sec": 1.0}, {}),
    "windows_pad1_gap1": ({"method": "windows", "padding_sec": 1.0, "merge_gap_sec": 1.0}, {}),  # shipped
}


@contextlib.contextmanager
def model_with_gate(gate: dict[str, Any] | None, work: Path, name: str) -> Iterator[Path]:
    """The shipped model folder, or a copy (symbolic links) whose captioneer_model.json holds ``gate``."""
    if gate is None:
        yield MODEL
        return
    folder = work / name
    folder.mkdir()
    for item in MODEL.iterdir():
        if item.name != TRAITS:
            (folder / item.name).symlink_to(item)
    (folder / TRAITS).write_text(json.dumps({"speech_gate": gate}))
    yield folder


def recordings(clips: list[HeldOutClip], condition: str) -> Iterator[tuple[int, str, np.ndarray]]:
    """(first clip index, reference text, audio) of each recording of a condition."""
    if condition != LONG_CONDITION:
        for clip in clips:
            yield clip.index, clip.text, render(clip, condition)
        return
    for first in range(0, len(clips), LONG_GROUP):
        text, audio = long_recording(clips[first : first + LONG_GROUP])
        yield clips[first].index, text, audio


def normalised(text: str) -> list[str]:
    return text.lower().split()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--clips-per-split", type=int, default=100, help="first N clips of each split; 0 = all"
    )
    parser.add_argument("--split", action="append", choices=SPLITS, help="default: every split")
    parser.add_argument("--condition", action="append", choices=(*CONDITIONS, LONG_CONDITION))
    parser.add_argument("--candidate", action="append", choices=sorted(CANDIDATES))
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--json-out", type=Path, help="every clip's hypotheses")
    args = parser.parse_args()
    splits = args.split or list(SPLITS)
    conditions = args.condition or [*CONDITIONS, LONG_CONDITION]
    names = args.candidate or list(CANDIDATES)
    print_machine_header(threads=args.threads)
    plans = held_out_plans()
    errors = {(s, c, n): 0 for s in splits for c in conditions for n in names}
    words = {(s, c): 0 for s in splits for c in conditions}
    records: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as work, contextlib.ExitStack() as stack:
        engines: dict[str, tuple[Engine, dict[str, Any]]] = {}
        for name in names:
            gate, options = CANDIDATES[name]
            folder = stack.enter_context(model_with_gate(gate, Path(work), name))
            engines[name] = (stack.enter_context(load_engine(folder, threads=args.threads)), options)  # type: ignore[arg-type]
        for split in splits:
            clips = plans[split][: args.clips_per_split or None]
            for condition in conditions:
                for item in recordings(clips, condition):
                    index, text, audio = item
                    reference = normalised(text)
                    words[split, condition] += len(reference)
                    record: dict[str, Any] = {"split": split, "condition": condition, "index": index}
                    for name, (engine, options) in engines.items():
                        text = engine.transcribe(audio, **options).text
                        errors[split, condition, name] += word_edits(" ".join(reference), text.lower())
                        record[name] = text
                    records.append(record)
                print(
                    f"{split:16s} {condition:8s} {len(clips):4d} clips "
                    + " ".join(
                        f"{n} {100 * errors[split, condition, n] / words[split, condition]:.2f}"
                        for n in names
                    ),
                    flush=True,
                )
    print("\n| split | condition | words | " + " | ".join(names) + " |")
    print("|---|---|---|" + "---|" * len(names))
    for split in splits:
        for condition in conditions:
            total = words[split, condition]
            cells = " | ".join(f"{100 * errors[split, condition, n] / total:.2f} %" for n in names)
            print(f"| {split} | {condition} | {total} | {cells} |")
    if args.json_out:
        args.json_out.write_text(json.dumps(records, indent=0) + "\n")


if __name__ == "__main__":
    main()
