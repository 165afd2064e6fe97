"""Access to the stored Confucius4-R2T2 / Qwen3-ASR parity fixtures (no torch needed).

The fixtures are written by ``tests/reference/confucius4_r2t2/make_fixtures.py``. Audio is stored as int16
PCM at 16 kHz; the ~35 s clip is not stored but assembled from the stored clips by ``build_long_clip`` with
the recipe saved next to them (the generator calls the same function), which keeps the fixtures small.
"""

from __future__ import annotations

import json
import shutil
from functools import cache
from pathlib import Path

import numpy as np

FIXTURE_DIR = Path(__file__).resolve().parents[1] / "fixtures" / "confucius4_r2t2"
HF_CHECKPOINT = FIXTURE_DIR / "checkpoint_hf"
LEGACY_CHECKPOINT = FIXTURE_DIR / "checkpoint_legacy"
SAMPLE_RATE = 16000


def pcm16_to_float(pcm: np.ndarray) -> np.ndarray:
    """int16 PCM → float32 in [-1, 1) exactly as the generator fed it to the reference."""
    return pcm.astype(np.float32) / np.float32(32768.0)


def build_long_clip(clips: dict[str, np.ndarray], recipe: np.ndarray) -> np.ndarray:
    """Concatenate stored clips: each recipe row is (clip index into ``clip_order``, gain, gap samples after).

    Gains are powers of two or sums of two of them, so the float32 products are exact everywhere.
    """
    order = ["clip_a", "clip_b", "clip_short"]
    pieces: list[np.ndarray] = []
    for index, gain, gap in recipe.tolist():
        pieces.append(pcm16_to_float(clips[order[int(index)]]) * np.float32(gain))
        pieces.append(np.zeros(int(gap), dtype=np.float32))
    return np.concatenate(pieces).astype(np.float32)


@cache
def load_audio() -> dict[str, np.ndarray]:
    """All fixture clips as float32 mono 16 kHz, including the assembled ``clip_long``."""
    with np.load(FIXTURE_DIR / "audio.npz") as data:
        stored = {key: data[key] for key in data.files}
    clips = {key: pcm16_to_float(value) for key, value in stored.items() if key.startswith("clip_")}
    long = build_long_clip(stored, stored["long_recipe"])
    clips["clip_long"] = long[: int(stored["long_samples"])]
    return clips


@cache
def load_expected_arrays() -> dict[str, np.ndarray]:
    with np.load(FIXTURE_DIR / "expected.npz") as data:
        return {key: data[key] for key in data.files}


@cache
def load_expected_meta() -> dict:
    return json.loads((FIXTURE_DIR / "expected.json").read_text(encoding="utf-8"))


def checkpoint_variant(source: Path, destination: Path, n_window_infer: int) -> Path:
    """Copy a fixture checkpoint and set ``n_window_infer`` (the only config difference between variants)."""
    shutil.copytree(source, destination)
    config_path = destination / "config.json"
    config = json.loads(config_path.read_text(encoding="utf-8"))
    audio = config["thinker_config"]["audio_config"] if "thinker_config" in config else config["audio_config"]
    audio["n_window_infer"] = n_window_infer
    config_path.write_text(json.dumps(config, indent=2), encoding="utf-8")
    return destination


def stream_clip(name: str) -> np.ndarray:
    """A fixture clip, or ``quiet_then_loud``: clip_b at 1/4 gain, 0.25 s of silence, then clip_a (~9.1 s).

    The loud part moves the global log-mel floor, so windows encoded during the quiet part must be rebuilt.
    """
    clips = load_audio()
    if name == "quiet_then_loud":
        gap = np.zeros(SAMPLE_RATE // 4, dtype=np.float32)
        return np.concatenate([clips["clip_b"] * np.float32(0.25), gap, clips["clip_a"]]).astype(np.float32)
    return clips[name]


# The fixture models repeat <asr_text> forever once they emit it (its embedding row is the planted chain's
# largest). Scaling that row by an exact power of two makes them write varied text after the tag, which the
# streaming parity fixtures need; the reference generator builds the same variant with this function.
STREAM_TAG_SCALE = 0.25
ASR_TEXT_ID = 336


def stream_variant(source: Path, destination: Path, n_window_infer: int) -> Path:
    """``checkpoint_variant`` with the ``<asr_text>`` embedding row scaled by ``STREAM_TAG_SCALE``.

    The row is patched in place in the safetensors file (float32 or bfloat16; a power-of-two scale is exact in
    both), so the legacy bf16 variant holds exactly the values of the HF one.
    """
    checkpoint_variant(source, destination, n_window_infer)
    path = destination / "model.safetensors"
    data = bytearray(path.read_bytes())
    header_size = int.from_bytes(data[:8], "little")
    header = json.loads(data[8 : 8 + header_size])
    name = next(
        n
        for n in ("model.language_model.embed_tokens.weight", "thinker.model.embed_tokens.weight")
        if n in header
    )
    entry = header[name]
    width = entry["shape"][1]
    itemsize = {"F32": 4, "BF16": 2}[entry["dtype"]]
    begin = 8 + header_size + entry["data_offsets"][0] + ASR_TEXT_ID * width * itemsize
    raw = bytes(data[begin : begin + width * itemsize])
    if itemsize == 4:
        row = np.frombuffer(raw, dtype="<f4") * np.float32(STREAM_TAG_SCALE)
        patched = row.astype("<f4").tobytes()
    else:
        row = (np.frombuffer(raw, dtype="<u2").astype(np.uint32) << 16).view(np.float32) * np.float32(
            STREAM_TAG_SCALE
        )
        bits = row.astype(np.float32).view(np.uint32)
        if np.any(bits & 0xFFFF):
            raise ValueError("the scaled row is not exact in bfloat16")
        patched = (bits >> 16).astype("<u2").tobytes()
    data[begin : begin + len(patched)] = patched
    path.write_bytes(bytes(data))
    return destination
