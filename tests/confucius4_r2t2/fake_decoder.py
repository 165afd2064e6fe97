"""A scripted ``ChunkDecoder`` for the LSP state-machine tests: a tiny tokenizer and answers given in order.

Tokenizer: ``<asr_text>`` is one token, an ASCII word with its leading space (`` world``) is one token, any other
ASCII character is one token, and a non-ASCII character is one token per UTF-8 byte, so cutting ids can split a
character and decode to U+FFFD (as byte-level BPE does).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np

from inference.families.confucius4_r2t2.postprocess import sanitize_utf8_lossy

_PIECES = re.compile(r"<asr_text>| ?[A-Za-z]+|.", re.DOTALL)


class FakeTokenizer:
    def __init__(self) -> None:
        self.pieces: list[bytes] = []
        self.ids: dict[bytes, int] = {}

    def _id(self, piece: bytes) -> int:
        if piece not in self.ids:
            self.ids[piece] = len(self.pieces)
            self.pieces.append(piece)
        return self.ids[piece]

    def encode(self, text: str) -> list[int]:
        out: list[int] = []
        for match in _PIECES.finditer(text):
            piece = match.group(0)
            if piece.isascii():
                out.append(self._id(piece.encode()))
            else:
                out.extend(self._id(bytes([b])) for b in piece.encode("utf-8"))
        return out

    def decode(self, ids: Sequence[int]) -> str:
        return sanitize_utf8_lossy(b"".join(self.pieces[i] for i in ids))


class ScriptedDecoder(FakeTokenizer):
    """Answers ``generate`` calls from a list, recording the prefix and audio length of every call."""

    def __init__(self, answers: Sequence[str]) -> None:
        super().__init__()
        self.answers = list(answers)
        self.calls: list[tuple[int, str, int]] = []  # (audio samples, prefix, max_tokens)

    def generate(self, audio: np.ndarray, prefix: str, max_tokens: int) -> str:
        self.calls.append((int(audio.size), prefix, max_tokens))
        if len(self.calls) > len(self.answers):
            raise AssertionError(f"decode call {len(self.calls)} has no scripted answer")
        return self.answers[len(self.calls) - 1]
