"""The speaker augmentation of the demo model's training recipe (train.py: --vtlp, --time-stretch).

train.py needs torch, which the project's own environment (and CI) does not have: these tests are skipped there and
run where torch is installed (the reference environment, `.venv-ref`).
"""

from __future__ import annotations

import importlib.util
import math
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("tokenizers")

TRAIN = Path(__file__).resolve().parents[2] / "tests" / "reference" / "demo_model" / "train.py"


@pytest.fixture(scope="module")
def train():
    spec = importlib.util.spec_from_file_location("demo_train", TRAIN)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_mel_centres_are_those_of_the_reference_extractor(train) -> None:
    # 128 slaney bands between 0 Hz and 8 kHz, equally spaced in mel
    centres = train.MEL_CENTRES_HZ.numpy()
    assert centres.shape == (128,)
    assert np.all(np.diff(centres) > 0)
    assert 20 < centres[0] < 30 and 7700 < centres[-1] < 8000
    mel = train._slaney_mel(train.MEL_CENTRES_HZ).numpy()
    np.testing.assert_allclose(np.diff(mel), np.diff(mel)[0], rtol=1e-4)
    np.testing.assert_allclose(
        train._slaney_hz(train._slaney_mel(train.MEL_CENTRES_HZ)).numpy(), centres, rtol=1e-9
    )


def test_vtlp_identity_and_warp(train) -> None:
    np.testing.assert_allclose(train.vtlp_source_bins(1.0).numpy(), np.arange(128), atol=1e-3)
    centres = train.MEL_CENTRES_HZ
    mel0, step = (
        float(train._slaney_mel(centres[:1])),
        float(train._slaney_mel(centres[1:2]) - train._slaney_mel(centres[:1])),
    )
    for alpha in (0.85, 0.95, 1.05, 1.15):
        pos = train.vtlp_source_bins(alpha)
        assert torch.all(pos[1:] >= pos[:-1]) and float(pos.min()) >= 0 and float(pos.max()) <= 127
        # below the break point (4800 Hz × min(alpha, 1)) output frequency f reads the source at f / alpha
        source_hz = train._slaney_hz(mel0 + pos.double() * step).numpy()
        below = (centres.numpy() <= 4800 * min(alpha, 1.0)) & (centres.numpy() / alpha >= centres.numpy()[0])
        assert below.sum() > 80
        np.testing.assert_allclose(source_hz[below], centres.numpy()[below] / alpha, rtol=2e-3)
        # a longer vocal tract (alpha < 1) moves formants down: output bands read higher source bands, and back
        assert (pos[40] > 40) == (alpha < 1)


def test_speaker_augment_off_draws_nothing_and_changes_nothing(train) -> None:
    x = torch.randn(50, 128, generator=torch.Generator().manual_seed(0))
    gen = torch.Generator().manual_seed(7)
    assert train.speaker_augment(x, gen, 0.0, 0.0) is x
    assert torch.equal(
        torch.rand(3, generator=gen), torch.rand(3, generator=torch.Generator().manual_seed(7))
    )


def test_speaker_augment_is_seeded_and_normalised(train) -> None:
    x = torch.randn(400, 128, generator=torch.Generator().manual_seed(1)) * 3 + 1
    a = train.speaker_augment(x, torch.Generator().manual_seed(5), 0.15, 0.1)
    b = train.speaker_augment(x, torch.Generator().manual_seed(5), 0.15, 0.1)
    c = train.speaker_augment(x, torch.Generator().manual_seed(6), 0.15, 0.1)
    assert torch.equal(a, b)
    assert a.shape != c.shape or not torch.equal(a, c)
    for y in (a, c):
        assert y.shape[1] == 128 and math.floor(400 / 1.1) <= y.shape[0] <= math.ceil(400 / 0.9)
        # every band re-normalised like the reference extractor's output
        np.testing.assert_allclose(y.mean(0).numpy(), 0, atol=1e-4)
        np.testing.assert_allclose(y.std(0).numpy(), 1, atol=1e-3)


def test_time_stretch_keeps_the_contour(train) -> None:
    # a slow ramp over time stays a ramp (monotone) after a stretch; its length follows the drawn rate
    n = 300
    ramp = torch.linspace(-1, 1, n)[:, None].repeat(1, 128)
    y = train.speaker_augment(ramp, torch.Generator().manual_seed(3), 0.0, 0.1)
    assert y.shape[0] != n
    assert torch.all(y[1:, 0] >= y[:-1, 0])
