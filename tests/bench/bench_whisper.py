"""Benchmark: Captioneer's whisper_ct2 family vs transformers on torch vs faster-whisper, large-v3-turbo shape.

The model is Whisper large-v3-turbo's architecture (d_model 1280, 32 encoder and 4 decoder layers, 20 heads,
128 mel bins, 51866 tokens) with random weights, built once by transformers in the reference python and
converted by CTranslate2's ``TransformersConverter`` (float32) into a cache folder outside the repository:
``--cache`` or ``$CAPTIONEER_BENCH_WHISPER_DIR`` (default: Captioneer's cache dir ``/bench/whisper-large-v3-turbo-random``).
Captioneer and faster-whisper load the same converted folder with compute_type float32 or int8 (CTranslate2
quantizes on load), so they run the same engine and differ only by frontend and decoding loop.

    .venv/bin/python tests/bench/bench_whisper.py --reference-python REFVENV/bin/python \
        --faster-whisper-python FWVENV/bin/python --rounds 3 --threads 2 --clips 10,60 --types float32,int8

REFVENV: torch==2.13.0 transformers==5.23.0 ctranslate2 threadpoolctl soundfile; FWVENV: faster-whisper threadpoolctl
(the same ctranslate2 version as Captioneer's, checked). Equal work on every side: the ``<|endoftext|>`` embedding
is zero (output projection tied to it), so its logit is always 0 while some other of the 51865 random logits is
positive: no side stops early, and every side decodes exactly ``--tokens`` tokens per 30 s window after the
prompt ``<|startoftranscript|><|en|><|transcribe|><|notimestamps|>`` (language forced, greedy, no
timestamps, no prompt carried between windows). The table's "tokens" column is the count each side returned.

Each side runs in its own worker process (peak RSS per side); rounds are interleaved and medians reported.
Columns: wall seconds, RTF (wall / audio seconds, lower is faster), speed against torch and against faster-whisper
with the same compute type (> 1 is faster) measured in the same run, CPU-seconds per wall-second, peak RSS,
tokens decoded and whether the ids equal the torch reference's (random weights may leave tiny argmax margins, so
a near tie can flip; the count, hence the work, is what must be equal).
"""

from __future__ import annotations

import argparse
import os
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
WINDOW = 30 * SR
CACHE_ENV = "CAPTIONEER_BENCH_WHISPER_DIR"
FW_ENV = "CAPTIONEER_FASTER_WHISPER_PYTHON"
N_LANGUAGES = 100  # large-v3: 99 languages + yue, 51866 tokens
TRANSFORMERS_DIR = "transformers"  # inside the model folder


def cache_dir(option: Path | None) -> Path:
    if option is not None:
        out = option
    elif os.environ.get(CACHE_ENV):
        out = Path(os.environ[CACHE_ENV])
    else:
        from inference.paths import AppPaths

        out = AppPaths.from_environment().cache / "bench" / "whisper-large-v3-turbo-random"
    out = out.resolve()
    if out == ROOT or ROOT in out.parents:
        raise SystemExit(f"the model cache {out} is inside the repository; pass --cache or set {CACHE_ENV}")
    return out


# ----------------------------------------------------------------------------------- model + audio


def ensure_model(out: Path, threads: int, reference: str) -> Path:
    """The converted random checkpoint, created once by the reference python (torch, transformers, ctranslate2)."""
    if not ((out / "model.bin").is_file() and (out / TRANSFORMERS_DIR / "model.safetensors").is_file()):
        subprocess.run(
            [reference, __file__, "--create-model", str(out), "--threads", str(threads)],
            check=True,
            env=machine.thread_env(threads),
        )
    return out


def create_model(out: Path, threads: int) -> None:
    import ctranslate2
    import torch
    from transformers import PreTrainedTokenizerFast, WhisperFeatureExtractor

    from tests.reference.whisper_ct2 import make_fixtures as fixtures

    torch.set_num_threads(threads)
    tokenizer, _trained = fixtures.build_tokenizer(N_LANGUAGES)
    ids = tokenizer.get_vocab()
    model = turbo_model(tokenizer)
    with tempfile.TemporaryDirectory(dir=out.parent if out.parent.exists() else None) as tmp:
        hf_dir = Path(tmp) / "hf"
        model.save_pretrained(hf_dir)
        del model
        WhisperFeatureExtractor(feature_size=128).save_pretrained(hf_dir)
        tokenizer.save(str(hf_dir / "tokenizer.json"))
        PreTrainedTokenizerFast(
            tokenizer_file=str(hf_dir / "tokenizer.json"),
            eos_token="<|endoftext|>",
            bos_token="<|endoftext|>",
        ).save_pretrained(hf_dir)
        converter = ctranslate2.converters.TransformersConverter(
            str(hf_dir), copy_files=["tokenizer.json", "preprocessor_config.json"]
        )
        staged = Path(tmp) / "ct2"
        converter.convert(str(staged), quantization="float32", force=True)
        hf_dir.rename(staged / TRANSFORMERS_DIR)  # the torch side's checkpoint, same weights
        out.parent.mkdir(parents=True, exist_ok=True)
        if out.exists():
            import shutil

            shutil.rmtree(out)
        staged.rename(out)
    print(f"model written to {out} (eot {ids['<|endoftext|>']})")


def turbo_model(tokenizer):  # type: ignore[no-untyped-def]
    import torch
    from transformers import GenerationConfig, WhisperConfig, WhisperForConditionalGeneration
    from transformers.models.whisper.tokenization_whisper import LANGUAGES

    ids = tokenizer.get_vocab()
    eot = ids["<|endoftext|>"]
    config = WhisperConfig(
        vocab_size=51766 + N_LANGUAGES,
        num_mel_bins=128,
        d_model=1280,
        encoder_layers=32,
        decoder_layers=4,
        encoder_attention_heads=20,
        decoder_attention_heads=20,
        encoder_ffn_dim=5120,
        decoder_ffn_dim=5120,
        max_source_positions=1500,
        max_target_positions=448,
        pad_token_id=eot,
        bos_token_id=eot,
        eos_token_id=eot,
        decoder_start_token_id=ids["<|startoftranscript|>"],
        tie_word_embeddings=True,
    )
    torch.manual_seed(0)
    model = WhisperForConditionalGeneration(config).eval()
    with torch.no_grad():
        model.model.decoder.embed_tokens.weight[eot] = (
            0.0  # logit 0: never the argmax, so no side stops early
        )
    languages = list(LANGUAGES)[:N_LANGUAGES]
    model.generation_config = GenerationConfig(
        decoder_start_token_id=ids["<|startoftranscript|>"],
        eos_token_id=eot,
        pad_token_id=eot,
        suppress_tokens=[
            ids["<|startoftranscript|>"],
            *range(ids["<|translate|>"], ids["<|nocaptions|>"] + 1),
        ],
        begin_suppress_tokens=[ids["Ġ"], eot],
        lang_to_id={f"<|{c}|>": ids[f"<|{c}|>"] for c in languages},
        task_to_id={"transcribe": ids["<|transcribe|>"], "translate": ids["<|translate|>"]},
        no_timestamps_token_id=ids["<|notimestamps|>"],
        is_multilingual=True,
        alignment_heads=[[2, 0], [3, 1]],
    )
    return model


def make_clip(seconds: float, folder: Path) -> Path:
    """The bundled speech samples with pauses, repeated to ``seconds`` (tests/bench/clips.py)."""
    path = folder / f"clip-{seconds:g}s.npy"
    if not path.is_file():
        from tests.bench.clips import speech_clip

        np.save(path, speech_clip(seconds).astype(np.float32))
    return path


# ----------------------------------------------------------------------------------- workers


def worker(kind: str, model: Path, threads: int, tokens: int) -> None:
    """Serve clip paths on stdin; answer one JSON line per clip (machine.serve_timed_runs)."""
    side, _, compute_type = kind.partition(":")
    if side == "torch":
        import torch
        from transformers import WhisperFeatureExtractor, WhisperForConditionalGeneration

        effective = machine.pin_torch_threads(threads)
        net = WhisperForConditionalGeneration.from_pretrained(
            model / TRANSFORMERS_DIR, dtype=torch.float32
        ).eval()
        extractor = WhisperFeatureExtractor.from_pretrained(model / TRANSFORMERS_DIR)

        def run(audio: np.ndarray) -> list[int]:
            out: list[int] = []
            for start in range(0, audio.size, WINDOW):  # independent 30 s windows, as the CTranslate2 sides
                features = extractor(audio[start : start + WINDOW], sampling_rate=SR, return_tensors="pt")
                with torch.inference_mode():
                    ids = net.generate(
                        input_features=features.input_features,
                        language="en",
                        task="transcribe",
                        return_timestamps=False,
                        max_new_tokens=tokens,
                        do_sample=False,
                        num_beams=1,
                    )
                sequence = ids[0].tolist() if not hasattr(ids, "sequences") else ids.sequences[0].tolist()
                # transformers 5 returns the new tokens only; older versions put the 4 prompt tokens first
                out += (
                    sequence[4:] if sequence[0] == net.generation_config.decoder_start_token_id else sequence
                )
            return out

    elif side == "faster-whisper":
        import ctranslate2
        from faster_whisper import WhisperModel

        fw = WhisperModel(
            str(model), device="cpu", compute_type=compute_type, cpu_threads=threads, num_workers=1
        )
        effective = ct2_threads(threads, ctranslate2.__version__)

        def run(audio: np.ndarray) -> list[int]:
            segments, _info = fw.transcribe(
                audio,
                language="en",
                task="transcribe",
                beam_size=1,
                temperature=0.0,
                condition_on_previous_text=False,
                without_timestamps=True,
                word_timestamps=False,
                vad_filter=False,
                # CTranslate2 decodes at most max_length // 2 tokens; faster-whisper passes prompt + max_new_tokens.
                max_new_tokens=2 * tokens - 4,
            )
            return [t for segment in segments for t in segment.tokens]

    else:
        import ctranslate2

        from inference.engine import load_engine

        engine = load_engine(
            model, "whisper_ct2", {"compute_type": compute_type}, backend="cpu", threads=threads
        )
        effective = ct2_threads(threads, ctranslate2.__version__)

        def run(audio: np.ndarray) -> list[int]:
            return list(
                engine.transcribe(audio, language="en", task="transcribe", max_new_tokens=tokens).token_ids
            )

    machine.serve_timed_runs(effective, np.load, run)


def ct2_threads(threads: int, version: str) -> dict:
    # CTranslate2 takes intra_threads / cpu_threads as given; its OpenMP pool shows in threadpoolctl's list.
    return {"ct2_intra_threads": threads, "ctranslate2": version, "pools": machine.blas_threads()}


class Worker(machine.WorkerProcess):
    close_timeout_s = 120.0  # a 3 GB model to release

    def __init__(self, kind: str, model: Path, threads: int, tokens: int, python: str) -> None:
        command = [python, __file__, "--worker", kind, "--model", str(model), "--threads", str(threads)]
        self._start(kind, [*command, "--tokens", str(tokens)], threads)


def faster_whisper_python(option: str | None) -> str:
    chosen = option or os.environ.get(FW_ENV)
    if not chosen:
        raise SystemExit(
            f"no python with faster-whisper: python3 -m venv FWVENV && FWVENV/bin/pip install faster-whisper "
            f"threadpoolctl, then pass --faster-whisper-python FWVENV/bin/python or set {FW_ENV}"
        )
    import ctranslate2

    probe = "import ctranslate2, faster_whisper; print(ctranslate2.__version__, faster_whisper.__version__)"
    done = subprocess.run([chosen, "-c", probe], capture_output=True, text=True, timeout=300)
    if done.returncode != 0:
        raise SystemExit(f"faster-whisper is not importable with {chosen}: {done.stderr.strip()[-300:]}")
    theirs, version = done.stdout.split()
    if theirs != ctranslate2.__version__:
        raise SystemExit(
            f"{chosen} has ctranslate2 {theirs}, Captioneer {ctranslate2.__version__}: not the same engine; "
            f"pip install ctranslate2=={ctranslate2.__version__} there"
        )
    print(f"faster-whisper python: {chosen} (faster-whisper {version}, ctranslate2 {theirs})")
    return chosen


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--clips", default="10,60", help="clip lengths in seconds")
    parser.add_argument("--types", default="float32,int8", help="CTranslate2 compute types")
    parser.add_argument(
        "--tokens", type=int, default=100, help="tokens decoded per 30 s window on every side"
    )
    parser.add_argument("--no-torch", action="store_true", help="leave the torch side out")
    parser.add_argument("--cache", type=Path, default=None, help=f"model folder (default ${CACHE_ENV})")
    parser.add_argument(
        "--faster-whisper-python", default=None, help=f"python with faster-whisper (${FW_ENV})"
    )
    machine.add_reference_option(parser)
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--model", help=argparse.SUPPRESS)
    parser.add_argument("--create-model", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(args.worker, Path(args.model), args.threads, args.tokens)
        return
    if args.create_model:
        create_model(args.create_model, args.threads)
        return

    machine.print_machine_header(args.threads)
    reference = machine.reference_python(args.reference_python)
    fw_python = faster_whisper_python(args.faster_whisper_python)
    model = ensure_model(cache_dir(args.cache), args.threads, reference)
    clips = {float(s): make_clip(float(s), model.parent) for s in args.clips.split(",")}
    types = args.types.split(",")
    kinds = ([] if args.no_torch else ["torch"]) + [
        f"{side}:{t}" for t in types for side in ("captioneer", "faster-whisper")
    ]
    pythons = {"torch": reference, "faster-whisper": fw_python, "captioneer": sys.executable}
    starters = {
        kind: partial(Worker, kind, model, args.threads, args.tokens, pythons[kind.partition(":")[0]])
        for kind in kinds
    }
    results = machine.run_workers(starters, clips, args.rounds, args.threads)
    size = (model / "model.bin").stat().st_size
    print(
        f"Whisper large-v3-turbo architecture, random weights ({size / 1e9:.2f} GB float32 model.bin), "
        f"{args.tokens} tokens per 30 s window, {args.threads} threads, {args.rounds} interleaved rounds, medians"
    )
    print(
        f"{'implementation':24} {'clip':>5} {'wall s':>8} {'RTF':>6} {'vs torch':>9} {'vs f-w':>7} "
        f"{'cpu/wall':>8} {'peak RSS':>9} {'tokens':>6} {'ids==torch':>10}"
    )
    for seconds in clips:
        medians = {kind: statistics.median(r["wall"] for r in results[(kind, seconds)]) for kind in kinds}
        ref = results.get(("torch", seconds))
        for kind in kinds:
            runs = results[(kind, seconds)]
            wall = medians[kind]
            side, _, compute_type = kind.partition(":")
            vs_torch = f"{medians['torch'] / wall:8.2f}x" if "torch" in medians else f"{'-':>9}"
            peer = medians.get(f"faster-whisper:{compute_type}")
            vs_fw = f"{peer / wall:6.3f}x" if side == "captioneer" and peer else f"{'-':>7}"
            busy = statistics.median(r["cpu"] / r["wall"] for r in runs)
            same = str(runs[-1]["tokens"] == ref[-1]["tokens"]) if ref else "-"
            print(
                f"{kind:24} {seconds:4.0f}s {wall:8.2f} {wall / seconds:6.3f} {vs_torch} {vs_fw} {busy:8.2f} "
                f"{max(r['peak_rss_mb'] for r in runs):7.0f}MB {len(runs[-1]['tokens']):6d} {same:>10}"
            )


if __name__ == "__main__":
    main()
