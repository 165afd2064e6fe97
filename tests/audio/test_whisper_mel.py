"""The Whisper-style log-mel is one implementation: Whisper's and Qwen3-ASR's frontends give the same bits for the
same 30 s of audio, and the frame count and floor are those both references use (parity: the families' tests)."""

from __future__ import annotations

import numpy as np

from inference.audio import whisper_mel
from inference.families.confucius4_r2t2.frontend import log_mel
from inference.families.whisper_ct2.frontend import FeatureConfig, log_mel_window


def test_both_frontends_give_the_same_features_for_one_window() -> None:
    rng = np.random.default_rng(7)
    window = (0.2 * rng.standard_normal(30 * 16000)).astype(np.float32)
    whisper = log_mel_window(window, FeatureConfig(n_mels=128))
    qwen = log_mel(window, 128)
    assert qwen.valid_frames == whisper.shape[1] == 3000
    np.testing.assert_array_equal(qwen.values[:, : qwen.valid_frames], whisper)


def test_one_frame_per_hop_with_the_last_stft_frame_dropped_and_a_floor_8_below_the_maximum() -> None:
    rng = np.random.default_rng(8)
    audio = rng.standard_normal(16159).astype(np.float32)
    features = whisper_mel.log_mel(audio, 80)
    assert features.shape == (80, 16159 // whisper_mel.HOP_LENGTH) and features.dtype == np.float32
    assert features.max() - features.min() <= whisper_mel.DYNAMIC_RANGE / 4 + 1e-6
