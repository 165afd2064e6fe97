"""The real :class:`~inference.families.confucius4_r2t2.lsp.ChunkDecoder`: frontend, audio tower and thinker.

Each call re-runs the whole pipeline on all the accumulated audio (families.md §1.7, "the whole accumulated audio
is re-decoded every chunk"): log-mel → tower → prompt (context, forced language, text prefix) → greedy decoding,
detokenised with special tokens, pad and EOS dropped and invalid UTF-8 as one U+FFFD per byte.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from inference.families.confucius4_r2t2.frontend import audio_token_count, log_mel
from inference.families.confucius4_r2t2.prompt import build_prompt

if TYPE_CHECKING:
    from inference.families.confucius4_r2t2.engine import R2T2Engine


def max_stream_samples(max_source_positions: int) -> int:
    """Most samples one utterance may hold before the tower's position limit (1500 tokens = 115.40 s)."""
    frames = 0
    while audio_token_count(frames + 1) <= max_source_positions:
        frames += 1
    # log_mel makes len // 160 frames: every sample up to the next frame boundary still fits.
    return (frames + 1) * 160 - 1


class EngineChunkDecoder:
    """Decodes stream chunks on a loaded engine's tower and thinker with one stream's prompt."""

    def __init__(self, engine: R2T2Engine, context: str, language: str) -> None:
        self.engine = engine
        self.context = context
        self.language = language
        self.tokenizer = engine.checkpoint.tokenizer

    def encode(self, text: str) -> list[int]:
        return self.tokenizer.encode(text)

    def decode(self, ids: Sequence[int]) -> str:
        return self.tokenizer.decode(ids)

    def generate(self, audio: np.ndarray, prefix: str, max_tokens: int) -> str:
        engine = self.engine
        assert engine.tower is not None
        ckpt = engine.checkpoint
        mel = log_mel(audio, ckpt.config.audio.num_mel_bins)
        embeddings = engine.tower.encode(mel.values[:, : mel.valid_frames])
        prompt = build_prompt(self.tokenizer, ckpt.special.audio, embeddings.shape[0], self.context,
                              self.language, prefix)  # fmt: skip
        result = engine._generate(prompt.ids, embeddings, np.asarray(prompt.audio_positions), max_tokens)
        # Ids past the tokenizer (padding rows of a larger vocabulary) carry no text.
        ids = [i for i in result.token_ids if i < self.tokenizer.size]
        return self.tokenizer.decode(ids, drop=engine.drop_ids)
