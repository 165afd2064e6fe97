"""Whisper log-mel features in numpy, matching transformers' ``WhisperFeatureExtractor`` (5.23.0).

Steps: zero-pad (or cut) the audio to one 30 s window; STFT n_fft 400, hop 160, periodic Hann window,
``center=True`` with reflect padding; power |X|^2; Slaney mel filters (0-8 kHz, Slaney area normalisation, 80 or
128 bins from ``preprocessor_config.json``); ``log10(max(mel, 1e-10))``; floor at the maximum minus 8; ``(x+4)/4``.
The STFT gives one frame more than ``samples // hop``; the last is dropped, so a window has 3000 frames.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

import numpy as np

from inference.audio.mel import slaney_filterbank

LOG_FLOOR = 1e-10
DYNAMIC_RANGE = 8.0  # log10 units kept below the window's maximum


@dataclass(frozen=True)
class FeatureConfig:
    n_mels: int = 80
    n_fft: int = 400
    hop_length: int = 160
    sampling_rate: int = 16000
    chunk_length_s: int = 30

    @property
    def window_samples(self) -> int:
        return self.chunk_length_s * self.sampling_rate

    @property
    def window_frames(self) -> int:
        return self.window_samples // self.hop_length


@cache
def _periodic_hann(length: int) -> np.ndarray:
    window = 0.5 - 0.5 * np.cos(2.0 * np.pi * np.arange(length) / length)
    window.setflags(write=False)
    return window


@cache
def _mel_filters(n_fft: int, n_mels: int, sampling_rate: int) -> np.ndarray:
    """(n_mels, n_fft//2 + 1) filters, as transformers' ``mel_filter_bank(..., norm="slaney", mel_scale="slaney")``."""
    filters = np.ascontiguousarray(slaney_filterbank(n_fft, n_mels, sampling_rate, 8000.0).T)
    filters.setflags(write=False)
    return filters


def log_mel_window(samples: np.ndarray, config: FeatureConfig) -> np.ndarray:
    """Features of one window (at most 30 s of mono 16 kHz samples): float32 (n_mels, window_frames)."""
    audio = np.asarray(samples, dtype=np.float32).reshape(-1)[: config.window_samples]
    audio = np.pad(audio, (0, config.window_samples - audio.shape[0])).astype(np.float64)
    n_fft, hop = config.n_fft, config.hop_length
    padded = np.pad(audio, n_fft // 2, mode="reflect")
    frames = np.lib.stride_tricks.sliding_window_view(padded, n_fft)[::hop][: config.window_frames]
    spectrum = np.fft.rfft(frames * _periodic_hann(n_fft), axis=-1)
    power = spectrum.real**2 + spectrum.imag**2  # (frames, bins)
    mel = _mel_filters(n_fft, config.n_mels, config.sampling_rate) @ power.T  # (mels, frames)
    log_spec = np.log10(np.maximum(mel, LOG_FLOOR))
    log_spec = np.maximum(log_spec, log_spec.max() - DYNAMIC_RANGE)
    return ((log_spec + 4.0) / 4.0).astype(np.float32)
