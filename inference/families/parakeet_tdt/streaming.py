"""Buffered live streaming for stock Parakeet-TDT (docs/families/parakeet_tdt.md §6.4).

The stream runs exactly the long-form schedule on audio as it arrives, so a whole file streamed gives the
long-form offline result token for token. The whole stream is segment 0: :class:`Delta` commits everything
before the last word (which may still gain pieces), :class:`Snapshot` shows the last word plus a look-ahead
decode of the right context already encoded. Audio older than ``next center − left context`` is dropped, so
memory stays bounded on endless streams.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from inference.audio.io import checked_samples
from inference.audio.spans import LongFormWindow, Span, encoder_valid_frames, seconds_to_samples
from inference.contract import SAMPLE_RATE, Delta, ResumePoint, Snapshot, StreamEvent, Timing, Transcript
from inference.errors import UsageError
from inference.families.parakeet_tdt.decoder import DecoderState, TokenBias, TokenStep
from inference.families.parakeet_tdt.options import RequestSettings
from inference.families.parakeet_tdt.text import WORD_MARK
from inference.families.parakeet_tdt.types import LoadedEngine, SpanDecode
from inference.resume_state import floats_to_text, text_to_floats

SUBSAMPLING_STAGES = 3  # factor 8, enforced by the config parser


def center_window(
    cs: int, n_samples: int, center: int, left: int, right: int, frame_offset: int, hop_length: int = 160
) -> LongFormWindow:
    """The long-form window of the center starting at ``cs`` when ``n_samples`` exist (``plan_long_form_windows``).

    Only the clipping at the end depends on ``n_samples``: a window whose right context has fully arrived
    is the same whatever follows it.
    """
    samples_per_frame = hop_length << SUBSAMPLING_STAGES
    ce = min(cs + center, n_samples)
    ws, we = max(0, cs - left), min(n_samples, ce + right)
    valid = encoder_valid_frames(we - ws, hop_length, SUBSAMPLING_STAGES)
    keep_start = (cs - ws) // samples_per_frame
    keep_end = max(keep_start, min(valid, -(-(ce - ws) // samples_per_frame)))
    return LongFormWindow(Span(cs, ce), Span(ws, we), keep_start, keep_end, frame_offset)


def check_pcm(pcm: np.ndarray, sample_rate: int, start_sample: int | None, received: int) -> np.ndarray:
    """The misuse checks every Parakeet stream makes on a pushed chunk (docs/families/parakeet_tdt.md §6.4, §7.4)."""
    if sample_rate != SAMPLE_RATE:
        raise UsageError(
            f"Parakeet-TDT streams take {SAMPLE_RATE} Hz audio, got a chunk at {sample_rate} Hz",
            "resample first (inference.audio.io.to_mono_16k)",
        )
    samples = checked_samples(pcm)
    if start_sample is not None and start_sample != received:
        what = "a gap" if start_sample > received else "an overlap"
        raise UsageError(
            f"the chunk starts at sample {start_sample} but {received} samples were received: {what} in the audio",
            "push contiguous audio; open a new stream after a dropout",
        )
    return samples


def encode_decoder_state(state: DecoderState) -> dict[str, Any]:
    """The decoder's state as JSON values, float32 bits exactly (a resume point carries it to a replacement in
    another process, which must decode the same tokens)."""
    return {
        "shape": list(state.h.shape),
        "h": floats_to_text(state.h),
        "c": floats_to_text(state.c),
        "pred": None if state.pred is None else [list(state.pred.shape), floats_to_text(state.pred)],
        "emitted": state.emitted,
        "bias_state": state.bias_state,
    }


def decode_decoder_state(data: Mapping[str, Any]) -> DecoderState:
    shape = tuple(int(n) for n in data["shape"])
    pred = data.get("pred")
    return DecoderState(
        _text_array(str(data["h"]), shape),
        _text_array(str(data["c"]), shape),
        None if pred is None else _text_array(str(pred[1]), tuple(int(n) for n in pred[0])),
        int(data.get("emitted", 0)),
        int(data.get("bias_state", 0)),
    )


def _text_array(text: str, shape: tuple[int, ...]) -> np.ndarray:
    values = text_to_floats(text)
    if values.size != int(np.prod(shape)):
        raise UsageError(
            f"a resume point's decoder state holds {values.size} values where {shape} needs {int(np.prod(shape))}",
            "resume from the point the stream gave for this model",
        )
    return values.reshape(shape)


@dataclass(frozen=True)
class _Window:
    plan: LongFormWindow
    frames: np.ndarray | None  # encoder output of the whole window; None when it was not encoded


class BufferedStream:
    """A ``contract.Stream`` over a stock Parakeet-TDT engine. Not thread-safe: one caller pushes, in order."""

    def __init__(self, engine: LoadedEngine, request: RequestSettings, bias: TokenBias | None = None) -> None:
        if request.audio_chunk_mode not in ("auto", "fixed"):
            raise UsageError(
                f"audio_chunk_mode={request.audio_chunk_mode} does not apply to a live stream "
                "(it always decodes buffered long-form windows)",
                "leave audio_chunk_mode at auto",
            )
        self._engine = engine
        self._request = request
        self._bias = bias
        session = engine.session
        self._center = seconds_to_samples(session.center_sec)
        self._left = seconds_to_samples(session.left_context_sec)
        self._right = seconds_to_samples(session.right_context_sec)
        self._hop = engine.config.features.hop_length
        self._seconds_per_frame = engine.seconds_per_frame
        self._buffer = np.zeros(0, np.float32)
        self._buffer_start = 0  # absolute index of _buffer[0]
        self._received = 0
        self._next_cs = 0
        self._frame_offset = 0
        self._state: DecoderState | None = None
        self._remaining: int | None = request.max_tokens or None  # None: 10 per frame, as each window decodes
        self._tokens: list[TokenStep] = []
        self._split = 0  # tokens before this index are committed
        self._anchor = 0  # the commit point before ``_split`` (or 0): the events decode the text from there
        self._snapshot = ""  # the tail shown last (nothing at the start)
        self._wall_s = 0.0
        self._closed = False

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
        self._buffer = np.concatenate([self._buffer, samples])
        self._received += samples.size
        last: _Window | None = None
        while self._received >= self._next_cs + self._center + self._right:
            last = self._run_window(self._received)
        events = self._events(last) if last is not None else []
        self._wall_s += time.perf_counter() - started
        return events

    def finish(self) -> Transcript:
        self._check_open()
        self._closed = True
        started = time.perf_counter()
        while self._next_cs < self._received:
            self._run_window(self._received)
        engine = self._engine
        text, words = engine.render(
            SpanDecode(Span(0, self._received), self._tokens), self._request.keep_language_tags
        )
        self._buffer = np.zeros(0, np.float32)
        self._wall_s += time.perf_counter() - started
        return Transcript(
            text=text,
            words=words,
            token_ids=[t.token_id for t in self._tokens],
            timing=Timing(self._received / SAMPLE_RATE, self._wall_s),
        )

    def cancel(self) -> None:
        self._closed = True
        self._buffer = np.zeros(0, np.float32)

    @property
    def received_samples(self) -> int:
        return self._received

    # ------------------------------------------------------------------ contract.Resumable
    def resume_point(self) -> ResumePoint:
        """The start of the next center's window, with the decoder's state and the tokens not yet committed: a
        replacement continues the same window schedule from there, so it encodes the same windows and decodes
        the same tokens as this stream would have (a schedule restarted elsewhere sees other windows and may
        change a word)."""
        samples_per_frame = self._hop << SUBSAMPLING_STAGES
        start = self._next_cs - min(self._left, self._next_cs)
        base = start // samples_per_frame  # the replacement counts frames from its own first sample
        state: dict[str, Any] = {
            "remaining": self._remaining,
            "frame_offset": self._frame_offset - base,
            "pending": [[t.token_id, t.frame - base, t.duration] for t in self._tokens[self._split :]],
            "decoder": None if self._state is None else encode_decoder_state(self._state),
            "snapshot": self._snapshot,
        }
        return ResumePoint(start, self._next_cs - start, state)

    def resume(self, context: np.ndarray, state: Mapping[str, Any]) -> None:
        """Take ``context`` as the left context of the next center, which starts right after it, and carry on
        with the dead stream's decoder state and uncommitted tokens."""
        self._buffer = checked_samples(context).copy()
        self._buffer_start = 0
        self._received = self._next_cs = self._buffer.size
        remaining = state.get("remaining")
        self._remaining = None if remaining is None else int(remaining)
        if "frame_offset" not in state:  # a point from before any audio
            return
        self._frame_offset = int(state["frame_offset"])
        self._tokens = [
            TokenStep(int(i), int(frame), int(duration)) for i, frame, duration in state["pending"]
        ]
        decoder = state.get("decoder")
        self._state = None if decoder is None else decode_decoder_state(decoder)
        self._snapshot = str(state.get("snapshot", ""))

    # ------------------------------------------------------------------ windows
    def _check_open(self) -> None:
        if self._closed:
            raise UsageError("this stream was already finished or cancelled", "open a new stream")

    def _run_window(self, n_samples: int) -> _Window:
        """Decode the next center's window as if the stream had ``n_samples`` samples; drop audio it no longer needs."""
        plan = center_window(
            self._next_cs, n_samples, self._center, self._left, self._right, self._frame_offset, self._hop
        )
        self._next_cs = plan.center.end
        self._frame_offset += plan.kept_frames
        frames = None
        budget_left = self._remaining is None or self._remaining > 0
        if plan.kept_frames > 0 and budget_left:
            audio = self._buffer[
                plan.window.start - self._buffer_start : plan.window.end - self._buffer_start
            ]
            if audio.any():  # digital silence is skipped, as in the offline long-form path
                frames = self._engine.encode_frames(audio)
                kept = frames[plan.keep_start : min(plan.keep_end, frames.shape[0])]
                if kept.shape[0]:
                    got, self._state = self._engine.greedy(
                        kept, self._state, plan.frame_offset, self._remaining, self._bias
                    )
                    self._tokens.extend(got)
                    if self._remaining is not None:
                        self._remaining -= len(got)
        drop = max(0, self._next_cs - self._left - self._buffer_start)
        if drop:
            self._buffer = self._buffer[drop:].copy()
            self._buffer_start += drop
        return _Window(plan, frames)

    def _lookahead(self, window: _Window) -> list[TokenStep]:
        """Tokens of the right-context frames the last window encoded, decoded from a copy of the state."""
        if window.frames is None or self._state is None:
            return []
        extra = window.frames[window.plan.keep_end :]
        if extra.shape[0] == 0 or (self._remaining is not None and self._remaining <= 0):
            return []
        got, _ = self._engine.greedy(
            extra, self._state.copy(), self._frame_offset, self._remaining, self._bias
        )
        return got

    # ------------------------------------------------------------------ events
    def _word_start(self, tokens: list[TokenStep]) -> int:
        """Index of the token that opens the last word (0 if none does): what precedes it is final."""
        tok = self._engine.tokenizer
        keep = self._request.keep_language_tags
        for i in range(len(tokens) - 1, -1, -1):
            t = tokens[i].token_id
            if tok.is_text_token(t, keep) and tok.piece(t).startswith(WORD_MARK):
                return i
        return 0

    def _events(self, window: _Window) -> list[StreamEvent]:
        tok, keep = self._engine.tokenizer, self._request.keep_language_tags
        spf = self._seconds_per_frame
        split = self._word_start(self._tokens)
        # The text is decoded from the commit point before the last one (``_anchor``), not from the stream's start:
        # everything before it is committed and never changes, and a word-start piece after the anchor renders
        # as inside the text (and, never a byte piece, ends any byte sequence before it), so the texts from there
        # are the tails of the whole stream's. Decoding everything cost each window more the longer the stream
        # ran (tests/bench/README.md, "Figures behind code comments": 23 ms after 4 hours of speech).
        anchor = self._anchor

        def text(tokens: list[TokenStep]) -> str:
            return tok.decode([t.token_id for t in tokens], keep_language_tags=keep)

        committed_before = text(self._tokens[anchor : self._split])
        committed = text(self._tokens[anchor:split])
        events: list[StreamEvent] = []
        if len(committed) > len(committed_before):
            # Cutting before a word-start piece keeps the decoded text a prefix (no byte pieces are split).
            assert committed.startswith(committed_before), (committed_before, committed)
            start = self._tokens[self._split].frame * spf if self._split < split else None
            end = self._tokens[split].frame * spf if split < len(self._tokens) else None
            events.append(Delta(committed[len(committed_before) :], 0, start, end))
        if split > self._split:
            self._anchor = self._split
        self._split = split
        shown = self._tokens[anchor:] + self._lookahead(window)
        full = text(shown)
        tail = full[len(committed) :] if full.startswith(committed) else ""
        if tail != self._snapshot or events:
            tail_start = shown[split - anchor].frame * spf if split - anchor < len(shown) else None
            events.append(Snapshot(tail, 0, tail_start, window.plan.window.end / SAMPLE_RATE))
            self._snapshot = tail
        return events
