"""Token ids → text and word timestamps for Parakeet-TDT.

Text follows transformers' ``processor.decode(..., skip_special_tokens=True)`` (docs/families/parakeet_tdt.md §5);
word timestamps are ``default`` (docs/families/parakeet_tdt.md §5) or Phonon-2's ``token_duration``
(docs/families/parakeet_tdt.md §7.5). ``token_timestamps`` reproduces transformers' token-level timestamps
for comparison.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass

from tokenizers import Tokenizer

from inference.contract import Word
from inference.errors import ModelError
from inference.families.parakeet_tdt.config import ParakeetConfig
from inference.families.parakeet_tdt.decoder import TokenStep

WORD_MARK = "\u2581"
HF_PUNCTUATION = frozenset(["?", "'", "¡", "¿", "-", ":", ",", "%", "/", ".", "!"])


class ParakeetTokenizer:
    def __init__(self, tokenizer_json: str, config: ParakeetConfig, source: str = "tokenizer.json") -> None:
        try:
            self._tok = Tokenizer.from_str(tokenizer_json)
            spec = json.loads(tokenizer_json)
        except Exception as exc:  # tokenizers raises a plain Exception on malformed files
            raise ModelError(
                f"{source} cannot be read by the tokenizers library: {exc}", "re-download tokenizer.json"
            ) from exc
        if self._tok.get_vocab_size(with_added_tokens=True) != config.vocab_size:
            raise ModelError(
                f"{source} has {self._tok.get_vocab_size(with_added_tokens=True)} tokens but config.json says "
                f"vocab_size {config.vocab_size}",
                "use the tokenizer.json that belongs to this checkpoint",
            )
        self.blank_id = config.blank_token_id
        self.pad_id = config.pad_token_id
        self.vocab_size = config.vocab_size
        special = {t["id"] for t in spec.get("added_tokens", []) if t.get("special")}
        unk = (spec.get("model") or {}).get("unk_token")
        unk_id = self._tok.token_to_id(unk) if isinstance(unk, str) else None
        if unk_id is not None:
            special.add(unk_id)
        self.special_ids = frozenset(special)
        self._pieces = [self._tok.id_to_token(i) or "" for i in range(self.vocab_size)]

    def piece(self, token_id: int) -> str:
        return self._pieces[token_id] if 0 <= token_id < self.vocab_size else ""

    def starts_word(self, token_id: int) -> bool:
        """Whether the piece begins a new word (SentencePiece marks those with a leading U+2581)."""
        return self.piece(token_id).startswith("\u2581")

    def is_text_token(self, token_id: int, keep_language_tags: bool = False) -> bool:
        if not 0 <= token_id < self.vocab_size or token_id in (self.blank_id, self.pad_id):
            return False
        return keep_language_tags or token_id not in self.special_ids

    def decode(self, token_ids: Sequence[int], keep_language_tags: bool = False) -> str:
        ids = [t for t in token_ids if self.is_text_token(t, keep_language_tags)]
        return self._tok.decode(ids, skip_special_tokens=False)


# ------------------------------------------------------------------------------------------ words


@dataclass
class _WordBuilder:
    text: str
    start: int  # frames
    end: int
    voiced_end: int  # the end of its own last token (``end`` may be stretched to the next word's start)


def default_word_timestamps(
    tokens: Sequence[TokenStep], tokenizer: ParakeetTokenizer, audio_end_frame: int, seconds_per_frame: float
) -> list[Word]:
    words: list[_WordBuilder] = []
    new_word = True
    for tok in tokens:
        if not tokenizer.is_text_token(tok.token_id):
            continue
        piece = tokenizer.piece(tok.token_id)
        starts_word = piece.startswith(WORD_MARK)
        text = piece.replace(WORD_MARK, "")
        if not text:  # a bare "▁" piece: the next piece starts a word
            new_word = new_word or starts_word
            continue
        start = min(max(tok.frame, 0), audio_end_frame)
        end = min(max(tok.frame + max(tok.duration, 1), start), audio_end_frame)
        if starts_word or new_word or not words:
            if words:
                words[-1].end = start  # a word ends where the next one starts (the reference's rule)
            words.append(_WordBuilder(text, start, end, end))
        else:
            words[-1].text += text
            words[-1].end = max(words[-1].end, end)
            words[-1].voiced_end = max(words[-1].voiced_end, end)
        new_word = False
    return [
        Word(
            w.text,
            w.start * seconds_per_frame,
            w.end * seconds_per_frame,
            None,
            min(w.voiced_end, w.end) * seconds_per_frame,
        )
        for w in words
    ]


def token_duration_word_timestamps(
    tokens: Sequence[TokenStep],
    tokenizer: ParakeetTokenizer,
    punctuation_ids: frozenset[int],
    audio_end_s: float,
    seconds_per_frame: float,
) -> list[Word]:
    words: list[list] = []  # [text, start_s, end_s]
    for tok in tokens:
        if not tokenizer.is_text_token(tok.token_id):
            continue
        piece = tokenizer.piece(tok.token_id).replace(WORD_MARK, " ")
        start = tok.frame * seconds_per_frame
        end = start + max(tok.duration, 0) * seconds_per_frame
        is_punct = tok.token_id in punctuation_ids
        opens = piece.startswith(" ") and (not piece.strip() or not is_punct)
        if not words or opens:
            words.append([piece, start, end])
        else:
            words[-1][0] += piece
            words[-1][2] = end
    out = []
    for text, start, end in words:
        stripped = text.strip(" \t\n\r\f\v")
        if stripped:
            out.append(Word(stripped, start, max(start, min(end, audio_end_s))))
    return out


def token_timestamps(
    tokens: Sequence[TokenStep], tokenizer: ParakeetTokenizer, seconds_per_frame: float
) -> list[dict]:
    """transformers' processor token timestamps (``decode(..., durations=...)``), for comparisons."""
    out: list[dict] = []
    kept: list[int] = []
    previous = ""
    for tok in tokens:
        if not tokenizer.is_text_token(tok.token_id):
            continue
        kept.append(tok.token_id)
        decoded = tokenizer.decode(kept)
        text = decoded[len(previous) :]
        previous = decoded
        if not text:
            continue
        entry = {
            "token": text,
            "start": tok.frame * seconds_per_frame,
            "end": (tok.frame + tok.duration) * seconds_per_frame,
        }
        if text in HF_PUNCTUATION and out:
            entry["start"] = entry["end"] = out[-1]["end"]
        out.append(entry)
    return out
