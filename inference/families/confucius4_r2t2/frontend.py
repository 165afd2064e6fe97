"""Whisper-style log-mel frontend for Qwen3-ASR, identical to transformers' ``Qwen3ASRFeatureExtractor``.

The steps are docs/families/confucius4_r2t2.md §2. It follows the reference (docs/reference_parity.md §2.3) where
audio.cpp differs: a **periodic** Hann window (not the symmetric ``/399`` form) and **no peak normalisation**
(samples go in as they are). The mel time axis is right-padded to a multiple of ``2*n_window`` frames with a mask
of the valid ones, as the reference processor does.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

import numpy as np

from inference.audio.mel import slaney_filterbank
from inference.contract import SAMPLE_RATE

N_FFT = 400
HOP_LENGTH = 160
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


def mel_filterbank(num_mel_bins: int = 128, n_fft: int = N_FFT, sample_rate: int = SAMPLE_RATE) -> np.ndarray:
    """Slaney-scale, Slaney-normalised triangular filters, shape (n_fft//2 + 1, num_mel_bins), 0-8000 Hz."""
    return slaney_filterbank(n_fft, num_mel_bins, sample_rate, 8000.0)


@cache
def _periodic_hann(length: int) -> np.ndarray:
    window = 0.5 - 0.5 * np.cos(2.0 * np.pi * np.arange(length) / length)
    window.setflags(write=False)
    return window


def log_mel(samples: np.ndarray, num_mel_bins: int = 128, pad_multiple: int = CHUNK_FRAMES) -> MelFeatures:
    """Features of one utterance of float mono 16 kHz samples (see the module doc for every step)."""
    audio = np.asarray(samples, dtype=np.float32).reshape(-1)
    if audio.shape[0] < MIN_SAMPLES:
        audio = np.pad(audio, (0, MIN_SAMPLES - audio.shape[0]))
    frames = audio.shape[0] // HOP_LENGTH  # STFT gives one more; the reference drops the last frame
    padded = np.pad(audio.astype(np.float64), N_FFT // 2, mode="reflect")
    strided = np.lib.stride_tricks.sliding_window_view(padded, N_FFT)[::HOP_LENGTH][:frames]
    spectrum = np.fft.rfft(strided * _periodic_hann(N_FFT), axis=-1)
    power = spectrum.real**2 + spectrum.imag**2  # (frames, bins)
    mel = mel_filterbank(num_mel_bins).T @ power.T  # (mels, frames)
    log_spec = np.log10(np.maximum(mel, 1e-10))
    log_spec = np.maximum(log_spec, log_spec.max() - 8.0)
    values = ((log_spec + 4.0) / 4.0).astype(np.float32)
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
