"""The Qwen3-ASR thinker on libllama: audio-embedding injection, greedy decoding, KV-prefix reuse.

The prompt's input rows are the checkpoint's token embeddings (float32) with the audio-tower
embeddings substituted at the ``<|audio_pad|>`` positions, decoded as one embedding batch — the
reference's ``masked_scatter`` followed by the text decoder. The KV cache holds everything decoded
so far; ``truncate(n)`` keeps a prefix so a streaming caller re-decodes only what changed.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from inference.errors import UsageError
from inference.families.confucius4_r2t2.thinker_gguf import (
    ThinkerCheckpoint,
    ensure_thinker_gguf,
    resolve_storage_type,
)
from inference.native.llama import (
    ONE_ROW_STEP_BATCH_EXACT_POSITIONS,
    TILED_ATTENTION_MIN_ROWS,
    ContextOptions,
    LlamaContext,
    LlamaModel,
    default_threads,
)

# Weight types whose CPU products give a row the same bits in a batch of a few rows as in a one-row step (ggml
# quantizes the activations per row and sums blocks in a fixed order; measured on the 0.6B shape and the tiny one).
# Float weights take another kernel for one row than for several (up to 3e-4 apart with f16), so only these
# types verify a draft in one batch (figures: tests/bench/README.md, "Draft decoding").
STEP_EXACT_TYPES = frozenset({"q8_0", "q6_k", "q4_k"})
# ... in batches of at most this many rows: from 8 rows on ggml takes another product kernel for k-quants (rows
# 0.04-0.06 apart on the 0.6B shape and a 256-wide test thinker). A rolled-back tail of 5 tokens fits one batch.
DRAFT_BATCH_ROWS = 7


@dataclass(frozen=True)
class ThinkerOptions:
    storage_type: str = "native"  # the spec's thinker_weight_type
    # Prompt + audio tokens (13 per second) + generated tokens must fit. KV memory at the 1.7B shape:
    # 28 layers x 2 x 1024 x n_ctx x (4 bytes f32 | 2 bytes f16), i.e. 0.94 GB / 0.47 GB at 4096.
    n_ctx: int = 4096
    n_batch: int = 512
    n_threads: int | None = None
    n_gpu_layers: int = 0  # -1 offloads every layer to a GPU backend
    cache_dir: Path | None = None  # where the converted GGUF lives; default <model>/.captioneer


@dataclass
class GreedyResult:
    token_ids: list[int] = field(default_factory=list)  # generated ids, without the eos id
    eos_id: int | None = None  # the eos id that stopped decoding, None when max_tokens ran out
    margins: list[float] = field(default_factory=list)  # top-1 minus top-2 logit per step (if asked)
    drafted: int = 0  # draft tokens checked in a verification pass
    accepted: int = (
        0  # of those, the ones greedy decoding would have chosen (taken without a step of their own)
    )


def placeholder_positions(token_ids: Sequence[int] | np.ndarray, audio_token_id: int) -> np.ndarray:
    """Indices of the audio placeholder tokens, in order (where the audio rows go)."""
    return np.flatnonzero(np.asarray(token_ids) == audio_token_id)


def greedy_pick(logits: np.ndarray) -> int:
    """Argmax; ties resolve to the lowest id (``np.argmax`` returns the first maximum)."""
    return int(np.argmax(logits))


def _margin(logits: np.ndarray) -> float:
    top2 = np.partition(logits, -2)[-2:]
    return float(top2[1] - top2[0])


class Thinker:
    """Load (converting if needed) the thinker of a checkpoint and decode with it."""

    def __init__(
        self,
        model_dir: str | os.PathLike[str],
        options: ThinkerOptions | None = None,
        progress: Callable[[float], None] | None = None,
    ) -> None:
        self.options = options or ThinkerOptions()
        self.checkpoint = ThinkerCheckpoint(model_dir)
        self.storage_type = resolve_storage_type(self.checkpoint, self.options.storage_type)
        threads = self.options.n_threads or default_threads()
        self.gguf_path = ensure_thinker_gguf(
            self.checkpoint, self.storage_type, self.options.cache_dir, n_threads=threads, progress=progress
        )
        self.model = LlamaModel(self.gguf_path, n_gpu_layers=self.options.n_gpu_layers)
        exact = self.storage_type == "f32"
        try:
            self.context = LlamaContext(
                self.model,
                ContextOptions(
                    n_ctx=self.options.n_ctx,
                    n_batch=self.options.n_batch,
                    n_ubatch=self.options.n_batch,
                    n_threads=threads,
                    # f32 weights run f32 end to end: llama.cpp's default f16 KV cache (and its
                    # CPU flash attention, which rounds through f16) would cost ~1e-4 of accuracy.
                    kv_type="f32" if exact else "f16",
                    flash_attn=False if exact else None,
                ),
            )
        except BaseException:
            self.model.close()
            raise
        self.hidden_size = self.checkpoint.hparams.hidden_size
        self._last_logits: np.ndarray | None = None
        self._pending: int | None = None  # generated last, not yet in the KV cache

    @property
    def min_prefill_rows(self) -> int:
        """Fewest rows a prefill after a kept KV prefix may hold for its rows to come out as in a prefill of
        the whole prompt (1 with the f32 cache; a full flash-attention tile with the f16 one)."""
        return 1 if self.context.options.kv_type == "f32" else TILED_ATTENTION_MIN_ROWS

    @property
    def verifies_drafts_exactly(self) -> bool:
        """Whether a batch of draft tokens yields each row's logits exactly as one greedy step would (so a
        verified draft cannot change the greedy ids): quantized weights on the CPU."""
        return self.options.n_gpu_layers == 0 and self.storage_type in STEP_EXACT_TYPES

    @property
    def draft_position_limit(self) -> int:
        """First position a verified draft row may not take: from there on a one-row step (what greedy decoding
        without a draft runs) is computed differently from a batch row by flash attention."""
        if self.context.options.flash_attn is False:
            return self.context.n_ctx
        return ONE_ROW_STEP_BATCH_EXACT_POSITIONS

    @property
    def n_past(self) -> int:
        """Positions held in the KV cache."""
        return self.context.n_past

    @property
    def last_logits(self) -> np.ndarray | None:
        return self._last_logits

    def input_rows(
        self,
        token_ids: Sequence[int] | np.ndarray,
        audio_embeddings: np.ndarray | None = None,
        audio_positions: Sequence[int] | np.ndarray | None = None,
    ) -> np.ndarray:
        """Token embeddings (float32) with the audio rows substituted at ``audio_positions``."""
        ids = np.asarray(token_ids, dtype=np.int64).reshape(-1)
        vocab = self.checkpoint.hparams.vocab_size
        if ids.size and (ids.min() < 0 or ids.max() >= vocab):
            raise UsageError(f"token id out of range for a vocabulary of {vocab}", "check the tokenizer")
        rows = self.checkpoint.embedding_rows(ids)
        if audio_embeddings is None:
            if audio_positions is not None and len(audio_positions):
                raise UsageError(
                    "audio positions were given without audio embeddings", "pass both or neither"
                )
            return rows
        audio = np.asarray(audio_embeddings, dtype=np.float32)
        positions = np.asarray(audio_positions if audio_positions is not None else [], dtype=np.int64)
        if audio.ndim != 2 or audio.shape[1] != self.hidden_size:
            raise UsageError(
                f"audio embeddings must have shape (n, {self.hidden_size}), got {audio.shape}",
                "the audio tower's output_dim must equal the thinker's hidden size",
            )
        if positions.shape != (audio.shape[0],):
            raise UsageError(
                f"{audio.shape[0]} audio embeddings but {positions.size} placeholder positions",
                "expand the audio placeholder to exactly one token per audio embedding",
            )
        if positions.size and (positions.min() < 0 or positions.max() >= ids.size):
            raise UsageError("an audio position lies outside the prompt", "pass indices into token_ids")
        rows[positions] = audio
        return rows

    def prefill(
        self,
        token_ids: Sequence[int] | np.ndarray,
        audio_embeddings: np.ndarray | None = None,
        audio_positions: Sequence[int] | np.ndarray | None = None,
    ) -> np.ndarray:
        """Decode the prompt after the cached prefix (``n_past``); returns the last position's logits."""
        rows = self.input_rows(token_ids, audio_embeddings, audio_positions)
        if rows.shape[0] == 0:
            raise UsageError("the prompt is empty", "pass at least one token")
        self._pending = None
        self._last_logits = self.context.decode_embeddings(rows, logits="last")[0]
        return self._last_logits

    def prefill_rows(self, rows: np.ndarray) -> np.ndarray:
        """Decode ready-made input rows (from :meth:`input_rows`) after the cached prefix; returns the last logits."""
        rows = np.ascontiguousarray(rows, dtype=np.float32)
        if rows.ndim != 2 or rows.shape[0] == 0 or rows.shape[1] != self.hidden_size:
            raise UsageError(
                f"input rows must have shape (n >= 1, {self.hidden_size}), got {rows.shape}",
                "build them with input_rows()",
            )
        self._pending = None
        self._last_logits = self.context.decode_embeddings(rows, logits="last")[0]
        return self._last_logits

    def feed(self, token_ids: Iterable[int]) -> np.ndarray:
        """Append already chosen tokens (e.g. a fixed text prefix) and return the last logits."""
        ids = list(token_ids)
        self._flush_pending()
        self._last_logits = self.context.decode_tokens(ids, logits="last")[0]
        return self._last_logits

    def decode_greedy(
        self,
        max_tokens: int,
        eos_ids: Iterable[int],
        record_margins: bool = False,
        draft: Sequence[int] = (),
    ) -> GreedyResult:
        """Greedy continuation from the last logits until an eos id or ``max_tokens`` new tokens.

        ``draft`` is a guess at the continuation (a live stream's previous answer). Once greedy decoding picks the
        draft's first token, that token and the next draft tokens go through the model in one batch (at most
        ``DRAFT_BATCH_ROWS`` rows; another batch follows when all were taken); every draft
        token whose preceding row's argmax is that very token is taken without a step of its own, the KV rows past
        the first mismatch are dropped, and decoding goes on from the mismatching row's logits. The ids are the
        greedy ids either way when a row's logits do not depend on how many rows share its batch
        (:attr:`verifies_drafts_exactly`; callers pass a draft only then, tests compare both paths) — which holds
        below :attr:`draft_position_limit` only: from there on the draft is set aside.
        """
        if self._last_logits is None:
            raise UsageError("nothing to continue from", "call prefill() first")
        stop = set(int(i) for i in eos_ids)
        result = GreedyResult()
        self._flush_pending()
        guess = [int(i) for i in draft]
        while len(result.token_ids) < max_tokens:
            logits = self._last_logits
            token = greedy_pick(logits)
            if record_margins:
                result.margins.append(_margin(logits))
            if token in stop:
                result.eos_id = token
                break
            result.token_ids.append(token)
            if len(result.token_ids) == max_tokens:
                self._pending = token  # fed lazily: a caller that truncates never pays for it
                break
            # The batch puts the token at n_past and the guesses after it, all below the draft position limit.
            room = min(
                max_tokens - len(result.token_ids),
                DRAFT_BATCH_ROWS - 1,
                self.draft_position_limit - 1 - self.context.n_past,
            )
            if len(guess) > 1 and guess[0] == token and room > 0:
                batch = guess[1 : 1 + room]
                kept = self._verify(token, batch, stop, result, record_margins)
                # All taken: the rest of the draft may follow; past a mismatch it no longer lines up.
                guess = guess[1 + kept :] if kept == len(batch) else []
                continue
            guess = []
            self._last_logits = self.context.decode_tokens([token], logits="last")[0]
        return result

    def _verify(
        self, token: int, guess: list[int], stop: set[int], result: GreedyResult, record_margins: bool
    ) -> int:
        """Decode ``token`` and ``guess`` in one batch and keep the guessed ids greedy decoding agrees with
        (returns how many)."""
        start = self.context.n_past
        rows = self.context.decode_tokens([token, *guess], logits="all")
        result.drafted += len(guess)
        kept = 0
        for index, wanted in enumerate(guess):
            if greedy_pick(rows[index]) != wanted or wanted in stop:
                break
            if record_margins:
                result.margins.append(_margin(rows[index]))
            result.token_ids.append(wanted)
            kept += 1
        result.accepted += kept
        self.context.truncate(start + 1 + kept)  # the rows of rejected guesses never happened
        self._last_logits = rows[kept]
        return kept

    def _flush_pending(self) -> None:
        if self._pending is not None:
            token, self._pending = self._pending, None
            self._last_logits = self.context.decode_tokens([token], logits="last")[0]

    def truncate(self, n_keep: int) -> None:
        """Keep the first ``n_keep`` cached positions (KV-prefix reuse); call prefill() next."""
        self._pending = None
        self._last_logits = None
        if n_keep == 0:
            self.context.clear()
        else:
            self.context.truncate(n_keep)

    def close(self) -> None:
        self.context.close()
        self.model.close()

    def __enter__(self) -> Thinker:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()
