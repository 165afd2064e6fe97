"""A ``contract.Stream`` over the LSP state machine: input checks, chunking, events and the final flush.

Pushed samples collect in a buffer; every complete chunk (``chunk_size_ms``) moves to the accumulated audio and
triggers one decode of all of it. ``finish`` decodes a leftover tail shorter than one chunk with the fixed final
rollback, publishes no delta, and returns the running text as the authoritative transcript (families.md §1.7).

Events: a :class:`Delta` per growth of the committed text, then a :class:`Snapshot` holding the running text past
the committed text (the provisional words a caption view shows after it; empty when the running text no longer
starts with the committed text), sent whenever it changes and after every delta. Times are seconds from the
start of the stream: both span the segment start to the end of the audio decoded (word times are not known).
"""

from __future__ import annotations

import time

import numpy as np

from inference.contract import SAMPLE_RATE, Delta, Segment, Snapshot, StreamEvent, Timing, Transcript
from inference.errors import UsageError
from inference.families.confucius4_r2t2.lsp import ChunkDecoder, LspRecognizer, StreamOptions
from inference.families.confucius4_r2t2.postprocess import ASR_TEXT_TAG

SEGMENT_ID = 0  # one segment until endpointing splits the stream


class R2T2Stream:
    """Live LSP captions of one speaker. Not thread-safe: one caller pushes, in order."""

    def __init__(
        self,
        decoder: ChunkDecoder,
        options: StreamOptions,
        forced_language: str = "",
        max_samples: int | None = None,
    ) -> None:
        self.options = options
        self.recognizer = LspRecognizer(decoder, options, forced_language)
        self.max_samples = max_samples  # the audio tower's limit on accumulated audio (None: unchecked)
        self._chunk = options.chunk_samples
        self._buffer: list[np.ndarray] = []
        self._buffered = 0
        self._accum: list[np.ndarray] = []
        self._accum_samples = 0
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
        events: list[StreamEvent] = []
        while self._buffered >= self._chunk:
            self._move_to_accum(self._take(self._chunk))
            outcome = self._decode(final=False)
            end_s, language = self._accum_samples / SAMPLE_RATE, outcome.language or None
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
        total_s = self._accum_samples / SAMPLE_RATE
        return Transcript(
            text=rec.text,
            language=rec.language or None,
            segments=[Segment(rec.text, 0.0, total_s)] if rec.text else [],
            timing=Timing(total_s, self._model_wall_s),
        )

    def cancel(self) -> None:
        self._closed = True
        self._buffer, self._accum = [], []
        self._buffered = self._accum_samples = 0

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

    def _move_to_accum(self, samples: np.ndarray) -> None:
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

    def _decode(self, final: bool):  # -> ChunkOutcome
        if len(self._accum) > 1:
            self._accum = [np.concatenate(self._accum)]
        started = time.perf_counter()
        outcome = self.recognizer.decode_chunk(self._accum[0], final)
        self._model_wall_s += time.perf_counter() - started
        return outcome


def provisional_tail(text: str, committed: str) -> str:
    """The running text past the committed text, without tags; "" when the running text no longer starts with it."""
    return text[len(committed) :].replace(ASR_TEXT_TAG, "") if text.startswith(committed) else ""


def _checked(pcm: np.ndarray) -> np.ndarray:
    samples = np.asarray(pcm)
    if samples.ndim != 1 or samples.dtype != np.float32:
        raise UsageError(
            f"a stream takes 1-D float32 samples at {SAMPLE_RATE} Hz, got {samples.dtype} {samples.shape}",
            "convert and resample first (inference.audio.io.to_mono_16k)",
        )
    if not np.isfinite(samples).all():
        raise UsageError("the audio holds NaN or infinite samples", "check the audio source")
    return samples
