"""The numpy log-mel against transformers' WhisperFeatureExtractor (features.npz, valid frames + 8 padded)."""

from __future__ import annotations

import numpy as np
import pytest

from inference.families.whisper_ct2.frontend import FeatureConfig, log_mel_window
from tests.whisper_ct2.whisper_fixtures import FIXTURES, clip

# transformers computes in float32 on torch, this in float64: measured max difference 1.7e-5
FEATURE_ATOL = 1e-4


KEYS = sorted(np.load(FIXTURES / "features.npz").files)


@pytest.mark.parametrize("key", KEYS)
def test_features_match_transformers(key: str) -> None:
    model, name = key.split("_", 1)
    n_mels = int(model.removeprefix("model"))
    reference = np.load(FIXTURES / "features.npz")[key]
    features = log_mel_window(clip(name), FeatureConfig(n_mels=n_mels))
    assert features.shape == (n_mels, 3000) and features.dtype == np.float32
    np.testing.assert_allclose(features[:, : reference.shape[1]], reference, atol=FEATURE_ATOL, rtol=0)


def test_a_window_is_padded_or_cut_to_30_seconds_and_128_bins_are_supported() -> None:
    config = FeatureConfig(n_mels=128)
    tone = np.sin(np.arange(40 * 16000) * 0.05).astype(np.float32)
    long = log_mel_window(tone, config)
    assert long.shape == (128, 3000)
    np.testing.assert_array_equal(long, log_mel_window(tone[: 30 * 16000], config))
    short = log_mel_window(tone[:8000], config)
    assert short.shape == (128, 3000)
    # the padding is silence, floored at the window's maximum minus 8 (log10), then scaled
    assert np.allclose(short[:, 100:], short.max() - 2.0, atol=1e-6)
