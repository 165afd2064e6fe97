"""The Slaney mel filterbank both frontends use (Parakeet's NeMo-style and Qwen3-ASR's Whisper-style)."""

from __future__ import annotations

from functools import cache

import numpy as np


def hz_to_mel_slaney(hz: np.ndarray) -> np.ndarray:
    """Slaney's scale: linear below 1 kHz, logarithmic above."""
    hz = np.asarray(hz, dtype=np.float64)
    mel = 3.0 * hz / 200.0
    log_region = hz >= 1000.0
    mel[log_region] = 15.0 + np.log(hz[log_region] / 1000.0) * (27.0 / np.log(6.4))
    return mel


def mel_to_hz_slaney(mel: np.ndarray) -> np.ndarray:
    mel = np.asarray(mel, dtype=np.float64)
    hz = 200.0 * mel / 3.0
    log_region = mel >= 15.0
    hz[log_region] = 1000.0 * np.exp((np.log(6.4) / 27.0) * (mel[log_region] - 15.0))
    return hz


@cache
def slaney_filterbank(
    n_fft: int, n_mels: int, sample_rate: int, f_max: float, float32_before_norm: bool = False
) -> np.ndarray:
    """Triangular filters on the Slaney scale from 0 Hz to ``f_max``, area-normalised; shape (n_fft//2+1, n_mels).

    ``float32_before_norm`` rounds the triangles to float32 before the normalisation, as transformers'
    ``mel_filter_bank(..., dtype=np.float32)`` does for Parakeet; Qwen3-ASR's extractor stays in float64.
    The result is cached and read-only.
    """
    fft_freqs = np.linspace(0.0, sample_rate / 2, n_fft // 2 + 1)
    mel_edges = np.linspace(
        hz_to_mel_slaney(np.array([0.0]))[0], hz_to_mel_slaney(np.array([f_max]))[0], n_mels + 2
    )
    edges_hz = mel_to_hz_slaney(mel_edges)
    widths = np.diff(edges_hz)
    slopes = edges_hz[None, :] - fft_freqs[:, None]
    falling = -slopes[:, :-2] / widths[:-1]
    rising = slopes[:, 2:] / widths[1:]
    filters = np.maximum(0.0, np.minimum(falling, rising))
    if float32_before_norm:
        filters = filters.astype(np.float32)
    filters *= (2.0 / (edges_hz[2 : n_mels + 2] - edges_hz[:n_mels]))[None, :]
    filters.setflags(write=False)
    return filters
