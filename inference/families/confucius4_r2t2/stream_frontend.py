"""The log-mel frontend of a growing stream, frame-stable and incremental (the math of ``frontend.log_mel``).

NumPy's FFT may round a frame differently when the batch size changes, which would defeat the tower's
bit-identical window cache. So frames are computed in blocks of ``BLOCK`` aligned to the stream start, every block
by the same call shape; final blocks are kept when ``reuse`` is on. The global floor and scaling are applied to
the whole on every call, so the features are the same bits with ``reuse`` on or off.
"""

from __future__ import annotations

import numpy as np

from inference.audio import whisper_mel
from inference.families.confucius4_r2t2.frontend import HOP_LENGTH, MIN_SAMPLES, N_FFT, log_mel

BLOCK = 32  # frames per cached block


def _log10_mel(audio: np.ndarray, first: int, last: int, num_mel_bins: int) -> np.ndarray:
    """(mels, last - first) float64 ``log10(max(mel, 1e-10))`` of frames [first, last) of the centred STFT."""
    n = audio.shape[0]
    index = np.arange(first * HOP_LENGTH - N_FFT // 2, (last - 1) * HOP_LENGTH + N_FFT // 2)
    index = np.where(index < 0, -index, index)  # reflect padding, as np.pad(mode="reflect")
    index = np.where(index >= n, 2 * (n - 1) - index, index)
    return whisper_mel.log10_mel_of_padded(audio[index].astype(np.float64), last - first, num_mel_bins)


class StreamingLogMel:
    """Log-mel of the accumulated audio of one stream (valid frames only, float32, (mels, frames))."""

    def __init__(self, num_mel_bins: int, reuse: bool) -> None:
        self.num_mel_bins = num_mel_bins
        self.reuse = reuse
        self._blocks: list[np.ndarray] = []  # final blocks of log10 mel, float64 (mels, BLOCK)
        self.computed_blocks = 0

    def __call__(self, audio: np.ndarray) -> np.ndarray:
        samples = np.asarray(audio, dtype=np.float32).reshape(-1)
        if samples.shape[0] < MIN_SAMPLES:  # zero-padded to 8000 samples: no frame is final yet
            mel = log_mel(samples, self.num_mel_bins)
            return mel.values[:, : mel.valid_frames]
        frames = samples.shape[0] // HOP_LENGTH
        # Frame t is final once its window [160t - 200, 160t + 200) lies inside the audio.
        final = min(frames, (samples.shape[0] - N_FFT // 2) // HOP_LENGTH + 1)
        blocks = final // BLOCK
        parts = self._blocks[:blocks] if self.reuse else []
        for b in range(len(parts), blocks):
            parts.append(_log10_mel(samples, b * BLOCK, (b + 1) * BLOCK, self.num_mel_bins))
            self.computed_blocks += 1
        if self.reuse:
            self._blocks = parts
        if blocks * BLOCK < frames:
            parts = [*parts, _log10_mel(samples, blocks * BLOCK, frames, self.num_mel_bins)]
        return whisper_mel.scaled(np.concatenate(parts, axis=1) if len(parts) > 1 else parts[0])
