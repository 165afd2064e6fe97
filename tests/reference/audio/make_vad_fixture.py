"""Expected Silero VAD probabilities and segments from the silero-vad package's own ONNX wrapper.

Run in the reference venv (torch CPU, `pip install silero-vad==6.2.3 onnxruntime`), with espeak-ng
and sox on PATH:

    .venv-ref/bin/python tests/reference/audio/make_vad_fixture.py

Writes tests/fixtures/audio/silero_vad_expected.npz: the 16 kHz int16 clip (speech, pauses,
noise), per-frame probabilities, and get_speech_timestamps() results for a few parameter sets.
The tests read it without torch and compare against inference/audio/vad.py.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import tempfile
import wave
from pathlib import Path

import numpy as np
import silero_vad
import torch
from silero_vad import get_speech_timestamps, load_silero_vad

REPO = Path(__file__).resolve().parents[3]
OUT = REPO / "tests" / "fixtures" / "audio" / "silero_vad_expected.npz"
MODEL = REPO / "resources" / "vad" / "silero_vad.onnx"
RATE = 16000

# Parameter sets the test replays: (threshold, min_speech_ms, min_silence_ms, speech_pad_ms)
PARAMS = [
    (0.5, 250, 100, 30),
    (0.4, 100, 200, 50),
    (0.6, 250, 500, 250),
]


def speak(text: str, workdir: Path, name: str) -> np.ndarray:
    raw = workdir / f"{name}_raw.wav"
    out = workdir / f"{name}.wav"
    subprocess.run(["espeak-ng", "-v", "en-us", "-s", "160", "-w", str(raw), text], check=True)
    subprocess.run(["sox", str(raw), "-r", str(RATE), "-c", "1", "-b", "16", str(out)], check=True)
    with wave.open(str(out), "rb") as handle:
        return np.frombuffer(handle.readframes(handle.getnframes()), dtype="<i2").astype(np.float32) / 32768.0


def build_clip() -> np.ndarray:
    rng = np.random.default_rng(1234)
    with tempfile.TemporaryDirectory() as tmp:
        first = speak("The quick brown fox jumps over the lazy dog.", Path(tmp), "a")
        second = speak("Captions appear while you speak.", Path(tmp), "b")
        third = speak("Yes.", Path(tmp), "c")
    pause = np.zeros(int(1.2 * RATE), dtype=np.float32)
    short_pause = np.zeros(int(0.15 * RATE), dtype=np.float32)
    clip = np.concatenate([pause[: RATE // 2], first, pause, second, short_pause, third, pause])
    clip = clip * 0.8 + rng.normal(0.0, 0.003, clip.size).astype(np.float32)  # a little room noise
    # Quantise to int16 so the stored clip reproduces the reference input bit for bit.
    return np.clip(np.round(clip * 32768.0), -32768, 32767).astype(np.int16)


def main() -> None:
    pcm = build_clip()
    audio = torch.from_numpy(pcm.astype(np.float32) / 32768.0)
    model = load_silero_vad(onnx=True)  # the package's OnnxWrapper on its own silero_vad.onnx
    package_model = Path(silero_vad.__file__).parent / "data" / "silero_vad.onnx"
    digest = hashlib.sha256(package_model.read_bytes()).hexdigest()
    if digest != hashlib.sha256(MODEL.read_bytes()).hexdigest():
        raise SystemExit(f"{MODEL} differs from the package's model ({digest}); refresh resources/vad first")

    model.reset_states()
    probs = []
    for start in range(0, audio.numel(), 512):
        frame = audio[start : start + 512]
        if frame.numel() < 512:
            frame = torch.nn.functional.pad(frame, (0, 512 - frame.numel()))
        probs.append(model(frame, RATE).item())

    segments = []
    for threshold, min_speech, min_silence, pad in PARAMS:
        found = get_speech_timestamps(
            audio,
            model,
            threshold=threshold,
            sampling_rate=RATE,
            min_speech_duration_ms=min_speech,
            min_silence_duration_ms=min_silence,
            speech_pad_ms=pad,
        )
        segments.append([[int(s["start"]), int(s["end"])] for s in found])

    OUT.parent.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(
        OUT,
        audio_int16=pcm,
        probabilities=np.asarray(probs, dtype=np.float32),
        params=np.asarray(PARAMS, dtype=np.float64),
        segments_json=np.asarray(json.dumps(segments)),
        info=np.asarray(
            json.dumps(
                {
                    "silero_vad": silero_vad.__version__ if hasattr(silero_vad, "__version__") else "6.2.3",
                    "model_sha256": digest,
                    "torch": torch.__version__,
                }
            )
        ),
    )
    print(f"wrote {OUT}: {pcm.size / RATE:.2f} s, {len(probs)} frames, segments {segments}")


if __name__ == "__main__":
    main()
