"""Phonon-2's rolling live policy (docs/families/parakeet_tdt.md §7.4, ``phonon_streaming.cpp``).

50 ms blocks are judged voiced against the open phrase's peak; a phrase commits after 700 ms without voice
or at 30 s, and snapshots re-decode it every 500 ms. Snapshots are bounded to the last
``snapshot_window_sec`` seconds (a project decision: a whole-phrase re-decode costs more the longer the
speaker talks; figures: tests/bench/README.md, "Figures behind code comments"); commits always decode the whole
phrase, so deltas and the final text do not depend on that option. Events: one ``segment_id`` per phrase,
:class:`Snapshot` replacing the phrase's hypothesis, then :class:`Delta` and :class:`SpeechEnd` on commit.
``max_tokens`` (when set) is shared by the whole stream.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

import numpy as np

from inference.audio.spans import Span
from inference.contract import (
    SAMPLE_RATE,
    Delta,
    ResumePoint,
    Segment,
    Snapshot,
    SpeechEnd,
    StreamEvent,
    Timing,
    Transcript,
    Word,
)
from inference.errors import UsageError
from inference.families.parakeet_tdt.decoder import TokenBias, TokenStep
from inference.families.parakeet_tdt.options import RequestSettings
from inference.families.parakeet_tdt.streaming import check_pcm
from inference.families.parakeet_tdt.types import LoadedEngine, SpanDecode

BLOCK = 800  # 50 ms
FIRST_SNAPSHOT = 5600  # 350 ms
SNAPSHOT_EVERY = 8000  # 500 ms
COMMIT_SILENCE = 11200  # 700 ms
SEGMENT_CAP = 480000  # 30 s
KEEP_UNVOICED = 16000  # 1 s kept when an unvoiced segment reaches the cap
GATE_FLOOR = 0.004
GATE_PEAK_SHARE = 0.18
LANGUAGE = "en"


class RollingStream:
    """A ``contract.Stream`` over a Phonon-2 engine. Not thread-safe: one caller pushes, in order."""

    def __init__(self, engine: LoadedEngine, request: RequestSettings, bias: TokenBias | None) -> None:
        self._engine = engine
        self._request = request
        self._bias = bias
        self._pending = np.zeros(0, np.float32)  # samples short of a whole block
        self._received = 0
        self._blocks: list[np.ndarray] = []
        self._segment_len = 0
        self._segment_start = 0  # absolute sample index of the segment's first sample
        self._reset_segment()
        self._segment_id = 0
        self._committed = ""
        self._committed_tokens = 0
        self._token_ids: list[int] = []
        self._words: list[Word] = []
        self._segments: list[Segment] = []
        self._wall_s = 0.0
        self._closed = False

    def _reset_segment(self) -> None:
        self._segment_start += self._segment_len
        self._blocks = []
        self._segment_len = 0
        self._peak = 0.0
        self._voiced = False
        self._last_voice = 0  # segment length at the end of its last voiced block
        self._next_snapshot = FIRST_SNAPSHOT
        self._snapshot: str | None = None  # the open segment's snapshot text, None before the first
        self._hypothesis: list[
            TokenStep
        ] = []  # the last snapshot's tokens; frames count from the segment start

    # ------------------------------------------------------------------ contract.Stream
    def push(
        self, pcm: np.ndarray, *, sample_rate: int = SAMPLE_RATE, start_sample: int | None = None
    ) -> list[StreamEvent]:
        """Feed samples; ``sample_rate`` and ``start_sample`` (optional) are checked against the stream."""
        self._check_open()
        samples = check_pcm(pcm, sample_rate, start_sample, self._received)
        if samples.size == 0:
            return []
        started = time.perf_counter()
        self._received += samples.size
        # Own copy: the segment keeps these blocks, and callers may reuse their buffer after the push.
        buffered = np.concatenate([self._pending, samples]) if self._pending.size else samples.copy()
        whole = buffered.size // BLOCK * BLOCK
        events: list[StreamEvent] = []
        for start in range(0, whole, BLOCK):
            events.extend(self._block(buffered[start : start + BLOCK]))
        self._pending = buffered[whole:].copy()
        self._wall_s += time.perf_counter() - started
        return events

    def finish(self) -> Transcript:
        """Feeds the partial block, commits a voiced segment, and returns everything committed."""
        self._check_open()
        self._closed = True
        started = time.perf_counter()
        if self._pending.size:
            self._block(self._pending)
            self._pending = np.zeros(0, np.float32)
        if self._voiced:
            self._commit()
        self._blocks = []
        self._wall_s += time.perf_counter() - started
        return Transcript(
            text=self._committed,
            language=LANGUAGE,
            words=list(self._words),
            segments=list(self._segments),
            token_ids=list(self._token_ids),
            timing=Timing(self._received / SAMPLE_RATE, self._wall_s),
        )

    def cancel(self) -> None:
        self._closed = True
        self._blocks = []
        self._pending = np.zeros(0, np.float32)

    # ------------------------------------------------------------------ contract.Resumable
    def resume_point(self) -> ResumePoint:
        """The open phrase's first sample: phrases before it are committed, and the gate's peak is per phrase."""
        return ResumePoint(self._segment_start, state={"committed_tokens": self._committed_tokens})

    def resume(self, context: np.ndarray, state: Mapping[str, Any]) -> None:
        self._committed_tokens = int(state.get("committed_tokens", 0))  # max_tokens is shared by the stream

    def _check_open(self) -> None:
        if self._closed:
            raise UsageError("this stream was already finished or cancelled", "open a new stream")

    # ------------------------------------------------------------------ the policy
    def _block(self, block: np.ndarray) -> list[StreamEvent]:
        self._blocks.append(block)
        self._segment_len += block.size
        rms = float(np.sqrt(np.mean(np.square(block, dtype=np.float64))))
        self._peak = max(self._peak, rms)
        if rms > max(GATE_FLOOR, GATE_PEAK_SHARE * self._peak):
            self._voiced = True
            self._last_voice = self._segment_len
        if self._voiced and self._segment_len - self._last_voice >= COMMIT_SILENCE:
            return self._commit()
        if self._segment_len >= SEGMENT_CAP:
            if self._voiced:
                return self._commit()
            self._trim()
            return []
        if self._voiced and self._segment_len >= self._next_snapshot:
            self._next_snapshot = self._segment_len + SNAPSHOT_EVERY
            return self._snapshot_event()
        return []

    def _trim(self) -> None:
        """An unvoiced segment at the cap keeps only its last second; the segment start moves up."""
        audio = np.concatenate(self._blocks)
        drop = audio.size - KEEP_UNVOICED
        self._blocks = [audio[drop:].copy()]
        self._segment_start += drop
        self._segment_len = KEEP_UNVOICED
        self._last_voice = max(0, self._last_voice - drop)
        self._hypothesis = []

    def _budget(self, used: int = 0) -> int | None:
        max_tokens = self._request.max_tokens
        return max_tokens - self._committed_tokens - used if max_tokens > 0 else None

    def _decode(self) -> SpanDecode:
        audio = np.concatenate(self._blocks)
        return self._engine.decode_full_context(audio, Span(0, audio.size), self._budget(), self._bias)

    def _snapshot_tokens(self) -> list[TokenStep]:
        """The open phrase's provisional tokens: a whole-phrase decode, or, past the snapshot window, the
        earlier snapshot up to the cut followed by a decode of the window's tail (see the module doc)."""
        frame = self._engine.samples_per_frame
        window = round(self._request.snapshot_window_sec * SAMPLE_RATE) // frame * frame
        if window <= 0 or self._segment_len <= window or not self._hypothesis:
            return list(self._decode().tokens)
        start = (self._segment_len - window) // frame * frame
        context_end = (start + window // 2) // frame  # frames before this only serve as left context
        is_word_start = self._engine.tokenizer.starts_word
        kept_words_end = next(  # the previous hypothesis is kept up to its first word starting at the cut
            (
                i
                for i, t in enumerate(self._hypothesis)
                if t.frame >= context_end and is_word_start(t.token_id)
            ),
            len(self._hypothesis),
        )
        left = self._budget(kept_words_end)
        if left is not None and left <= 0:
            return list(self._hypothesis[:kept_words_end])
        audio = np.concatenate(self._blocks)[start:]
        # No budget inside the window: tokens of its context half are dropped, so it applies after the cut.
        fresh = self._engine.decode_full_context(audio, Span(0, audio.size), None, self._bias).tokens
        offset = start // frame
        fresh = [TokenStep(t.token_id, t.frame + offset, t.duration) for t in fresh]
        cut = next(
            (i for i, t in enumerate(fresh) if t.frame >= context_end and is_word_start(t.token_id)), None
        )
        if cut is None:  # nothing new starts after the context: the earlier hypothesis stands
            return list(self._hypothesis)
        tail = fresh[cut:] if left is None else fresh[cut : cut + left]
        return self._hypothesis[:kept_words_end] + tail

    def _times(self) -> tuple[float, float]:
        return self._segment_start / SAMPLE_RATE, (self._segment_start + self._segment_len) / SAMPLE_RATE

    def _snapshot_event(self) -> list[StreamEvent]:
        self._hypothesis = self._snapshot_tokens()
        ids = [t.token_id for t in self._hypothesis]
        hypothesis = self._engine.tokenizer.decode(ids, keep_language_tags=self._request.keep_language_tags)
        text = (" " if self._committed and hypothesis else "") + hypothesis
        if text == (self._snapshot or ""):
            return []
        self._snapshot = text
        start, end = self._times()
        return [Snapshot(text, self._segment_id, start, end, LANGUAGE)]

    def _commit(self) -> list[StreamEvent]:
        decoded = self._decode()
        text, words = self._engine.render(decoded, self._request.keep_language_tags)
        start, end = self._times()
        segment_id = self._segment_id
        events: list[StreamEvent] = []
        text = text.strip()
        self._committed_tokens += len(decoded.tokens)
        self._token_ids.extend(t.token_id for t in decoded.tokens)
        if text:
            piece = (" " if self._committed else "") + text
            self._committed += piece
            shifted = tuple(w.shifted(start) for w in words)
            self._words.extend(shifted)
            self._segments.append(Segment(text, start, end, shifted))
            events.append(Delta(piece, segment_id, start, end, LANGUAGE))
        if text or self._snapshot is not None:
            events.append(SpeechEnd(segment_id, start, end, text, LANGUAGE))
            self._segment_id += 1
        self._reset_segment()
        return events
