"""Whisper-style log-mel features: the one implementation behind Whisper's and Qwen3-ASR's frontends.

Both follow transformers' ``WhisperFeatureExtractor`` (5.23.0; Qwen3-ASR's extractor is the same math): STFT with
n_fft 400 and hop 160, a **periodic** Hann window, ``center=True`` with reflect padding; power |X|^2; Slaney mel
filters 0-8 kHz with Slaney area normalisation (:mod:`inference.audio.mel`); ``log10(max(mel, 1e-10))``; a floor at
the maximum minus 8; ``(x + 4) / 4``. The STFT gives one frame more than ``samples // hop``; the last is dropped.
Computed in float64 (the reference runs float32 on torch), returned as float32. The callers choose the padding:
Whisper cuts or pads to a 30 s window, Qwen3-ASR pads short input to 8000 samples and the mel axis to its chunks.
"""

from __future__ import annotations

from functools import cache

import numpy as np

from inference.audio.mel import slaney_filterbank
from inference.contract import SAMPLE_RATE

N_FFT = 400
HOP_LENGTH = 160
F_MAX = 8000.0
LOG_FLOOR = 1e-10
DYNAMIC_RANGE = 8.0  # log10 units kept below the maximum


@cache
def periodic_hann(length: int) -> np.ndarray:
    """``torch.hann_window(length)`` (periodic), float64, read-only."""
    window = 0.5 - 0.5 * np.cos(2.0 * np.pi * np.arange(length) / length)
    window.setflags(write=False)
    return window


@cache
def mel_filters(n_mels: int, n_fft: int = N_FFT, sample_rate: int = SAMPLE_RATE) -> np.ndarray:
    """(n_mels, n_fft//2 + 1) filters, as transformers' ``mel_filter_bank(..., norm="slaney", mel_scale="slaney")``;
    C-contiguous and read-only."""
    filters = np.ascontiguousarray(slaney_filterbank(n_fft, n_mels, sample_rate, F_MAX).T)
    filters.setflags(write=False)
    return filters


def log10_mel_of_padded(
    padded: np.ndarray,
    frames: int,
    n_mels: int,
    n_fft: int = N_FFT,
    hop_length: int = HOP_LENGTH,
    sample_rate: int = SAMPLE_RATE,
) -> np.ndarray:
    """float64 (n_mels, frames) ``log10(max(mel, 1e-10))`` of the first ``frames`` STFT frames of ``padded``, a
    float64 signal that already carries its ``n_fft // 2`` samples of centring on each side."""
    windows = np.lib.stride_tricks.sliding_window_view(padded, n_fft)[::hop_length][:frames]
    spectrum = np.fft.rfft(windows * periodic_hann(n_fft), axis=-1)
    power = spectrum.real**2 + spectrum.imag**2  # (frames, bins)
    mel = mel_filters(n_mels, n_fft, sample_rate) @ power.T  # (mels, frames)
    result: np.ndarray = np.log10(np.maximum(mel, LOG_FLOOR))
    return result


def scaled(log10_mel: np.ndarray) -> np.ndarray:
    """float32 features from ``log10`` mel energies: floored at their maximum minus 8, then ``(x + 4) / 4``."""
    floored = np.maximum(log10_mel, log10_mel.max() - DYNAMIC_RANGE)
    return ((floored + 4.0) / 4.0).astype(np.float32)


def log_mel(
    samples: np.ndarray,
    n_mels: int,
    n_fft: int = N_FFT,
    hop_length: int = HOP_LENGTH,
    sample_rate: int = SAMPLE_RATE,
) -> np.ndarray:
    """float32 (n_mels, len(samples) // hop_length) features of float mono samples as they are (no padding to a
    window; the module doc gives every step)."""
    audio = np.asarray(samples, dtype=np.float32).reshape(-1).astype(np.float64)
    frames = audio.shape[0] // hop_length
    padded = np.pad(audio, n_fft // 2, mode="reflect")
    return scaled(log10_mel_of_padded(padded, frames, n_mels, n_fft, hop_length, sample_rate))
