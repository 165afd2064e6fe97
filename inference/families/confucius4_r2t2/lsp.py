"""The Longest-Stable-Prefix state machine of Confucius4-R2T2 live captions (docs/families/confucius4_r2t2.md §7, §8).

Every chunk re-decodes all the audio so far with the previous answer, minus its last few tokens, as a text prefix
of the assistant turn. What survives a rollback of ``unfixed_token_num`` tokens (grown until it decodes without
U+FFFD) is committed; committed text only ever grows, counted in code points.

The state machine knows nothing of audio towers or libllama: it talks to a :class:`ChunkDecoder`, so tests can
script the model's answers and check the text logic exactly (the real decoder is ``chunk_decoder.py``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from inference.contract import SAMPLE_RATE
from inference.families.confucius4_r2t2.postprocess import (
    ASR_TEXT_TAG,
    REPLACEMENT,
    ends_with_rollback_punctuation,
    normalize_punct_by_context,
    parse_asr_output,
    parse_language_output,
    remove_spaces_between_chinese,
    split_at_tag,
    truncate_at_pipe,
)

STREAM_OPTIONS = (
    "chunk_size_ms",
    "unfixed_chunk_num",
    "unfixed_token_num",
    "rollback_punctuation",
    "max_tokens",
)


@dataclass(frozen=True)
class StreamOptions:
    """Session/stream options of the LSP loop (defaults from ``session.h`` ``R2T2ASRStreamConfig``)."""

    chunk_size_ms: float = 320.0
    unfixed_chunk_num: int = 2
    unfixed_token_num: int = 5
    rollback_punctuation: bool = False
    max_tokens: int = 32

    @classmethod
    def from_options(cls, options: dict[str, Any]) -> StreamOptions:
        """From already validated option values (``FamilySpec`` checks names and ranges)."""
        return cls(**{name: options[name] for name in STREAM_OPTIONS if name in options})

    @property
    def chunk_samples(self) -> int:
        # llround (half away from zero) of a positive value.
        return max(1, math.floor(self.chunk_size_ms / 1000.0 * SAMPLE_RATE + 0.5))


class ChunkDecoder(Protocol):
    """The model side of one stream: the prompt (context, forced language) is fixed when it is made."""

    def encode(self, text: str) -> list[int]:
        """Token ids of plain text (the checkpoint tokenizer, normaliser included)."""
        ...

    def decode(self, ids: Sequence[int]) -> str:
        """Text of ids, special tokens dropped, one U+FFFD per byte of an incomplete UTF-8 sequence."""
        ...

    def generate(self, audio: np.ndarray, prefix: str, max_tokens: int) -> str:
        """Greedy answer to prompt + ``prefix`` over all of ``audio``, detokenised as :meth:`decode` does."""
        ...


@dataclass(frozen=True)
class ChunkOutcome:
    """What one decode produced; ``fixed`` is the committed candidate with every ``<asr_text>`` removed."""

    prefix: str  # the text prefix given to the model
    generated: str  # the model's answer after punctuation normalisation and U+FFFD removal
    raw_decoded: str  # the model-facing state after this decode (the next prefix comes from it)
    text: str  # running transcript
    fixed: str
    language: str
    delta: str  # newly committed text ("" when nothing grew or on the final flush)


class LspRecognizer:
    """One utterance of LSP decoding; feed it the accumulated audio after each complete chunk."""

    def __init__(self, decoder: ChunkDecoder, options: StreamOptions, forced_language: str = "") -> None:
        self.decoder = decoder
        self.options = options
        self.forced_language = forced_language  # resolved name; "" = automatic detection
        self.raw_decoded = ""
        self.text = ""
        self.language = forced_language
        self.chunk_id = 0
        self.published_cp = 0
        self.committed = ""  # the published deltas joined (less what a rolling window dropped)
        self.decode_calls = 0

    # ------------------------------------------------------------------ prefix
    def rollback_prefix(self, ids: Sequence[int], k: int) -> str:
        """Drop the last ``k`` ids, growing ``k`` until the kept ids decode without U+FFFD."""
        while True:
            end = max(0, len(ids) - k)
            prefix = self.decoder.decode(ids[:end]) if end else ""
            if REPLACEMENT not in prefix or end == 0:
                return "" if end == 0 else prefix
            k += 1

    def build_prefix(self, final: bool) -> str:
        if self.chunk_id < self.options.unfixed_chunk_num:
            return ""
        raw = truncate_at_pipe(self.raw_decoded)
        ids = self.decoder.encode(raw)
        if final:  # fixed rollback, no U+FFFD loop, never past the first token (docs/families/confucius4_r2t2.md §8 item 10)
            end = min(len(ids), max(1, len(ids) - self.options.unfixed_token_num))
            return truncate_at_pipe(self.decoder.decode(ids[:end]))
        k = self.options.unfixed_token_num
        if self.options.rollback_punctuation and ends_with_rollback_punctuation(raw):
            k = 0
        return truncate_at_pipe(self.rollback_prefix(ids, k))

    # ------------------------------------------------------------------ one decode
    def restart_from(self, kept_text: str, decoder: ChunkDecoder | None = None) -> None:
        """Continue on shorter audio whose committed text is ``kept_text`` (a rolling window dropped the rest).

        The next prompt carries ``kept_text`` as its stable prefix (after the language metadata in automatic
        mode) and deltas continue past it: published text is never revised.
        """
        if decoder is not None:
            self.decoder = decoder
        parts = split_at_tag(self.raw_decoded)
        self.raw_decoded = parts[0] + ASR_TEXT_TAG + kept_text if parts is not None else kept_text
        self.text = self.committed = kept_text
        self.published_cp = len(kept_text)
        self.chunk_id = max(self.chunk_id, self.options.unfixed_chunk_num)

    def checkpoint(self) -> dict[str, Any]:
        """What a recognizer in another process needs to continue this one exactly (``resume_from``)."""
        return {
            "raw": self.raw_decoded,
            "text": self.text,
            "committed": self.committed,
            "language": self.language,
            "chunk_id": self.chunk_id,
        }

    def resume_from(self, state: dict[str, Any]) -> None:
        """Continue a ``checkpoint`` of a recognizer whose process died, on the same audio: the next prefix is
        built from the same last answer, and only text past the committed text is published."""
        self.raw_decoded = str(state.get("raw", ""))
        self.text = str(state.get("text", ""))
        self.committed = str(state.get("committed", ""))
        self.published_cp = len(self.committed)
        self.language = str(state.get("language") or self.language)
        self.chunk_id = int(state.get("chunk_id", 0))

    def decode_chunk(
        self, audio: np.ndarray, final: bool = False, publish: bool | None = None, new_chunks: int = 1
    ) -> ChunkOutcome:
        """Steps 1-10 of ``decode_chunk`` plus the committed-delta contract.

        ``publish`` defaults to ``not final``: ``finish`` publishes nothing, an endpointed segment's flush does.
        ``new_chunks``: the chunks of audio this decode reads for the first time; a catch-up decode of several
        gets ``max_tokens`` for each, so a backlog's words are not cut off.
        """
        forced = self.forced_language
        prefix = self.build_prefix(final)
        self.decode_calls += 1
        generated = self.decoder.generate(audio, prefix, self.options.max_tokens * max(1, new_chunks))
        # An invalid byte counts as a character when choosing punctuation forms; only then is it deleted.
        generated = normalize_punct_by_context(generated).replace(REPLACEMENT, "")
        raw = prefix + generated
        detected = parse_language_output(raw, "").language if not forced else ""
        if forced == "Chinese" or detected == "Chinese":
            raw = remove_spaces_between_chinese(raw)
        parsed = parse_asr_output(raw, forced)
        parts = split_at_tag(raw)
        raw = parts[0] + ASR_TEXT_TAG + parsed.text if parts is not None else parsed.text
        raw = truncate_at_pipe(raw)
        self.raw_decoded = raw

        ids = self.decoder.encode(raw)
        k = self.options.unfixed_token_num
        if self.options.rollback_punctuation and ends_with_rollback_punctuation(raw):
            k = 0
        tagged = split_at_tag(raw)
        if tagged is not None and tagged[1] == "":
            k = 0
        fixed = self.rollback_prefix(ids, k)
        fixed_parts = split_at_tag(fixed)
        if fixed_parts is not None:
            fixed = fixed_parts[1]
        elif not forced:
            fixed = ""  # only metadata is stable so far
        # Published text never carries the tag, even one the model emitted itself (docs/families/confucius4_r2t2.md §8 item 2).
        fixed = truncate_at_pipe(fixed).replace(ASR_TEXT_TAG, "")

        if not forced and tagged is None:
            self.text = ""  # no language tag yet: nothing to show, chunk_id stays (docs/families/confucius4_r2t2.md §8 item 9)
            return ChunkOutcome(prefix, generated, raw, "", "", self.language, "")
        self.language = parsed.language
        self.text = truncate_at_pipe(parsed.text)
        self.chunk_id += 1
        delta = self._publish(fixed) if (not final if publish is None else publish) else ""
        return ChunkOutcome(prefix, generated, raw, self.text, fixed, self.language, delta)

    def commit_rest(self, text: str) -> str:
        """Publish what of ``text`` lies past the committed text, with no rollback: an endpointed segment's
        final text is settled, so its deltas add up to it. Nothing when ``text`` does not extend the committed
        text (published text is never revised). Tags are removed first, as from every published text (§8 item 2:
        a forced-language model may emit ``<asr_text>`` itself)."""
        settled = text.replace(ASR_TEXT_TAG, "")
        return self._publish(settled) if settled.startswith(self.committed) else ""

    def _publish(self, fixed: str) -> str:
        """Code points of ``fixed`` beyond those already published; a shrinking prefix publishes nothing."""
        if len(fixed) <= self.published_cp:
            return ""
        delta = fixed[self.published_cp :]
        self.published_cp = len(fixed)
        self.committed += delta
        return delta
