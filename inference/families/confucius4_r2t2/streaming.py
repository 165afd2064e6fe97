"""A ``contract.Stream`` over the LSP state machine: input checks, chunking, events and the final flush.

Pushed samples collect in a buffer; the complete chunks (``chunk_size_ms``) a push brings move to the accumulated
audio and the push decodes all of it once: one decode per chunk for pushes of at most a chunk, one decode for a
backlog that arrives as one push (catch-up, docs/families/confucius4_r2t2.md §7.2). ``finish`` decodes a
leftover tail shorter than one chunk with the fixed final rollback, publishes no delta, and returns the running
text as the authoritative transcript (docs/families/confucius4_r2t2.md §7).

Events: a :class:`Delta` per growth of the committed text, then a :class:`Snapshot` holding the running text past
the committed text (the provisional words a caption view shows after it; empty when the running text no longer
starts with the committed text), sent whenever it changes and after every delta. Times are seconds from the
start of the stream: both span the segment start to the end of the audio decoded (word times are not known).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from inference.audio.io import checked_samples
from inference.contract import (
    SAMPLE_RATE,
    Delta,
    ResumePoint,
    Segment,
    Snapshot,
    StreamEvent,
    Timing,
    Transcript,
)
from inference.errors import UsageError
from inference.families.confucius4_r2t2.lsp import ChunkDecoder, LspRecognizer, StreamOptions
from inference.families.confucius4_r2t2.postprocess import ASR_TEXT_TAG
from inference.families.confucius4_r2t2.prompt import PromptOverflow

SEGMENT_ID = 0  # one segment until endpointing splits the stream


class R2T2Stream:
    """Live LSP captions of one speaker. Not thread-safe: one caller pushes, in order."""

    def __init__(
        self,
        decoder: ChunkDecoder,
        options: StreamOptions,
        forced_language: str = "",
        max_samples: int | None = None,
        rolling_samples: int | None = None,
        decoder_factory: Callable[[], ChunkDecoder] | None = None,
        auto_roll: bool = False,
    ) -> None:
        self.options = options
        self.recognizer = LspRecognizer(decoder, options, forced_language)
        self.max_samples = max_samples  # the audio tower's limit on accumulated audio (None: unchecked)
        # Rolling window: keep at most this much audio, dropping the oldest half (and its text) when it is full.
        self.rolling_samples = rolling_samples
        # Without a window: roll only when the audio tower's limit or the thinker context is reached (endless).
        self.auto_roll = auto_roll
        self._decoder_factory = decoder_factory  # a fresh decoder after a cut (its caches hold the old audio)
        self._dropped_samples = 0
        self._dropped_text = ""  # committed text of the dropped audio
        self._chunk = options.chunk_samples
        self._buffer: list[np.ndarray] = []
        self._buffered = 0
        self._accum: list[np.ndarray] = []
        self._accum_samples = 0
        self._undecoded = 0  # the newest accumulated samples, not decoded yet (a backlog's, during its push)
        self._closed = False
        self._model_wall_s = 0.0
        self._snapshot = ""

    # ------------------------------------------------------------------ contract.Stream
    def push(self, pcm: np.ndarray) -> list[StreamEvent]:
        if self._closed:
            raise UsageError("push after finish or cancel", "open a new stream")
        samples = _checked(pcm)
        if samples.size:
            self._buffer.append(samples.copy())
            self._buffered += samples.size
        whole = self._buffered // self._chunk * self._chunk
        if not whole:
            return []
        # Catch-up: every whole chunk of the push joins the audio, then ONE decode reads it all (a decode costs
        # about the same whatever it adds). A live source pushes at most a chunk at a time, so this is one
        # decode per chunk while the machine keeps up; a backlog the client coalesced is one decode.
        audio = self._take(whole)
        events: list[StreamEvent] = []
        for start in range(0, whole, self._chunk):  # chunk by chunk: a window rolls where it did before
            if self._undecoded and self._roll_due(self._chunk):
                # A roll drops committed text with its audio: first the text must cover the audio held.
                events += self._decode_events()
            self._move_to_accum(audio[start : start + self._chunk])
            self._undecoded += self._chunk
        return events + self._decode_events()

    def _decode_events(self) -> list[StreamEvent]:
        outcome = self._decode(final=False, new_chunks=self._undecoded // self._chunk)
        end_s = (self._dropped_samples + self._accum_samples) / SAMPLE_RATE
        language = outcome.language or None
        events: list[StreamEvent] = []
        if outcome.delta:
            events.append(Delta(outcome.delta, SEGMENT_ID, 0.0, end_s, language))
        tail = provisional_tail(outcome.text, self.recognizer.committed)
        if outcome.delta or tail != self._snapshot:
            events.append(Snapshot(tail, SEGMENT_ID, 0.0, end_s, language))
            self._snapshot = tail
        return events

    def finish(self) -> Transcript:
        if self._closed:
            raise UsageError("the stream was already finished or cancelled", "open a new stream")
        self._closed = True
        if self._buffered:
            self._move_to_accum(self._take(self._buffered))
            self._decode(final=True)
        rec = self.recognizer
        total_s = (self._dropped_samples + self._accum_samples) / SAMPLE_RATE
        text = self._dropped_text + rec.text
        return Transcript(
            text=text,
            language=rec.language or None,
            segments=[Segment(text, 0.0, total_s)] if text else [],
            timing=Timing(total_s, self._model_wall_s),
        )

    def cancel(self) -> None:
        self._closed = True
        self._buffer, self._accum = [], []
        self._buffered = self._accum_samples = 0

    # ------------------------------------------------------------------ contract.Resumable
    def resume_point(self) -> ResumePoint:
        """The rolling window's start; its decoded chunks prime a replacement with this recognizer's state, so the
        replacement's deltas continue the text (segment 0 goes on); its final text covers the window again."""
        rec = self.recognizer
        return ResumePoint(self._dropped_samples, self._accum_samples, rec.checkpoint(), True, rec.committed)

    def resume(self, context: np.ndarray, state: Mapping[str, Any]) -> None:
        samples = _checked(context)
        if samples.size:
            self._accum, self._accum_samples = [samples.copy()], samples.size
        self.recognizer.resume_from(dict(state))

    # ------------------------------------------------------------------ internals
    @property
    def decode_calls(self) -> int:
        return self.recognizer.decode_calls

    def _take(self, count: int) -> np.ndarray:
        joined = np.concatenate(self._buffer) if len(self._buffer) > 1 else self._buffer[0]
        head, rest = joined[:count], joined[count:]
        self._buffer = [rest] if rest.size else []
        self._buffered = rest.size
        return head

    def _roll_due(self, samples: int) -> bool:
        """Whether adding ``samples`` makes ``_move_to_accum`` roll the window."""
        total = self._accum_samples + samples
        if self.rolling_samples is not None and total > self.rolling_samples:
            return True
        full = self.max_samples is not None and total > self.max_samples
        return full and self.auto_roll and self._accum_samples >= 2 * self._chunk

    def _move_to_accum(self, samples: np.ndarray) -> None:
        if self.rolling_samples is not None and self._accum_samples + samples.size > self.rolling_samples:
            self._roll()
        full = self.max_samples is not None and self._accum_samples + samples.size > self.max_samples
        if full and self.auto_roll and self._accum_samples >= 2 * self._chunk:
            self._roll()
        total = self._accum_samples + samples.size
        if self.max_samples is not None and total > self.max_samples:
            self._closed = True
            raise UsageError(
                f"the stream holds {total / SAMPLE_RATE:.2f} s of audio, more than the audio tower's limit of "
                f"{self.max_samples / SAMPLE_RATE:.2f} s for one utterance",
                "finish the stream before that and open a new one",
            )
        self._accum.append(samples)
        self._accum_samples = total

    def _roll(self) -> None:
        """Drop the oldest half of the window (of the audio held, without one) and the committed text estimated
        to belong to it."""
        audio = np.concatenate(self._accum) if len(self._accum) > 1 else self._accum[0]
        if self.rolling_samples is not None:
            drop = self.rolling_samples // 2
        else:
            drop = min(audio.size, max(self._chunk, audio.size // 2 // self._chunk * self._chunk))
        # Audio no decode has read yet has no text to drop with.
        drop = min(drop, audio.size - self._undecoded)
        rec = self.recognizer
        # Without word times, the running text (which covers all the audio) is split in proportion to time;
        # only committed text can be dropped, cut at a word boundary where there is one.
        committed = rec.committed
        cut = min(len(committed), round(len(rec.text) * drop / audio.size))
        space = committed.find(" ", cut)
        cut = space if space != -1 else cut
        kept = committed[cut:].lstrip()
        self._dropped_text += committed[: len(committed) - len(kept)]
        self._dropped_samples += drop
        self._accum = [audio[drop:]]
        self._accum_samples = audio.size - drop
        rec.restart_from(kept, self._decoder_factory() if self._decoder_factory else None)

    def _decode(self, final: bool, new_chunks: int = 1):  # -> ChunkOutcome
        started = time.perf_counter()
        while True:
            if len(self._accum) > 1:
                self._accum = [np.concatenate(self._accum)]
            try:
                outcome = self.recognizer.decode_chunk(self._accum[0], final, new_chunks=new_chunks)
                break
            except PromptOverflow:
                # Audio and text so far fill the thinker context: go on with the newer half (never below 2 chunks).
                decoded = self._accum_samples - self._undecoded  # a roll drops only audio a decode has read
                rollable = self.auto_roll or self.rolling_samples
                if not rollable or self._accum_samples < 2 * self._chunk or decoded < self._chunk:
                    raise
                self._roll()
        self._model_wall_s += time.perf_counter() - started
        self._undecoded = 0
        return outcome


def provisional_tail(text: str, committed: str) -> str:
    """The running text past the committed text, without tags; "" when the running text no longer starts with it."""
    return text[len(committed) :].replace(ASR_TEXT_TAG, "") if text.startswith(committed) else ""


def _checked(pcm: np.ndarray) -> np.ndarray:
    return checked_samples(pcm)
