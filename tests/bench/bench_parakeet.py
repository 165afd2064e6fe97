"""Benchmark: Captioneer's Parakeet-TDT engine vs transformers ``ParakeetForTDT`` at the full v3 size.

Both run the same deterministic random weights (speed does not depend on the values) in the exact
Hugging Face layout, cached under the user cache dir. Each implementation lives in its own worker
process (so peak RSS is per implementation); the parent alternates between them round by round
(A/B interleaving: these machines are noisy) and reports medians. The torch side (and the one-time
checkpoint build) runs in the reference python: ``--reference-python`` or ``$CAPTIONEER_REFERENCE_PYTHON``
(a venv with torch 2.13 CPU + transformers 5.23, e.g. ``pip install -e ".[reference]"``).

    .venv/bin/python tests/bench/bench_parakeet.py --reference-python REFVENV/bin/python \
        --rounds 5 --threads 2 --clips 10,60 --types f32,q8_0

Both workers pin their threads (torch.set_num_threads + threadpoolctl + *_NUM_THREADS; ggml's backend
threads) and report what is in effect; the bench stops if a pool differs from ``--threads``. Columns:
wall seconds (median), real-time factor (audio seconds per wall second, higher is faster), speed-up
against the torch reference measured in the same run, CPU-seconds per wall-second of the worker (how
many threads really worked), peak RSS of the worker, and whether the greedy token ids equal the reference's.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from functools import partial
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from tests.bench import machine  # noqa: E402

SR = 16000
V3_VOCAB = 8193  # 8192 SentencePiece pieces + blank


def cache_dir() -> Path:
    from inference.paths import AppPaths

    return AppPaths.from_environment().cache / "bench" / "parakeet-tdt-0.6b-v3-random"


# ----------------------------------------------------------------------------------- model + audio


def build_tokenizer_json(path: Path) -> None:
    """An 8193-entry Metaspace BPE tokenizer in the real file format (pieces are placeholders)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers

    vocab = {"<unk>": 0, "<|nospeech|>": 1, "<pad>": 2}
    letters = "abcdefghijklmnopqrstuvwxyz"
    index = 3
    while index < V3_VOCAB - 1:
        piece = (
            ("▁" if index % 3 == 0 else "") + letters[index % 26] + letters[(index // 26) % 26] + str(index)
        )
        vocab[piece] = index
        index += 1
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[], unk_token="<unk>", byte_fallback=False))
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="always")
    tok.decoder = decoders.Metaspace(replacement="▁", prepend_scheme="always")
    from tokenizers import AddedToken

    tok.add_special_tokens([AddedToken("<blank>", special=True)])
    tok.save(str(path))


def ensure_model(threads: int, reference: str) -> Path:
    """The full-size random checkpoint, created once by the reference python (torch + transformers)."""
    out = cache_dir()
    if not ((out / "model.safetensors").is_file() and (out / "tokenizer.json").is_file()):
        subprocess.run(
            [reference, __file__, "--create-model", str(out), "--threads", str(threads)], check=True
        )
    return out


def create_model(out: Path, threads: int) -> None:
    import torch
    from transformers import GenerationConfig, ParakeetEncoderConfig, ParakeetForTDT, ParakeetTDTConfig

    torch.manual_seed(0)
    torch.set_num_threads(threads)
    encoder = ParakeetEncoderConfig(
        hidden_size=1024,
        num_hidden_layers=24,
        num_attention_heads=8,
        intermediate_size=4096,
        hidden_act="silu",
        attention_bias=False,
        convolution_bias=False,
        conv_kernel_size=9,
        subsampling_factor=8,
        subsampling_conv_channels=256,
        subsampling_conv_kernel_size=3,
        subsampling_conv_stride=2,
        num_mel_bins=128,
        max_position_embeddings=5000,
        scale_input=False,
        dropout=0.0,
        dropout_positions=0.0,
        layerdrop=0.0,
        activation_dropout=0.0,
        attention_dropout=0.0,
    )
    config = ParakeetTDTConfig(
        vocab_size=V3_VOCAB,
        decoder_hidden_size=640,
        num_decoder_layers=2,
        hidden_act="relu",
        max_symbols_per_step=10,
        durations=[0, 1, 2, 3, 4],
        encoder_config=encoder.to_dict(),
        pad_token_id=2,
        blank_token_id=V3_VOCAB - 1,
    )
    model = ParakeetForTDT(config).eval()
    with torch.no_grad():
        model.decoder.embedding.weight[config.blank_token_id].zero_()
    tmp = Path(tempfile.mkdtemp(dir=out.parent if out.parent.exists() else None))
    model.save_pretrained(tmp, safe_serialization=True)
    GenerationConfig(
        decoder_start_token_id=config.blank_token_id,
        suppress_tokens=list(range(V3_VOCAB, V3_VOCAB + 5)),
        pad_token_id=2,
    ).save_pretrained(tmp)
    processor = {
        "feature_extractor": {
            "feature_extractor_type": "ParakeetFeatureExtractor",
            "feature_size": 128,
            "sampling_rate": SR,
            "hop_length": 160,
            "win_length": 400,
            "n_fft": 512,
            "preemphasis": 0.97,
            "padding_value": 0.0,
        },
        "processor_class": "ParakeetProcessor",
        "blank_token": "<blank>",
        "decoder_type": "tdt",
    }
    (tmp / "processor_config.json").write_text(json.dumps(processor, indent=2))
    build_tokenizer_json(tmp / "tokenizer.json")
    out.parent.mkdir(parents=True, exist_ok=True)
    if out.exists():
        import shutil

        shutil.rmtree(out)
    tmp.rename(out)


def make_clip(seconds: float, path: Path) -> Path:
    """English speech from espeak-ng, looped to the requested length (pauses included)."""
    if path.is_file():
        return path
    text = (
        "Captioneer turns speech into text on your own computer. The weather today is calm and clear, "
        "and the meeting starts at ten. Please send the report before Friday afternoon."
    )
    raw = subprocess.run(
        ["espeak-ng", "--stdout", "-v", "en-us", "-s", "160", text], check=True, capture_output=True
    ).stdout
    from inference.audio.decoding import decode_mono_16k
    from inference.audio.io import DEFAULT_FILE_LIMITS

    speech = decode_mono_16k(raw, DEFAULT_FILE_LIMITS, "espeak")
    pause = np.zeros(int(0.6 * SR), np.float32)
    unit = np.concatenate([speech, pause])
    audio = np.tile(unit, int(np.ceil(seconds * SR / unit.size)))[: int(seconds * SR)]
    np.save(path, audio.astype(np.float32))
    return path


# ----------------------------------------------------------------------------------- workers


def worker(kind: str, model: Path, threads: int, backend: str = "cpu") -> None:
    """Serve 'run <clip.npy>' requests on stdin; reply one JSON line per request."""
    if kind == "torch":
        import torch
        from transformers import ParakeetFeatureExtractor, ParakeetForTDT

        effective = machine.pin_torch_threads(threads)
        net = ParakeetForTDT.from_pretrained(model).eval()
        fe = ParakeetFeatureExtractor(feature_size=128, sampling_rate=SR)

        def run(audio: np.ndarray) -> list[int]:
            with torch.inference_mode():
                feats = fe(audio, sampling_rate=SR, return_tensors="pt", return_attention_mask=True)
                out = net.generate(
                    input_features=feats["input_features"], attention_mask=feats["attention_mask"]
                )
            seq = out.sequences[0].tolist() if hasattr(out, "sequences") else out[0].tolist()
            blank = net.config.blank_token_id
            return [t for t in seq[1:] if t != blank]
    else:
        from inference.engine import load_engine

        spec = kind.split(":", 1)[1]
        with machine.gemm_of(spec):
            engine = load_engine(
                model, "parakeet_tdt", machine.parakeet_weight_options(spec), backend=backend, threads=threads
            )
        # ggml's thread count is the backend's; numpy's BLAS (the decoder's projection) is pinned too.
        effective = {
            "ggml_threads": engine.backend.threads,
            "omp_wait_policy": machine.omp_wait_policy(),
            "pools": machine.blas_threads(),
            "f32_gemm": engine.backend.f32_gemm,
        }
        int8 = engine.backend.int8_products
        if (
            int8 is not None
        ):  # weight_type=int8: ONNX Runtime's int8 GEMM, one single-threaded run per ggml thread
            effective["int8_gemm"] = f"onnxruntime {int8.version} (weights in +-{int8.qmax})"

        def run(audio: np.ndarray) -> list[int]:
            return list(engine.transcribe(audio).token_ids)

    machine.serve_timed_runs(effective, np.load, run)


class Worker(machine.WorkerProcess):
    def __init__(self, kind: str, model: Path, threads: int, python: str, backend: str = "cpu") -> None:
        self._start(
            kind,
            [
                python,
                __file__,
                "--worker",
                kind,
                "--model",
                str(model),
                "--threads",
                str(threads),
                "--backend",
                backend,
            ],
            threads,
            # The product's worker lets numpy's OpenBLAS threads sleep after each call (inference/client/connection.py)
            None if kind == "torch" else machine.product_worker_env(),
        )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--clips", default="10,60", help="clip lengths in seconds")
    parser.add_argument(
        "--types",
        default="f32,q8_0",
        help="Captioneer storage types to compare; TYPE/CONV also sets conv_weight_type (q6_k/q6_k); "
        "@ggml or @openblas picks the big f32 products' library (f32@ggml)",
    )
    machine.add_reference_option(parser)
    parser.add_argument(
        "--backend", default="cpu", help="ggml backend of the Captioneer workers (cpu, cuda, vulkan)"
    )
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--model", help=argparse.SUPPRESS)
    parser.add_argument("--create-model", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(args.worker, Path(args.model), args.threads, args.backend)
        return
    if args.create_model:
        create_model(args.create_model, args.threads)
        return

    machine.print_machine_header(args.threads)
    reference = machine.reference_python(args.reference_python)
    model = ensure_model(args.threads, reference)
    weight_bytes = (model / "model.safetensors").stat().st_size
    clips = {
        float(s): make_clip(float(s), cache_dir().parent / f"clip-{s}s.npy") for s in args.clips.split(",")
    }
    kinds = ["torch"] + [f"captioneer:{t}" for t in args.types.split(",")]
    starters = {
        kind: partial(
            Worker, kind, model, args.threads, reference if kind == "torch" else sys.executable, args.backend
        )
        for kind in kinds
    }
    results = machine.run_workers(starters, clips, args.rounds, args.threads)
    print(
        f"Parakeet-TDT 0.6B v3 architecture, random weights ({weight_bytes / 1e9:.2f} GB f32), "
        f"{args.threads} threads, Captioneer on the {args.backend} backend, {args.rounds} interleaved rounds, "
        "medians"
    )
    print(
        f"{'implementation':22} {'clip':>6} {'wall s':>8} {'RTFx':>7} {'vs torch':>9} {'cpu/wall':>8} {'peak RSS':>10} "
        f"{'ids == ref':>10}"
    )
    for seconds in clips:
        ref = results[("torch", seconds)]
        ref_wall = statistics.median(r["wall"] for r in ref)
        for kind in kinds:
            runs = results[(kind, seconds)]
            wall = statistics.median(r["wall"] for r in runs)
            busy = statistics.median(r["cpu"] / r["wall"] for r in runs)
            same = runs[-1]["tokens"] == ref[-1]["tokens"]
            print(
                f"{kind:22} {seconds:5.0f}s {wall:8.3f} {seconds / wall:7.1f} {ref_wall / wall:8.2f}x {busy:8.2f} "
                f"{max(r['peak_rss_mb'] for r in runs):8.0f}MB {str(same):>10}"
            )


if __name__ == "__main__":
    main()
