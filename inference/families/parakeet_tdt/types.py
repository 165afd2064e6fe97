"""Types the Parakeet-TDT engine shares with its live streams (streaming.py, rolling.py), which so need not
import the engine."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import numpy as np

from inference.audio.spans import Span
from inference.contract import Word
from inference.families.parakeet_tdt.config import ParakeetConfig
from inference.families.parakeet_tdt.decoder import DecoderState, TokenBias, TokenStep
from inference.families.parakeet_tdt.options import SessionSettings
from inference.families.parakeet_tdt.text import ParakeetTokenizer


@dataclass(frozen=True)
class SpanDecode:
    """Tokens of one decoded stretch of audio; token frames count from ``span.start``."""

    span: Span
    tokens: list[TokenStep]


class LoadedEngine(Protocol):
    """What a live stream uses of the loaded engine (engine.ParakeetEngine)."""

    config: ParakeetConfig
    session: SessionSettings
    tokenizer: ParakeetTokenizer
    samples_per_frame: int
    seconds_per_frame: float

    def encode_frames(self, samples: np.ndarray) -> np.ndarray: ...

    def greedy(
        self,
        frames: np.ndarray,
        state: DecoderState | None,
        frame_offset: int,
        max_tokens: int | None,
        bias: TokenBias | None = None,
    ) -> tuple[list[TokenStep], DecoderState]: ...

    def decode_full_context(
        self, samples: np.ndarray, span: Span, budget: int | None, bias: TokenBias | None = None
    ) -> SpanDecode: ...

    def render(self, decoded: SpanDecode, keep_language_tags: bool) -> tuple[str, list[Word]]: ...
