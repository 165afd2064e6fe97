"""Whisper-style log-mel frontend for Qwen3-ASR, identical to transformers' ``Qwen3ASRFeatureExtractor``.

The steps are docs/families/confucius4_r2t2.md §2, computed by :mod:`inference.audio.whisper_mel`. It follows the
reference (docs/reference_parity.md §2.3) where audio.cpp differs: a **periodic** Hann window (not the symmetric
``/399`` form) and **no peak normalisation** (samples go in as they are). Input shorter than 8000 samples is
zero-padded to 8000; the mel time axis is right-padded to a multiple of ``2*n_window`` frames with a mask of the
valid ones, as the reference processor does.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from inference.audio import whisper_mel

N_FFT = whisper_mel.N_FFT
HOP_LENGTH = whisper_mel.HOP_LENGTH
MIN_SAMPLES = 8000
CHUNK_FRAMES = 100  # 2 * n_window; the audio tower's conv chunk
TOKENS_PER_CHUNK = 13  # tokens a full 100-frame chunk leaves after three stride-2 convolutions


@dataclass(frozen=True)
class MelFeatures:
    values: np.ndarray  # float32 (num_mel_bins, padded_frames), mel-major
    mask: np.ndarray  # int8 (padded_frames,): 1 for valid frames, 0 for the right padding

    @property
    def valid_frames(self) -> int:
        return int(self.mask.sum())


def log_mel(samples: np.ndarray, num_mel_bins: int = 128, pad_multiple: int = CHUNK_FRAMES) -> MelFeatures:
    """Features of one utterance of float mono 16 kHz samples (see the module doc for every step)."""
    audio = np.asarray(samples, dtype=np.float32).reshape(-1)
    if audio.shape[0] < MIN_SAMPLES:
        audio = np.pad(audio, (0, MIN_SAMPLES - audio.shape[0]))
    values = whisper_mel.log_mel(audio, num_mel_bins)
    frames = values.shape[1]
    padding = (-frames) % pad_multiple if pad_multiple > 1 else 0
    values = np.pad(values, ((0, 0), (0, padding)))
    mask = np.concatenate([np.ones(frames, dtype=np.int8), np.zeros(padding, dtype=np.int8)])
    return MelFeatures(values, mask)


def audio_token_count(frames: int) -> int:
    """``tok(T)``: audio-tower output tokens for ``frames`` valid mel frames (docs/families/confucius4_r2t2.md §2).

    Whole 100-frame chunks give 13 tokens each; the remainder goes through three (k3, s2, p1) convolutions.
    Python floor division, exactly as specified (a remainder of 0 contributes ``((-1)//2+1 - 1)//2 + 1 ...``,
    which evaluates to 0 extra tokens).
    """
    leave = frames % CHUNK_FRAMES
    first = (leave - 1) // 2 + 1
    return ((first - 1) // 2 + 1 - 1) // 2 + 1 + TOKENS_PER_CHUNK * (frames // CHUNK_FRAMES)


def chunk_token_count(chunk_frames: int) -> int:
    """Tokens one conv chunk of ``chunk_frames`` (1..100) valid frames keeps: ceil applied three times."""
    length = chunk_frames
    for _ in range(3):
        length = (length - 1) // 2 + 1 if length > 0 else 0
    return length
