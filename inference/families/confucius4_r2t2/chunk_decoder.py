"""The real :class:`~inference.families.confucius4_r2t2.lsp.ChunkDecoder`: frontend, audio tower and thinker.

Each call decodes all the accumulated audio (docs/families/confucius4_r2t2.md §7): log-mel → tower → prompt →
greedy decoding, detokenised with special tokens (invalid UTF-8 as one U+FFFD per byte).

``stream_cache`` reuses work between calls with identical output on and off: frame-stable log-mel blocks
(``stream_frontend.py``), tower windows whose log-mel slice is bit-identical and conv-stem rows of earlier chunks
(``audio_tower.StemCache``), and the thinker's KV rows up to the first input row that differs. The re-prefill is
at least ``inference.native.llama.TILED_ATTENTION_MIN_ROWS`` rows with an f16 KV cache, so its rows are computed
exactly as in a whole-prompt prefill. With the cache on, the previous answer is also a draft of this one: a chunk
re-generates mostly the same tail, which one batched forward pass verifies (``Thinker.decode_greedy``) where a
batch row's logits are those of a single step (quantized weights on the CPU).
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractContextManager
from typing import Protocol

import numpy as np

from inference.families.confucius4_r2t2.audio_tower import AudioTower, StemCache
from inference.families.confucius4_r2t2.checkpoint import R2T2Checkpoint
from inference.families.confucius4_r2t2.frontend import CHUNK_FRAMES, HOP_LENGTH, audio_token_count
from inference.families.confucius4_r2t2.postprocess import ASR_TEXT_TAG
from inference.families.confucius4_r2t2.prompt import build_prompt
from inference.families.confucius4_r2t2.stream_frontend import StreamingLogMel
from inference.families.confucius4_r2t2.thinker import Thinker


def max_stream_samples(max_source_positions: int) -> int:
    """Most samples one utterance may hold before the tower's position limit (1500 tokens = 115.40 s)."""
    frames = 0
    while audio_token_count(frames + 1) <= max_source_positions:
        frames += 1
    # log_mel makes len // 160 frames: every sample up to the next frame boundary still fits.
    return (frames + 1) * HOP_LENGTH - 1


class LoadedEngine(Protocol):
    """What a chunk decoder uses of the loaded engine (engine.R2T2Engine)."""

    checkpoint: R2T2Checkpoint
    tower: AudioTower | None
    thinker: Thinker | None
    kv_owner: object | None
    drop_ids: frozenset[int]

    def check_room(
        self, prompt_length: int, max_tokens: int, audio_tokens: int = 0, prefix_tokens: int = 0
    ) -> int: ...

    def one_blas_thread(self) -> AbstractContextManager[object]: ...


class MelEncoder(Protocol):
    def encode(self, mel: np.ndarray) -> np.ndarray: ...


class StemCachingEncoder(Protocol):
    def encode(self, mel: np.ndarray, stem_cache: StemCache | None = None) -> np.ndarray: ...


class RowInvariantTower:
    """A live stream's view of the engine's tower: rows whose bits do not depend on how audio was batched, so
    that reusing windows and stem rows gives exactly what encoding everything again gives."""

    def __init__(self, tower: AudioTower) -> None:
        self.tower = tower

    def encode(self, mel: np.ndarray, stem_cache: StemCache | None = None) -> np.ndarray:
        return self.tower.encode(mel, stem_cache, row_invariant=True)


class WindowedEncoder:
    """The audio tower over attention windows of one growing clip, reusing unchanged windows when ``reuse``."""

    def __init__(
        self,
        tower: MelEncoder | StemCachingEncoder,
        window_frames: int,
        reuse: bool,
        stem_cache: StemCache | None = None,
    ) -> None:
        if window_frames % CHUNK_FRAMES:
            raise ValueError(f"an attention window ({window_frames} frames) must hold whole conv chunks")
        self.tower = tower
        self.window_frames = window_frames
        self.reuse = reuse
        self.stem_cache = stem_cache if reuse else None  # conv-stem rows of the open window's complete chunks
        self._windows: list[tuple[np.ndarray, np.ndarray]] = []  # (mel slice, embeddings) per complete window
        self.encoded_windows = 0  # complete windows run through the tower (for tests and benchmarks)

    def encode(self, mel: np.ndarray) -> np.ndarray:
        """Embeddings of the valid frames ``mel`` (mels, T): complete windows, then the tail."""
        n, frames = self.window_frames, mel.shape[1]
        complete = frames // n
        parts = [self._window(w, mel[:, w * n : (w + 1) * n]) for w in range(complete)]
        tail = frames - complete * n
        if tail and tail < CHUNK_FRAMES and complete:
            # Alone, a tail under one conv chunk would run the stem unpadded (the whole-clip rule); in the full
            # clip its chunk is zero-padded to 100. Encoding it behind the previous window keeps that.
            parts.append(self._encode(mel[:, (complete - 1) * n :])[audio_token_count(n) :])
        elif tail:
            parts.append(self._encode(mel[:, complete * n :]))
        del self._windows[complete:]
        return np.concatenate(parts) if len(parts) > 1 else parts[0]

    def _encode(self, mel: np.ndarray) -> np.ndarray:
        if self.stem_cache is None:
            return self.tower.encode(mel)
        return self.tower.encode(mel, stem_cache=self.stem_cache)  # type: ignore[call-arg]

    def _window(self, index: int, mel: np.ndarray) -> np.ndarray:
        if self.reuse and index < len(self._windows) and np.array_equal(self._windows[index][0], mel):
            return self._windows[index][1]
        embeddings = self._encode(mel)
        self.encoded_windows += 1
        if not self.reuse:
            return embeddings
        if index < len(self._windows):
            self._windows[index] = (mel.copy(), embeddings)
        else:
            self._windows.append((mel.copy(), embeddings))
        return embeddings


class EngineChunkDecoder:
    """Decodes stream chunks on a loaded engine's tower and thinker with one stream's prompt."""

    def __init__(
        self,
        engine: LoadedEngine,
        context: str,
        language: str,
        cache: bool = True,
        opening: Sequence[int] = (),
    ) -> None:
        """``opening``: the previous utterance's prompt tail and language header (:meth:`opening`), this one's
        first draft."""
        self.engine = engine
        self.context = context
        self.language = language
        self.cache = cache
        self.tokenizer = engine.checkpoint.tokenizer
        assert engine.tower is not None
        audio_config = engine.checkpoint.config.audio
        self.frontend = StreamingLogMel(audio_config.num_mel_bins, cache)
        self.encoder = WindowedEncoder(
            RowInvariantTower(engine.tower),
            audio_config.n_window_infer,
            cache,
            stem_cache=StemCache() if cache else None,
        )
        self._rows: np.ndarray | None = (
            None  # input rows of this decoder's last prefill (still in the KV cache?)
        )
        self.prefilled_rows = 0  # rows prefilled over the stream (for tests and benchmarks)
        # The last call's prompt past the audio and its generated ids, and the same as text: the next draft.
        # Before the first call, the previous utterance's opening: its language header, which a new answer in
        # automatic mode usually repeats (three tokens verified in one batch instead of three steps).
        self._answer_ids: list[int] = list(opening)
        self._answer_text = ""
        self._header_end = self.tokenizer.encode(ASR_TEXT_TAG)
        self.drafted = 0  # draft tokens verified over the stream (for tests and benchmarks)
        self.accepted = 0  # of those, the ones taken without a decoding step of their own

    def encode(self, text: str) -> list[int]:
        return self.tokenizer.encode(text)

    def decode(self, ids: Sequence[int]) -> str:
        return self.tokenizer.decode(ids)

    def generate(self, audio: np.ndarray, prefix: str, max_tokens: int) -> str:
        engine = self.engine
        ckpt = engine.checkpoint
        with engine.one_blas_thread():
            mel = self.frontend(audio)
        embeddings = self.encoder.encode(mel)
        prompt = build_prompt(
            self.tokenizer, ckpt.special.audio, embeddings.shape[0], self.context, self.language, prefix
        )
        budget = engine.check_room(
            len(prompt.ids),
            max_tokens,
            int(embeddings.shape[0]),
            len(self.tokenizer.encode(prefix)) if prefix else 0,
        )
        thinker = engine.thinker
        assert thinker is not None
        rows = thinker.input_rows(prompt.ids, embeddings, np.asarray(prompt.audio_positions))
        keep = self._reusable_rows(rows)
        engine.kv_owner = None  # until the prefill below has succeeded
        thinker.truncate(keep)
        thinker.prefill_rows(rows[keep:])
        self.prefilled_rows += rows.shape[0] - keep
        engine.kv_owner = self
        # With an f16 KV cache, rows that a batch under min_prefill_rows computed differ from a whole prefill's
        # (by up to 0.2 in the logits after them), so only a prefill of at least that many leaves rows to keep.
        big_enough = rows.shape[0] - keep >= thinker.min_prefill_rows
        self._rows = rows if self.cache and big_enough else None
        after_audio = [int(i) for i in prompt.ids[prompt.audio_start + prompt.audio_count :]]
        draft = self._draft(after_audio, prefix) if self.cache and thinker.verifies_drafts_exactly else []
        result = thinker.decode_greedy(budget, ckpt.special.eos, draft=draft)
        self.drafted += result.drafted
        self.accepted += result.accepted
        # Ids past the tokenizer (padding rows of a larger vocabulary) carry no text.
        ids = [i for i in result.token_ids if i < self.tokenizer.size]
        text = self.tokenizer.decode(ids, drop=engine.drop_ids)
        if self.cache:
            self._answer_ids, self._answer_text = after_audio + result.token_ids, prefix + text
        return text

    def opening(self) -> list[int]:
        """The prompt past the audio and the answer up to its language header's end (``<asr_text>``) from the
        last call (or what this decoder was opened with): a draft for the next utterance's first answer. Empty
        when no answer had a header (a forced language puts it in the prompt)."""
        ids, tag = self._answer_ids, self._header_end
        for end in range(len(tag), len(ids) + 1):
            if ids[end - len(tag) : end] == tag:
                return ids[:end]
        return []

    def successor(self) -> EngineChunkDecoder:
        """A decoder for the stream's next utterance (fresh caches), drafting this one's opening."""
        return EngineChunkDecoder(self.engine, self.context, self.language, self.cache, self.opening())

    def _draft(self, after_audio: list[int], prefix: str) -> list[int]:
        """The previous answer past this prompt's end: its own ids when this prompt's tail is a prefix of them,
        else the tokens of its text past ``prefix``; nothing when the two parted."""
        previous = self._answer_ids
        if len(previous) > len(after_audio) and previous[: len(after_audio)] == after_audio:
            return previous[len(after_audio) :]
        if len(self._answer_text) > len(prefix) and self._answer_text.startswith(prefix):
            return self.tokenizer.encode(self._answer_text[len(prefix) :])
        return []

    def _reusable_rows(self, rows: np.ndarray) -> int:
        """Leading rows whose KV entries the thinker still holds: from this decoder's previous prefill, or from
        another stream decoder's on the same engine (a new segment or a rolled window, or another stream, starts
        with the same system turn, context and audio header: only the rows from the audio on are new)."""
        owner = self.engine.kv_owner
        previous = (
            owner._rows if isinstance(owner, EngineChunkDecoder) and owner.engine is self.engine else None
        )
        if not self.cache or previous is None:
            return 0
        # At least one row is prefilled, for the logits; with an f16 KV cache at least a full attention tile,
        # or the prefilled rows would come out slightly different from a prefill of the whole prompt.
        assert self.engine.thinker is not None
        n = min(previous.shape[0], rows.shape[0] - self.engine.thinker.min_prefill_rows)
        if n <= 0:
            return 0
        same = np.all(previous[:n] == rows[:n], axis=1)
        return n if bool(same.all()) else int(np.argmin(same))
