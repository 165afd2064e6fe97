"""Benchmark: Parakeet-TDT live paths at the full v3 size (random weights; speed does not depend on values).

* Buffered streaming (stock): the stream is fed its preferred chunk (one center) at a time; reported are
  the real-time factor (wall seconds per audio second: below 1 keeps up, below 0.5 with 2x headroom) and
  the median latency of one update (a push that settles a window: encoder pass + decode + events), for the
  default profile 2/10/2 s and shorter ones (center/left/right); text appears center + right context
  + one update after it was spoken.
* Phonon-2 rolling policy: the cost of one snapshot update 5 s and 25 s into an unbroken phrase, timed as
  the push of a real ``RollingStream`` that runs it (updates come every 500 ms while a phrase is open), with
  the reference's whole-phrase re-decode (``snapshot_window_sec=0``) and with bounded 4 s snapshots (the
  default).

Weight types are interleaved round by round (the machine is shared and noisy) and medians are reported.
The random checkpoint (numpy, no torch needed) is written once to the user cache dir (2.5 GB f32):

    .venv/bin/python tests/bench/bench_parakeet_stream.py --rounds 3 --types q8_0,f16,int8/int8 --seconds 20

Greedy decoding of random weights emits about one token per step, more than real speech does, so the
decode share of each figure is pessimistic; the encoder share is what real weights cost.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
SR = 16000
V3_VOCAB = 8193
PROFILES = {  # center / left / right seconds
    "default 2/10/2": (2.0, 10.0, 2.0),
    "1/4/1": (1.0, 4.0, 1.0),
    "low-latency 1/2/1": (1.0, 2.0, 1.0),
    "2/4/1": (2.0, 4.0, 1.0),
}


def cache_dir() -> Path:
    from inference.paths import AppPaths

    return AppPaths.from_environment().cache / "bench" / "parakeet-tdt-0.6b-v3-random-numpy"


def v3_tensors(rng: np.random.Generator) -> dict[str, np.ndarray]:
    """Every tensor of the v3 checkpoint (docs/families/parakeet_tdt.md §2) with transformers' default init scale."""
    t: dict[str, np.ndarray] = {}

    def normal(*shape: int) -> np.ndarray:
        return (rng.standard_normal(shape, dtype=np.float32) * 0.02).astype(np.float32)

    def zeros(*shape: int) -> np.ndarray:
        return np.zeros(shape, np.float32)

    sub = "encoder.subsampling."
    t[sub + "layers.0.weight"], t[sub + "layers.0.bias"] = normal(256, 1, 3, 3), zeros(256)
    for dw, pw in ((2, 3), (5, 6)):
        t[f"{sub}layers.{dw}.weight"], t[f"{sub}layers.{dw}.bias"] = normal(256, 1, 3, 3), zeros(256)
        t[f"{sub}layers.{pw}.weight"], t[f"{sub}layers.{pw}.bias"] = normal(256, 256, 1, 1), zeros(256)
    t[sub + "linear.weight"], t[sub + "linear.bias"] = normal(1024, 4096), zeros(1024)
    for i in range(24):
        p = f"encoder.layers.{i}."
        for norm in ("norm_feed_forward1", "norm_self_att", "norm_conv", "norm_feed_forward2", "norm_out"):
            t[p + norm + ".weight"], t[p + norm + ".bias"] = np.ones(1024, np.float32), zeros(1024)
        for ff in ("feed_forward1", "feed_forward2"):
            t[p + ff + ".linear1.weight"], t[p + ff + ".linear2.weight"] = (
                normal(4096, 1024),
                normal(1024, 4096),
            )
        for proj in ("q_proj", "k_proj", "v_proj", "o_proj", "relative_k_proj"):
            t[p + "self_attn." + proj + ".weight"] = normal(1024, 1024)
        t[p + "self_attn.bias_u"], t[p + "self_attn.bias_v"] = normal(8, 128), normal(8, 128)
        t[p + "conv.pointwise_conv1.weight"] = normal(2048, 1024, 1)
        t[p + "conv.depthwise_conv.weight"] = normal(1024, 1, 9)
        t[p + "conv.norm.weight"], t[p + "conv.norm.bias"] = np.ones(1024, np.float32), zeros(1024)
        t[p + "conv.norm.running_mean"], t[p + "conv.norm.running_var"] = (
            zeros(1024),
            np.ones(1024, np.float32),
        )
        t[p + "conv.pointwise_conv2.weight"] = normal(1024, 1024, 1)
    t["decoder.embedding.weight"] = normal(V3_VOCAB, 640)
    t["decoder.embedding.weight"][V3_VOCAB - 1] = 0.0  # blank_as_pad
    for layer in (0, 1):
        t[f"decoder.lstm.weight_ih_l{layer}"], t[f"decoder.lstm.weight_hh_l{layer}"] = (
            normal(2560, 640),
            normal(2560, 640),
        )
        t[f"decoder.lstm.bias_ih_l{layer}"], t[f"decoder.lstm.bias_hh_l{layer}"] = zeros(2560), zeros(2560)
    t["decoder.decoder_projector.weight"], t["decoder.decoder_projector.bias"] = normal(640, 640), zeros(640)
    t["encoder_projector.weight"], t["encoder_projector.bias"] = normal(640, 1024), zeros(640)
    t["joint.head.weight"], t["joint.head.bias"] = normal(V3_VOCAB + 5, 640), zeros(V3_VOCAB + 5)
    return t


def ensure_model() -> Path:
    out = cache_dir()
    if (out / "model.safetensors").is_file():
        return out
    from safetensors.numpy import save_file

    sys.path.insert(0, str(ROOT / "tests" / "bench"))
    from bench_parakeet import build_tokenizer_json  # the same placeholder v3 tokenizer as bench_parakeet

    tmp = out.with_name(out.name + ".partial")
    tmp.mkdir(parents=True, exist_ok=True)
    encoder = {
        "hidden_size": 1024,
        "num_hidden_layers": 24,
        "num_attention_heads": 8,
        "intermediate_size": 4096,
        "hidden_act": "silu",
        "attention_bias": False,
        "convolution_bias": False,
        "conv_kernel_size": 9,
        "subsampling_factor": 8,
        "subsampling_conv_channels": 256,
        "subsampling_conv_kernel_size": 3,
        "subsampling_conv_stride": 2,
        "num_mel_bins": 128,
        "max_position_embeddings": 5000,
        "scale_input": False,
    }
    config = {
        "model_type": "parakeet_tdt",
        "vocab_size": V3_VOCAB,
        "blank_token_id": V3_VOCAB - 1,
        "pad_token_id": 2,
        "decoder_hidden_size": 640,
        "num_decoder_layers": 2,
        "max_symbols_per_step": 10,
        "durations": [0, 1, 2, 3, 4],
        "hidden_act": "relu",
        "encoder_config": encoder,
    }
    (tmp / "config.json").write_text(json.dumps(config, indent=2))
    build_tokenizer_json(tmp / "tokenizer.json")
    save_file(v3_tensors(np.random.default_rng(0)), str(tmp / "model.safetensors"))
    tmp.rename(out)
    return out


def phonon_variant(stock: Path) -> Path:
    """The same weights with the Phonon-2 runtime config (token-duration timestamps)."""
    out = stock.with_name(stock.name + "-phonon")
    out.mkdir(exist_ok=True)
    for name in ("model.safetensors", "tokenizer.json"):
        if not (out / name).exists():
            (out / name).symlink_to(stock / name)
    config = json.loads((stock / "config.json").read_text())
    config["audiocpp_word_timestamp_mode"] = "token_duration"
    config["audiocpp_punctuation_token_ids"] = [0, 1, 2]
    (out / "config.json").write_text(json.dumps(config, indent=2))
    return out


def speech(seconds: float) -> np.ndarray:
    sys.path.insert(0, str(ROOT / "tests" / "bench"))
    from bench_parakeet import make_clip

    path = cache_dir().parent / f"speech-{seconds:g}s.npy"
    return np.load(make_clip(seconds, path))


# ----------------------------------------------------------------------------------- measurements


def stream_once(engine, audio: np.ndarray, profile: tuple[float, float, float]) -> tuple[float, list[float]]:  # type: ignore[no-untyped-def]
    """Feeds one center per push; returns total wall seconds and the wall time of each settling push."""
    center, left, right = profile
    # Window sizes are session options; switching them on a loaded engine avoids one load per profile.
    engine.session = dataclasses.replace(
        engine.session, center_sec=center, left_context_sec=left, right_context_sec=right
    )
    stream = engine.open_stream()
    step = int(center * SR)
    updates: list[float] = []
    started = time.perf_counter()
    for start in range(0, audio.size, step):
        t0 = time.perf_counter()
        stream.push(audio[start : start + step])
        if start + step >= int((center + right) * SR):  # from here on every push settles a window
            updates.append(time.perf_counter() - t0)
    stream.finish()
    return time.perf_counter() - started, updates


def voiced_phrase(audio: np.ndarray) -> np.ndarray:
    """The speech with a noise floor at 30 % of its loudest 50 ms block, so that no pause closes the phrase
    (the gate opens at 18 % of the peak): one unbroken phrase, as a fast talker with a noisy room makes."""
    blocks = audio[: audio.size // 800 * 800].reshape(-1, 800)
    peak = float(np.sqrt(np.mean(np.square(blocks, dtype=np.float64), axis=1)).max())
    noise = np.random.default_rng(7).normal(0.0, 1.0, audio.size).astype(np.float32)
    return (audio + 0.3 * peak * noise).astype(np.float32)


def snapshot_updates(
    engine, phrase: np.ndarray, at_seconds: tuple[float, ...], window: float
) -> dict[float, float]:  # type: ignore[no-untyped-def]
    """Streams the phrase through a real ``RollingStream`` in 50 ms pushes and times the snapshot update
    nearest each of ``at_seconds`` (a push that crosses a snapshot point runs the update)."""
    from inference.contract import Delta

    stream = engine.open_stream(snapshot_window_sec=window)
    costs: dict[float, float] = {}
    wanted = {seconds: int(seconds * SR) for seconds in at_seconds}
    for start in range(0, phrase.size, 800):
        due = stream._next_snapshot  # bench-only peek: the phrase length at which the next update runs
        t0 = time.perf_counter()
        events = stream.push(phrase[start : start + 800])
        wall = time.perf_counter() - t0
        if any(isinstance(e, Delta) for e in events):
            raise SystemExit("the bench phrase was committed early: a pause closed it")
        if start + 800 >= due:
            for seconds, samples in wanted.items():
                if abs(start + 800 - samples) <= 4000 and seconds not in costs:
                    costs[seconds] = wall
        if len(costs) == len(wanted):
            break
    stream.cancel()
    return costs


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--types", default="q8_0,f16")
    parser.add_argument("--seconds", type=float, default=20.0, help="audio streamed per profile and round")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument(
        "--parts", default="buffered,phonon", help="which measurements: buffered, phonon or both"
    )
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))
    from tests.bench.machine import parakeet_weight_options, print_machine_header  # header: CPU, flags, load

    print_machine_header(args.threads)
    parts = set(args.parts.split(","))

    from inference.engine import load_engine

    stock = ensure_model()
    phonon = phonon_variant(stock)
    audio = speech(max(args.seconds, 26.0))
    types = args.types.split(",")
    engines = {}
    for kind in types:
        t0 = time.perf_counter()
        options = parakeet_weight_options(kind)  # TYPE/CONV: conv_weight_type too, as in the other benches
        engines[kind] = (
            load_engine(stock, "parakeet_tdt", options, backend="cpu", threads=args.threads),
            load_engine(phonon, "parakeet_tdt", options, backend="cpu", threads=args.threads),
        )
        print(f"loaded {kind} (stock + phonon) in {time.perf_counter() - t0:.1f} s", flush=True)
    rtf: dict[tuple[str, str], list[float]] = {}
    latency: dict[tuple[str, str], list[float]] = {}
    snap: dict[tuple[str, float, float], list[float]] = {}
    phrase = voiced_phrase(audio[: int(26 * SR)])
    clip = audio[: int(args.seconds * SR)]
    for round_no in range(args.rounds):
        for kind in types if round_no % 2 == 0 else list(reversed(types)):  # interleaved, order alternating
            stock_engine, phonon_engine = engines[kind]
            for name, profile in PROFILES.items() if "buffered" in parts else ():
                wall, updates = stream_once(stock_engine, clip, profile)
                rtf.setdefault((kind, name), []).append(wall / (clip.size / SR))
                latency.setdefault((kind, name), []).extend(updates)
            for window in (0.0, 4.0) if "phonon" in parts else ():
                for seconds, cost in snapshot_updates(phonon_engine, phrase, (5.0, 25.0), window).items():
                    snap.setdefault((kind, window, seconds), []).append(cost)
        print(f"round {round_no + 1}/{args.rounds} done", flush=True)
    print(f"\nbuffered streaming, {args.seconds:g} s of speech per run, medians of {args.rounds} rounds")
    print(f"{'type':6} {'profile':20} {'RTF':>6} {'headroom':>9} {'update latency':>15}")
    for (kind, name), values in rtf.items():
        median = statistics.median(values)
        print(
            f"{kind:6} {name:20} {median:6.3f} {1 / median:8.2f}x {statistics.median(latency[(kind, name)]):13.3f} s"
        )
    print(
        "\nPhonon-2 snapshot update through RollingStream (snapshot_window_sec 0 = whole phrase, as the reference)"
    )
    for (kind, window, seconds), values in sorted(snap.items()):
        print(
            f"{kind:6} window {window:3g} s, {seconds:4.0f} s into a phrase: {statistics.median(values) * 1000:7.0f} ms"
        )
    for pair in engines.values():
        for engine in pair:
            engine.close()


if __name__ == "__main__":
    main()
