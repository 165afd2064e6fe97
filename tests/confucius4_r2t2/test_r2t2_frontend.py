"""Whisper log-mel frontend against the transformers reference fixtures; tok(T) formula."""

from __future__ import annotations

import numpy as np
import pytest
from r2t2_fixtures import load_audio, load_expected_arrays

from inference.families.confucius4_r2t2.frontend import audio_token_count, chunk_token_count, log_mel

# The reference runs torch float32; we compute in float64. Measured max difference ~3.4e-5.
MEL_TOL = 1e-4
MEL_F16_TOL = 1.5e-3  # clip_long excerpts are stored as float16


@pytest.mark.parametrize("clip", ["clip_tiny", "clip_short", "clip_a", "clip_b"])
def test_mel_matches_reference(clip):
    expected = load_expected_arrays()
    features = log_mel(load_audio()[clip])
    assert features.values.dtype == np.float32
    assert features.values.shape == expected[f"mel/{clip}"].shape
    np.testing.assert_array_equal(features.mask, expected[f"mask/{clip}"])
    np.testing.assert_allclose(features.values, expected[f"mel/{clip}"], atol=MEL_TOL, rtol=0)


def test_long_clip_mel_excerpts_match_reference():
    expected = load_expected_arrays()
    features = log_mel(load_audio()["clip_long"])
    valid = features.valid_frames
    assert valid == 3500 and features.values.shape == (128, 3500)
    np.testing.assert_array_equal(features.mask, expected["mask/clip_long"])
    np.testing.assert_allclose(
        features.values[:, :200], expected["mel_head/clip_long"], atol=MEL_F16_TOL, rtol=0
    )
    np.testing.assert_allclose(
        features.values[:, valid - 200 : valid], expected["mel_tail/clip_long"], atol=MEL_F16_TOL, rtol=0
    )
    np.testing.assert_allclose(
        features.values[:, :valid].sum(0), expected["mel_frame_sum/clip_long"], atol=5e-3
    )


def test_short_input_is_padded_to_8000_samples_and_100_frames():
    features = log_mel(np.zeros(100, dtype=np.float32))
    assert features.valid_frames == 50
    assert features.values.shape == (128, 100)
    assert not features.values[:, 50:].any()  # right padding is zeros, after log scaling
    # Silence: log10 floor 1e-10 → -10, global max - 8 floor leaves -10 → (x+4)/4 = -1.5.
    np.testing.assert_allclose(features.values[:, :50], -1.5)


def test_global_max_floor():
    rng = np.random.default_rng(0)
    loud = rng.standard_normal(16000).astype(np.float32)
    values = log_mel(loud).values[:, :100]
    assert values.max() - values.min() <= 2.0 + 1e-6  # floor at max - 8 in log10 units = 2 after /4


def test_frames_drop_last_stft_frame():
    assert log_mel(np.zeros(16159, dtype=np.float32)).valid_frames == 100
    assert log_mel(np.zeros(16160, dtype=np.float32)).valid_frames == 101


@pytest.mark.parametrize(
    ("frames", "tokens"),
    [(100, 13), (50, 7), (1, 1), (1407, 183), (11540, 1500), (0, 0), (60, 8), (200, 26), (3500, 455)],
)
def test_audio_token_count_spec_examples(frames, tokens):
    assert audio_token_count(frames) == tokens


def test_audio_token_count_matches_chunks():
    for frames in range(1, 1000):
        full, rest = divmod(frames, 100)
        assert audio_token_count(frames) == 13 * full + chunk_token_count(rest), frames


@pytest.mark.parametrize("clip", ["clip_tiny", "clip_short", "clip_a", "clip_b", "clip_long"])
def test_token_count_matches_reference_tower_output(clip):
    features = log_mel(load_audio()[clip])
    tokens = load_expected_arrays()[f"projected/{clip}/w800"].shape[0]
    assert audio_token_count(features.valid_frames) == tokens
