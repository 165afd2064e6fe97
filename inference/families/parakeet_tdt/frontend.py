"""Parakeet log-mel features in numpy, matching transformers' ``ParakeetFeatureExtractor`` (5.23.0).

Steps (docs/reference_parity.md §1.3): pre-emphasis 0.97; STFT n_fft 512, hop 160, a *symmetric* 400-sample Hann
window centred in the 512 frame, ``center=True`` with zero padding; power |X|^2; 128 Slaney mels (0-8 kHz,
Slaney area normalisation); ``ln(mel + 2^-24)``; per-mel normalisation over the valid frames with the
Bessel-corrected std, ``(x - mean) / (std + 1e-5)``; invalid frames set to 0.

The STFT yields ``1 + N // hop`` frames but only ``N // hop`` are valid: the last frame is always masked.
Where audio.cpp and transformers could differ, this follows transformers (they agree on every step here).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from inference.audio.mel import slaney_filterbank
from inference.families.parakeet_tdt.config import FeatureConfig

LOG_ZERO_GUARD = 2.0**-24
NORM_EPSILON = 1e-5


@dataclass(frozen=True)
class Features:
    values: np.ndarray  # float32 (frames, mels); masked frames are 0
    valid_frames: int  # frames [0, valid_frames) are real; the rest are padding

    @property
    def mask(self) -> np.ndarray:
        return np.arange(self.values.shape[0]) < self.valid_frames


@lru_cache(maxsize=4)
def mel_filterbank(n_fft: int, n_mels: int, sample_rate: int) -> np.ndarray:
    """(n_mels, n_fft//2+1) Slaney filterbank to Nyquist, rounded to float32 before the area normalisation,
    exactly as transformers' ``mel_filter_bank(..., dtype=np.float32)`` does."""
    filters = slaney_filterbank(n_fft, n_mels, sample_rate, sample_rate / 2, float32_before_norm=True)
    return np.ascontiguousarray(filters.T)


@lru_cache(maxsize=4)
def stft_window(n_fft: int, win_length: int) -> np.ndarray:
    """Symmetric Hann (torch ``periodic=False``) zero-padded to n_fft and centred, like torch.stft does."""
    i = np.arange(win_length, dtype=np.float64)
    hann = 0.5 - 0.5 * np.cos(2.0 * np.pi * i / (win_length - 1))
    window = np.zeros(n_fft, dtype=np.float64)
    offset = (n_fft - win_length) // 2
    window[offset : offset + win_length] = hann.astype(np.float32)  # torch builds it in float32
    return window


def num_valid_frames(num_samples: int, hop_length: int) -> int:
    return num_samples // hop_length


def compute_features(audio: np.ndarray, config: FeatureConfig) -> Features:
    """Mono float32 audio at ``config.sampling_rate`` → normalised log-mel features.

    With fewer than two valid frames the reference divides by zero and returns NaN; here the features are
    all zero instead (the decoder then sees silence and emits nothing).
    """
    x = np.asarray(audio, dtype=np.float32).reshape(-1)
    n = x.shape[0]
    hop, n_fft = config.hop_length, config.n_fft
    num_frames = 1 + n // hop
    valid = num_valid_frames(n, hop)
    if valid < 2:
        return Features(np.zeros((num_frames, config.feature_size), np.float32), min(valid, num_frames))

    if config.preemphasis:
        x = np.concatenate([x[:1], x[1:] - np.float32(config.preemphasis) * x[:-1]])
    padded = np.zeros(n + 2 * (n_fft // 2), dtype=np.float32)
    padded[n_fft // 2 : n_fft // 2 + n] = x
    frames = np.lib.stride_tricks.as_strided(
        padded,
        shape=(num_frames, n_fft),
        strides=(padded.strides[0] * hop, padded.strides[0]),
        writeable=False,
    )
    spectrum = np.fft.rfft(frames * stft_window(n_fft, config.win_length).astype(np.float32), axis=1)
    power = np.square(np.sqrt(spectrum.real**2 + spectrum.imag**2))  # torch: sqrt(re²+im²)², float32
    mel = power @ mel_filterbank(n_fft, config.feature_size, config.sampling_rate).T
    logmel = np.log(mel + np.float32(LOG_ZERO_GUARD)).astype(np.float64)

    real = logmel[:valid]
    mean = real.mean(axis=0)
    std = np.sqrt(((real - mean) ** 2).sum(axis=0) / (valid - 1))
    out = (logmel - mean) / (std + NORM_EPSILON)
    out[valid:] = 0.0
    return Features(out.astype(np.float32), valid)
