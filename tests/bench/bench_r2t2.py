"""Qwen3-ASR-1.7B-shaped speed: Captioneer (ggml tower + libllama thinker) against transformers on torch CPU.

Deterministic random weights (torch seed 0, the model's own initialiser, saved as bf16 so both sides hold the
same values: torch runs them in f32; the ggml tower takes the engine's CPU default — bf16 where the CPU has
AVX512-BF16, else the native bf16 promoted to f32 — and ``--tower-only`` names its types; the thinker is quantized
to q8_0 and q4_k). The tokenizer and small config files come from the HF fixture checkpoint (vocab 151936 > tokenizer size
is allowed). torch lives in a separate reference venv (--reference-python, or $CAPTIONEER_REFERENCE_PYTHON), so it
runs in a worker process fed over a pipe; the two sides take turns (A/B, same thread count, pinned and checked on
both sides: torch.set_num_threads + threadpoolctl in the worker, ggml's and libllama's n_threads here) and the
figures are medians. Speech content does not matter for speed.

    nice -n 10 .venv/bin/python tests/bench/bench_r2t2.py --reference-python REFVENV/bin/python --work /tmp/r2t2-bench [--threads 2] [--reps 3]
    (--tiny builds a small model to check the script itself in a minute)

    --tower-only [--tower-types native,f16,q8_0]: the full-size audio tower with a tiny thinker (cheap to build),
    each tower_weight_type timed against torch in the same interleaved loop.

Figures: audio tower ms per audio second, prefill tokens/s (the 20 s prompt), decode tokens/s, offline RTF
of a 20 s clip (frontend + tower + prefill + ``--tokens`` greedy tokens; eos is improbable with random weights).
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from tests.bench import machine  # noqa: E402

FIXTURE = REPO / "tests" / "fixtures" / "confucius4_r2t2" / "checkpoint_hf"
SIDECARS = ("tokenizer.json", "tokenizer_config.json", "processor_config.json", "chat_template.jinja")
AUDIO_TOKEN, EOS = 335, [332, 330]
FULL = {
    "audio": dict(
        encoder_layers=24,
        encoder_attention_heads=16,
        encoder_ffn_dim=4096,
        d_model=1024,
        downsample_hidden_size=480,
        output_dim=2048,
        n_window_infer=800,
    ),
    "text": dict(
        hidden_size=2048,
        intermediate_size=6144,
        num_hidden_layers=28,
        num_attention_heads=16,
        num_key_value_heads=8,
        head_dim=128,
        vocab_size=151936,
    ),
}
TINY = {
    "audio": dict(
        encoder_layers=2,
        encoder_attention_heads=4,
        encoder_ffn_dim=256,
        d_model=128,
        downsample_hidden_size=32,
        output_dim=256,
        n_window_infer=800,
    ),
    "text": dict(
        hidden_size=256,
        intermediate_size=512,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=64,
        vocab_size=4096,
    ),
}


# ------------------------------------------------------------------------------------ torch worker (refvenv)


def worker_create(directory: Path, shape: dict) -> None:
    import torch
    from transformers import Qwen3ASRConfig, Qwen3ASRForConditionalGeneration

    config = Qwen3ASRConfig(
        audio_config={
            "model_type": "qwen3_asr_encoder",
            "num_mel_bins": 128,
            "activation_function": "gelu",
            "n_window": 50,
            "max_position_embeddings": 13,
            **shape["audio"],
        },
        text_config={
            "model_type": "qwen3",
            "max_position_embeddings": 65536,
            "rms_norm_eps": 1e-6,
            "rope_parameters": {"rope_type": "default", "rope_theta": 1000000.0},
            "tie_word_embeddings": True,
            "hidden_act": "silu",
            **shape["text"],
        },
        audio_token_id=AUDIO_TOKEN,
        pad_token_id=330,
        eos_token_id=EOS,
        tie_word_embeddings=True,
    )
    torch.manual_seed(0)
    model = Qwen3ASRForConditionalGeneration(config).to(torch.bfloat16)
    model.save_pretrained(directory)


def worker_serve(directory: Path, threads: int) -> None:
    import torch
    from transformers import Qwen3ASRFeatureExtractor, Qwen3ASRForConditionalGeneration

    effective = machine.pin_torch_threads(threads)
    model = Qwen3ASRForConditionalGeneration.from_pretrained(directory, dtype=torch.float32).eval()
    extractor = Qwen3ASRFeatureExtractor()
    lm, head = model.model.language_model, model.lm_head
    state: dict = {}
    print(json.dumps({"ready": True, "threads": effective}), flush=True)
    for line in sys.stdin:
        cmd = json.loads(line)
        started = time.perf_counter()
        with torch.inference_mode():
            if cmd["op"] == "tower":
                mel = torch.from_numpy(np.load(cmd["mel"]))[None]
                mask = torch.zeros(1, mel.shape[-1], dtype=torch.long)
                mask[0, : cmd["frames"]] = 1
                model.model.get_audio_features(mel, mask)
            elif cmd["op"] == "prefill":
                rows = torch.from_numpy(np.load(cmd["rows"]))[None]
                out = lm(inputs_embeds=rows, use_cache=True)
                state["past"], state["logits"] = out.past_key_values, head(out.last_hidden_state[:, -1])
                state["pos"] = rows.shape[1]
            elif cmd["op"] == "decode":
                past, logits, pos = state["past"], state["logits"], state["pos"]
                for _ in range(cmd["steps"]):
                    token = logits.argmax(-1, keepdim=True)
                    out = lm(
                        input_ids=token,
                        past_key_values=past,
                        use_cache=True,
                        position_ids=torch.tensor([[pos]]),
                    )
                    past, logits, pos = out.past_key_values, head(out.last_hidden_state[:, -1]), pos + 1
            elif cmd["op"] == "offline":
                audio = np.load(cmd["audio"])
                feats = extractor(
                    audio, sampling_rate=16000, padding=True, return_attention_mask=True, return_tensors="pt"
                )
                ids = torch.from_numpy(np.load(cmd["ids"]).astype(np.int64))[None]
                model.generate(
                    input_ids=ids,
                    attention_mask=torch.ones_like(ids),
                    input_features=feats["input_features"],
                    input_features_mask=feats["attention_mask"],
                    max_new_tokens=cmd["tokens"],
                    min_new_tokens=cmd["tokens"],
                    do_sample=False,
                    eos_token_id=EOS,
                    pad_token_id=330,
                )
        print(json.dumps({"seconds": time.perf_counter() - started}), flush=True)


# ------------------------------------------------------------------------------------ driver (app venv)


class TorchWorker:
    def __init__(self, directory: Path, threads: int, ref_python: str) -> None:
        self.proc = subprocess.Popen(
            [
                ref_python,
                __file__,
                "--torch-worker",
                "serve",
                "--work",
                str(directory),
                "--threads",
                str(threads),
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=machine.thread_env(threads),
        )
        ready = json.loads(self._line())
        print(machine.check_threads("torch", threads, ready["threads"]), flush=True)

    def _line(self) -> str:
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError("the torch worker died (out of memory?)")
        return line

    def run(self, **cmd) -> float:
        self.proc.stdin.write(json.dumps(cmd) + "\n")
        self.proc.stdin.flush()
        return json.loads(self._line())["seconds"]

    def close(self) -> None:
        self.proc.stdin.close()
        self.proc.wait(timeout=60)


def timed(fn) -> float:
    started = time.perf_counter()
    fn()
    return time.perf_counter() - started


def build_model(model_dir: Path, tiny: bool, ref_python: str, tower_only: bool = False) -> None:
    if (model_dir / "config.json").is_file():
        return
    model_dir.mkdir(parents=True, exist_ok=True)
    # tower-only: a one-layer thinker of the full width (the projector's output_dim must equal it)
    small_text = {**TINY["text"], "hidden_size": FULL["text"]["hidden_size"], "num_hidden_layers": 1}
    shape = json.dumps({"audio": FULL["audio"], "text": small_text} if tower_only else TINY if tiny else FULL)
    subprocess.run(
        [ref_python, __file__, "--torch-worker", "create", "--work", str(model_dir), "--shape", shape],
        check=True,
    )
    for name in SIDECARS:
        shutil.copy(FIXTURE / name, model_dir / name)
    (model_dir / "generation_config.json").write_text(
        json.dumps({"eos_token_id": EOS, "pad_token_id": 330, "max_new_tokens": 512}), encoding="utf-8"
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--work", type=Path, default=Path("/tmp/r2t2-bench"))
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument(
        "--backend", default="cpu", help="ggml backend of Captioneer's tower and thinker (cpu, cuda, vulkan)"
    )
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--steps", type=int, default=16, help="decode steps timed")
    parser.add_argument("--tokens", type=int, default=32, help="greedy tokens in the offline run")
    parser.add_argument("--types", default="q8_0,q4_k")
    parser.add_argument("--tiny", action="store_true")
    parser.add_argument("--tower-only", action="store_true")
    parser.add_argument("--tower-types", default="native,f16")
    parser.add_argument("--torch-worker", choices=("create", "serve"))
    parser.add_argument("--shape")
    machine.add_reference_option(parser)
    args = parser.parse_args()
    if args.torch_worker == "create":
        return worker_create(args.work, json.loads(args.shape))
    if args.torch_worker == "serve":
        return worker_serve(args.work, args.threads)
    machine.print_machine_header(args.threads)
    args.ref_python = machine.reference_python(args.reference_python)

    sys.path.insert(0, str(REPO / "tests" / "confucius4_r2t2"))
    from r2t2_fixtures import load_audio

    from inference.engine import EngineRequest
    from inference.families.confucius4_r2t2.engine import create_engine
    from inference.families.confucius4_r2t2.frontend import log_mel
    from inference.families.confucius4_r2t2.prompt import build_prompt
    from inference.families.confucius4_r2t2.thinker import Thinker, ThinkerOptions

    model_dir = args.work / ("model-tower" if args.tower_only else "model-tiny" if args.tiny else "model")
    build_model(model_dir, args.tiny, args.ref_python, args.tower_only)
    clip = np.resize(load_audio()["clip_long"], int(args.seconds * 16000)).astype(np.float32)
    mel = log_mel(clip)
    valid = mel.values[:, : mel.valid_frames]
    np.save(args.work / "mel.npy", mel.values)
    np.save(args.work / "audio.npy", clip)
    if args.tower_only:
        return tower_bench(args, model_dir, valid, mel.valid_frames)

    types = args.types.split(",")
    request = EngineRequest(
        model_dir, "confucius4_r2t2", {"thinker_weight_type": types[0]}, args.backend, args.threads
    )
    engine = create_engine(request)
    thinkers = {types[0]: engine.thinker}
    for kind in types[1:]:  # the same tower serves every thinker
        layers = 0 if args.backend == "cpu" else -1  # every layer on the GPU, as the engine does
        thinkers[kind] = Thinker(
            model_dir, ThinkerOptions(kind, n_ctx=2048, n_threads=args.threads, n_gpu_layers=layers)
        )
    emb = engine.tower.encode(valid)
    ckpt = engine.checkpoint
    prompt = build_prompt(ckpt.tokenizer, ckpt.special.audio, emb.shape[0])
    positions = np.asarray(prompt.audio_positions)
    np.save(args.work / "rows.npy", engine.thinker.input_rows(prompt.ids, emb, positions))
    np.save(args.work / "ids.npy", prompt.ids)
    n_prompt = len(prompt.ids)
    print(f"prompt {n_prompt} positions ({emb.shape[0]} audio), threads {args.threads}", flush=True)
    print(
        f"captioneer: ggml tower threads {engine.tower.backend.threads}, libllama n_threads/n_threads_batch "
        f"{[t.options.n_threads for t in thinkers.values()]}",
        flush=True,
    )

    worker = TorchWorker(model_dir, args.threads, args.ref_python)
    samples: dict[str, list[float]] = {}

    def record(name: str, seconds: float) -> None:
        samples.setdefault(name, []).append(seconds)

    def prefill(thinker: Thinker) -> None:
        thinker.truncate(0)
        thinker.prefill(prompt.ids, emb, positions)

    for thinker in thinkers.values():  # warm-up (graph builds, first-touch of mapped weights)
        prefill(thinker)
        thinker.decode_greedy(2, [])
    engine.tower.encode(valid)
    worker.run(op="tower", mel=str(args.work / "mel.npy"), frames=mel.valid_frames)
    for rep in range(args.reps):
        record("tower/ggml", timed(lambda: engine.tower.encode(valid)))
        record("tower/torch", worker.run(op="tower", mel=str(args.work / "mel.npy"), frames=mel.valid_frames))
        record("prefill/torch", worker.run(op="prefill", rows=str(args.work / "rows.npy")))
        record("decode/torch", worker.run(op="decode", steps=args.steps))
        for kind, thinker in thinkers.items():
            record(f"prefill/{kind}", timed(lambda t=thinker: prefill(t)))
            record(f"decode/{kind}", timed(lambda t=thinker: t.decode_greedy(args.steps, [])))
        record(
            "offline/torch",
            worker.run(
                op="offline",
                audio=str(args.work / "audio.npy"),
                ids=str(args.work / "ids.npy"),
                tokens=args.tokens,
            ),
        )
        for kind, thinker in thinkers.items():
            engine.thinker = thinker
            record(f"offline/{kind}", timed(lambda: engine.transcribe(clip, max_tokens=args.tokens)))
        print(f"rep {rep + 1}/{args.reps} done", flush=True)
    worker.close()

    med = {name: statistics.median(values) for name, values in samples.items()}
    print(json.dumps({k: [round(v, 3) for v in vals] for k, vals in samples.items()}))
    print(f"\n{args.seconds:.0f} s clip, {args.threads} threads, medians of {args.reps} interleaved runs")
    print(
        f"audio tower ms per audio s: ggml({engine.session.tower_weight_type}) "
        f"{1000 * med['tower/ggml'] / args.seconds:.1f}  "
        f"torch(f32) {1000 * med['tower/torch'] / args.seconds:.1f}  "
        f"speed-up {med['tower/torch'] / med['tower/ggml']:.2f}x"
    )
    for kind in thinkers:
        print(
            f"{kind}: prefill {n_prompt / med[f'prefill/{kind}']:.1f} tok/s (torch {n_prompt / med['prefill/torch']:.1f}), "
            f"decode {args.steps / med[f'decode/{kind}']:.2f} tok/s (torch {args.steps / med['decode/torch']:.2f}, "
            f"{med['decode/torch'] / med[f'decode/{kind}']:.2f}x), offline RTF {med[f'offline/{kind}'] / args.seconds:.3f} "
            f"(torch {med['offline/torch'] / args.seconds:.3f})"
        )
    for thinker in thinkers.values():
        thinker.close()
    engine.thinker = None
    engine.close()


def tower_bench(args: argparse.Namespace, model_dir: Path, valid: np.ndarray, frames: int) -> None:
    """Each tower_weight_type against torch f32, interleaved (A/B/...), medians."""
    from inference.families.confucius4_r2t2.audio_tower import AudioTower
    from inference.families.confucius4_r2t2.checkpoint import load_checkpoint
    from inference.native import open_backend

    checkpoint = load_checkpoint(model_dir)
    backend = open_backend(args.backend, threads=args.threads)
    print(
        f"captioneer: ggml tower on {args.backend}, threads {backend.threads}, f32 products on {backend.f32_gemm}",
        flush=True,
    )
    towers = {
        kind: AudioTower(backend, checkpoint.files, checkpoint.config.audio, storage=kind)
        for kind in args.tower_types.split(",")
    }
    worker = TorchWorker(model_dir, args.threads, args.ref_python)
    mel_path = str(args.work / "mel.npy")
    for tower in towers.values():  # warm-up: graph build, first touch of the weights
        tower.encode(valid)
    worker.run(op="tower", mel=mel_path, frames=frames)
    samples: dict[str, list[float]] = {}
    for rep in range(args.reps):
        samples.setdefault("torch", []).append(worker.run(op="tower", mel=mel_path, frames=frames))
        for kind, tower in towers.items():
            samples.setdefault(kind, []).append(timed(lambda t=tower: t.encode(valid)))
        print(
            f"rep {rep + 1}/{args.reps}: " + "  ".join(f"{k} {v[-1]:.3f}s" for k, v in samples.items()),
            flush=True,
        )
    worker.close()
    med = {name: statistics.median(values) for name, values in samples.items()}
    print(f"\n{args.seconds:.0f} s clip, {args.threads} threads, medians of {args.reps} interleaved runs")
    print(f"audio tower ms per audio s: torch(f32) {1000 * med['torch'] / args.seconds:.1f}")
    for kind in towers:
        print(
            f"  ggml {kind:>6}: {1000 * med[kind] / args.seconds:.1f}  speed-up {med['torch'] / med[kind]:.2f}x"
        )
    for tower in towers.values():
        tower.close()
    backend.close()


if __name__ == "__main__":
    main()
