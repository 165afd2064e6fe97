"""Whisper's frontend: one 30 s window of log-mel features, matching transformers' ``WhisperFeatureExtractor``.

The audio is zero-padded (or cut) to the window; the features are :mod:`inference.audio.whisper_mel`'s (80 or
128 bins from ``preprocessor_config.json``), 3000 frames a window.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from inference.audio import whisper_mel


@dataclass(frozen=True)
class FeatureConfig:
    n_mels: int = 80
    n_fft: int = whisper_mel.N_FFT
    hop_length: int = whisper_mel.HOP_LENGTH
    sampling_rate: int = 16000
    chunk_length_s: int = 30

    @property
    def window_samples(self) -> int:
        return self.chunk_length_s * self.sampling_rate

    @property
    def window_frames(self) -> int:
        return self.window_samples // self.hop_length


def log_mel_window(samples: np.ndarray, config: FeatureConfig) -> np.ndarray:
    """Features of one window (at most 30 s of mono 16 kHz samples): float32 (n_mels, window_frames)."""
    audio = np.asarray(samples, dtype=np.float32).reshape(-1)[: config.window_samples]
    audio = np.pad(audio, (0, config.window_samples - audio.shape[0]))
    return whisper_mel.log_mel(audio, config.n_mels, config.n_fft, config.hop_length, config.sampling_rate)
