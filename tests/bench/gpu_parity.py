"""Both engines on a GPU backend against the CPU and the reference fixtures (issue 20, item 5).

For every fixture checkpoint and clip:

* Parakeet-TDT (tiny_a, tiny_b): the encoder output on ``--backend`` against the CPU's (max |difference| over
  max |CPU value|, within ``--encoder-tolerance``), and the full-context greedy token ids against the
  transformers reference stored in the fixtures: identical up to the reference's first joint step with a
  token or duration margin under ``--margin-gate`` (the tiny random models have near-ties of 0.001 in every
  clip, where noise of a GPU's size may choose differently); the rest is reported.
* Confucius4-R2T2 (both layouts, the offline cases): the audio tower's output against the CPU's (same
  tolerance), and greedy ids against the reference where its smallest margin is at least the gate.

Exit status 1 when a check that must hold fails. Run on the CPU alone (``--backend cpu``) it checks itself:
every difference is then 0.

    .venv/bin/python tests/bench/gpu_parity.py --backend cuda
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]


def relative_difference(got: np.ndarray, want: np.ndarray) -> float:
    scale = float(np.max(np.abs(want))) or 1.0
    return float(np.max(np.abs(got.astype(np.float64) - want.astype(np.float64)))) / scale


def report(failures: list[str], name: str, ok: bool, detail: str) -> None:
    print(f"{name}: {detail} {'ok' if ok else 'FAIL'}", flush=True)
    if not ok:
        failures.append(name)


def clear_prefix(steps: dict[str, list], blank: int, gate: float) -> int:
    """How many emitted tokens the reference decoded before its first joint step (blank or not) whose token
    or duration margin is under ``gate``: up to there, noise of a GPU's size cannot change the choice."""
    emitted = 0
    for token, token_margin, duration_margin in zip(
        steps["token"], steps["token_margin"], steps["duration_margin"], strict=True
    ):
        if min(token_margin, duration_margin) < gate:
            break
        emitted += token != blank
    return emitted


def check_parakeet(backend: str, threads: int, tolerance: float, gate: float) -> list[str]:
    sys.path.insert(0, str(REPO / "tests" / "parakeet_tdt"))
    from parakeet_fixtures import CLIPS, MODELS, audio_path, expected, model_dir

    from inference.audio.io import load_audio_file
    from inference.engine import load_engine

    failures = []
    for model in MODELS:
        cpu = load_engine(
            model_dir(model), "parakeet_tdt", {"weight_type": "f32"}, backend="cpu", threads=threads
        )
        gpu = load_engine(
            model_dir(model), "parakeet_tdt", {"weight_type": "f32"}, backend=backend, threads=threads
        )
        reference = expected(model)["clips"]
        for clip in CLIPS:
            audio = load_audio_file(audio_path(clip))
            difference = relative_difference(gpu.encode_frames(audio), cpu.encode_frames(audio))
            ids = gpu.transcribe(audio, audio_chunk_mode="none").token_ids
            want = reference[clip]
            must = clear_prefix(want["steps"], cpu.config.blank_token_id, gate)
            same = ids == want["token_ids"]
            agree = ids[:must] == want["token_ids"][:must]
            detail = (
                f"encoder rel diff {difference:.2e}; ids {'identical' if same else 'differ'} "
                f"({len(want['token_ids'])} tokens, the first {must} decoded with margins >= {gate:g} "
                f"{'agree' if agree else 'DIFFER'})"
            )
            report(failures, f"parakeet {model}/{clip}", difference <= tolerance and agree, detail)
        cpu.close()
        gpu.close()
    return failures


def check_r2t2(backend: str, threads: int, tolerance: float, gate: float) -> list[str]:
    sys.path.insert(0, str(REPO / "tests" / "confucius4_r2t2"))
    from r2t2_fixtures import FIXTURE_DIR, load_audio, load_expected_arrays, load_expected_meta

    from inference.engine import EngineRequest
    from inference.families.confucius4_r2t2.engine import create_engine
    from inference.families.confucius4_r2t2.frontend import log_mel

    meta, arrays, clips = load_expected_meta(), load_expected_arrays(), load_audio()
    failures = []
    # The engine caches its thinker GGUF next to the model: run from copies, never inside the fixtures.
    scratch = Path(tempfile.mkdtemp(prefix="gpu-parity-"))
    for checkpoint, window in meta["checkpoints"].items():
        model = Path(shutil.copytree(FIXTURE_DIR / checkpoint, scratch / checkpoint))
        made = {}
        for name in ("cpu", backend):
            request = EngineRequest(model, "confucius4_r2t2", {"thinker_weight_type": "f32"}, name, threads)
            made[name] = create_engine(request)
        cpu, gpu = made["cpu"], made[backend]
        for case, info in meta["cases"].items():
            if info["window"] != window or info["prefix"] or "span" in info:
                continue
            audio = clips[info["clip"]]
            features = log_mel(audio, cpu.checkpoint.config.audio.num_mel_bins)
            mel = features.values[:, : features.valid_frames]
            difference = relative_difference(gpu.tower.encode(mel), cpu.tower.encode(mel))
            options = {k: info[k] for k in ("language", "context") if info[k]}
            ids = gpu.transcribe(audio, max_tokens=20, **options).token_ids
            want = [
                i for i in arrays[f"case/{case}/generated_ids"].tolist() if i not in meta["eos_token_ids"]
            ]
            same = ids == want
            must = info["min_margin"] >= gate
            detail = (
                f"tower rel diff {difference:.2e}, ids {'identical' if same else 'DIFFER'} (reference "
                f"margin {info['min_margin']:.3f}{'' if must else ', a near-tie'})"
            )
            report(
                failures, f"r2t2 {checkpoint}/{case}", difference <= tolerance and (same or not must), detail
            )
        cpu.close()
        gpu.close()
    shutil.rmtree(scratch, ignore_errors=True)
    return failures


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--backend", default="cuda", help="the backend to check against the CPU (cuda, vulkan, metal)"
    )
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument(
        "--encoder-tolerance",
        type=float,
        default=1e-2,
        help="max |GPU - CPU| over max |CPU| of encoder/tower outputs (GPU GEMMs may round through TF32/f16)",
    )
    parser.add_argument(
        "--margin-gate",
        type=float,
        default=0.05,
        help="reference decisions with margins at least this large must be the same",
    )
    args = parser.parse_args()
    sys.path.insert(0, str(REPO))
    from inference.native import describe

    print(describe())
    failures = check_parakeet(args.backend, args.threads, args.encoder_tolerance, args.margin_gate)
    failures += check_r2t2(args.backend, args.threads, args.encoder_tolerance, args.margin_gate)
    print(f"\n{len(failures)} failed" + (": " + ", ".join(failures) if failures else ""))
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
