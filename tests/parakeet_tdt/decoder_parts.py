"""Small random TDT decoders for tests of the greedy loop and its step (no checkpoint needed)."""

from __future__ import annotations

import numpy as np

from inference.families.parakeet_tdt.config import EncoderConfig, ParakeetConfig
from inference.families.parakeet_tdt.decoder import DecoderWeights


def decoder_config(vocab: int, hidden: int, encoder_hidden: int) -> ParakeetConfig:
    """A two-layer decoder's config; blank is the last id, durations as v3's."""
    return ParakeetConfig(
        vocab_size=vocab,
        blank_token_id=vocab - 1,
        pad_token_id=1,
        decoder_hidden_size=hidden,
        num_decoder_layers=2,
        max_symbols_per_step=10,
        durations=(0, 1, 2, 3, 4),
        encoder=EncoderConfig(hidden_size=encoder_hidden),
    )


def random_decoder_weights(
    rng: np.random.Generator,
    vocab: int,
    hidden: int,
    encoder_hidden: int,
    scale: float = 1.0,
    embedding_scale: float = 1.0,
) -> DecoderWeights:
    """Gaussian weights in the shapes of ``decoder_config(vocab, hidden, encoder_hidden)``."""

    def r(*shape: int, std: float = scale) -> np.ndarray:
        return (rng.standard_normal(shape) * std).astype(np.float32)

    return DecoderWeights(
        embedding=r(vocab, hidden, std=embedding_scale),
        w_ih=[r(4 * hidden, hidden), r(4 * hidden, hidden)],
        w_hh=[r(4 * hidden, hidden), r(4 * hidden, hidden)],
        bias=[r(4 * hidden), r(4 * hidden)],
        pred_w=r(hidden, hidden),
        pred_b=r(hidden),
        enc_w=r(hidden, encoder_hidden),
        enc_b=r(hidden),
        head_w=r(vocab + 5, hidden),
        head_b=r(vocab + 5),
    )
