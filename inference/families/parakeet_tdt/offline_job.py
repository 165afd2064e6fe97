"""Parakeet-TDT's offline pass over a file whose audio arrives in blocks (``contract.OfflineJob``), in memory
that does not grow with the file.

Two passes over the same audio. The first counts the samples, notes whether any is not digital silence and,
when the plan needs it, runs the Silero VAD frame by frame (its per-frame probabilities are all it keeps). The
second plans exactly what ``ParakeetEngine.transcribe`` plans for a clip of that length and speech (the same
planners: full context, long-form windows, VAD chunks, speech-gate windows) and decodes each window as soon as
its audio has arrived, keeping only the samples from the next window's start on (``ArrivingAudio``). Each
window is decoded as ``engine.py`` decodes it, so the transcript is the whole-clip transcript
(tests/parakeet_tdt/test_offline_job.py checks that on the fixtures and long synthetic audio).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from inference.audio.spans import (
    LongFormWindow,
    Span,
    SpeechWindow,
    plan_long_form_windows,
    plan_speech_windows,
    seconds_to_samples,
)
from inference.contract import SAMPLE_RATE, JobControl, Timing, Transcript
from inference.errors import UsageError
from inference.families.parakeet_tdt.decoder import DecoderState, TokenStep
from inference.families.parakeet_tdt.options import DecodeMode, RequestSettings, choose_mode
from inference.families.parakeet_tdt.speech_gate import tokens_of_window
from inference.families.parakeet_tdt.types import SpanDecode
from inference.offline_jobs import ArrivingAudio

if TYPE_CHECKING:
    from inference.audio.vad import SileroVad

_ZEROS = np.zeros(1 << 16, np.float32)  # leading digital silence fed to the VAD in pieces of this size


class _SpeechPass:
    """The first pass's VAD: Silero's probabilities of the clip's 512-sample frames from a fresh state, the
    last partial frame zero-padded (``SileroVad.frame_probabilities``). Leading digital silence is only
    counted, and fed to the VAD once other audio follows: a file of nothing but zeros never runs it."""

    def __init__(self, vad: SileroVad) -> None:
        self.vad = vad
        self.vad.reset()
        self.fed = 0
        self._leading_zeros = 0
        self._heard = False
        self._probabilities: list[np.ndarray] = []

    def feed(self, pcm: np.ndarray) -> None:
        if not self._heard:
            if not pcm.any():
                self._leading_zeros += pcm.size
                return
            self._heard = True
            for start in range(0, self._leading_zeros, _ZEROS.size):
                self._push(_ZEROS[: min(_ZEROS.size, self._leading_zeros - start)])
        self._push(pcm)

    def probabilities(self) -> np.ndarray:
        from inference.audio.vad import FRAME_SAMPLES

        if self._heard and self.fed % FRAME_SAMPLES:
            self._push(_ZEROS[: FRAME_SAMPLES - self.fed % FRAME_SAMPLES])
        self.vad.reset()
        return np.concatenate(self._probabilities) if self._probabilities else np.zeros(0, np.float32)

    def _push(self, pcm: np.ndarray) -> None:
        self.fed += pcm.size
        self._probabilities.append(self.vad.push(pcm))


class PlanningEngine(Protocol):
    """What the job needs of ``ParakeetEngine`` (engine.py): its settings and the steps of its ``_decode``."""

    session: Any
    config: Any
    encoder: Any
    tokenizer: Any
    speech_gate: Any
    samples_per_frame: int

    def token_bias(self, request: RequestSettings) -> Any: ...

    def new_vad(self) -> Any: ...

    def plan_vad_spans(self, speech: list[Span], n_samples: int, request: RequestSettings) -> list[Span]: ...

    def long_form_budget(self, n_samples: int) -> int: ...

    def decode_long_form_window(
        self,
        window_samples: np.ndarray,
        window: LongFormWindow,
        state: DecoderState | None,
        remaining: int,
        bias: Any,
    ) -> tuple[list[TokenStep], DecoderState | None]: ...

    def decode_full_context(
        self, samples: np.ndarray, span: Span, budget: int | None, bias: Any = None
    ) -> SpanDecode: ...

    def near_speech(self, decoded: SpanDecode, speech: list[Span], margin: int) -> SpanDecode: ...

    def render_transcript(
        self, mode: DecodeMode, spans: list[SpanDecode], n_samples: int, keep_language_tags: bool
    ) -> Transcript: ...


@dataclass
class _LongForm:
    remaining: int
    state: DecoderState | None = None


class ParakeetOfflineJob:
    passes = 2

    def __init__(self, engine: PlanningEngine, request_options: dict[str, Any], control: JobControl) -> None:
        self.engine = engine
        self.request = RequestSettings.from_options(request_options)
        self.control = control
        self.bias = engine.token_bias(self.request)
        request, session = self.request, engine.session
        # As ``ParakeetEngine._decode``: the gate applies to "auto" requests whose speech nobody checked yet.
        self.gate = (
            None if request.speech_checked or request.audio_chunk_mode != "auto" else engine.speech_gate
        )
        self.vad_spans = self.gate is not None and self.gate.method != "words"
        self.margin = None if self.gate is None else self.gate.margin_sec
        needs_speech = choose_mode(0, session, request, None, self.vad_spans) is DecodeMode.VAD
        self._speech_pass = _SpeechPass(engine.new_vad()) if needs_speech or self.margin is not None else None
        self.n_samples = 0
        self.any_sound = False
        self.speech: list[Span] | None = None
        self.mode = DecodeMode.FULL_CONTEXT
        self._pass = 1
        self._steps: list[Any] = []  # LongFormWindow | Span | SpeechWindow, in order of their audio
        self._next = 0
        self._stopped = False  # the token budget ran out: the rest is not decoded
        self._audio = ArrivingAudio()
        self._decoded: list[SpanDecode] = []
        self._long_form: _LongForm | None = None
        self._tokens: list[TokenStep] = []
        self._budget = request.max_tokens or None
        self._wall_s = 0.0

    # ------------------------------------------------------------------ contract.OfflineJob
    def feed(self, pcm: np.ndarray) -> None:
        started = time.perf_counter()
        if self.control.cancel is not None:
            self.control.cancel.check()
        if self._pass == 1:
            self.n_samples += pcm.size
            self.any_sound = self.any_sound or bool(pcm.any())
            if self._speech_pass is not None:
                self._speech_pass.feed(pcm)
        elif self._pass == 2:
            if self._audio.end + pcm.size > self.n_samples:
                raise UsageError("the second pass over the audio was longer than the first")
            self._audio.append(pcm)
            self._run_ready()
        else:
            raise UsageError("audio after the job's last pass")
        self._wall_s += time.perf_counter() - started

    def end_pass(self) -> None:
        started = time.perf_counter()
        if self._pass == 1:
            self._plan()
        elif self._pass == 2:
            if self._audio.end != self.n_samples:
                raise UsageError("the second pass over the audio was shorter than the first")
            self._run_ready()
        self._pass += 1
        self._wall_s += time.perf_counter() - started

    def finish(self) -> Transcript:
        if self._pass <= self.passes:
            raise UsageError("a job finished before its audio ended")
        started = time.perf_counter()
        engine, n = self.engine, self.n_samples
        spans = self._decoded
        if self._long_form is not None:
            spans = [SpanDecode(Span(0, n), self._tokens)]
        gate, margin = self.gate, self.margin
        if self.speech is not None and margin is not None and gate is not None and gate.method != "windows":
            spans = [engine.near_speech(span, self.speech, seconds_to_samples(margin)) for span in spans]
        self.control.step(n / SAMPLE_RATE, n / SAMPLE_RATE)
        transcript = engine.render_transcript(self.mode, spans, n, self.request.keep_language_tags)
        self._wall_s += time.perf_counter() - started
        transcript.timing = Timing(n / SAMPLE_RATE, self._wall_s)
        return transcript

    # ------------------------------------------------------------------ planning (engine.py's _decode)
    def _plan(self) -> None:
        engine, request, n = self.engine, self.request, self.n_samples
        speech: list[Span] | None = None
        if self._speech_pass is not None and self.any_sound:
            from inference.audio.vad import segments_from_probabilities

            found = segments_from_probabilities(self._speech_pass.probabilities(), n)
            speech = [Span(segment.start, segment.end) for segment in found]
        limit = engine.encoder.full_context_samples(engine.config.features.hop_length)
        self.mode = choose_mode(n, engine.session, request, limit, self.vad_spans)
        gate = self.gate
        if self.any_sound and (self.mode is DecodeMode.VAD or self.margin is not None):
            self.speech = speech
        if not self.any_sound or self.speech == []:
            self._steps = []
        elif gate is not None and gate.method == "windows" and self.speech is not None:
            self._steps = plan_speech_windows(
                self.speech,
                n,
                seconds_to_samples(gate.max_span_sec),
                merge_gap_samples=seconds_to_samples(gate.merge_gap_sec),
                padding_samples=seconds_to_samples(gate.padding_sec),
            )
        elif self.mode is DecodeMode.VAD and self.speech is not None:
            self._steps = engine.plan_vad_spans(self.speech, n, request)
        elif self.mode is DecodeMode.LONG_FORM:
            session = engine.session
            self._steps = plan_long_form_windows(
                n,
                seconds_to_samples(session.center_sec),
                seconds_to_samples(session.left_context_sec),
                seconds_to_samples(session.right_context_sec),
                hop_length=engine.config.features.hop_length,
            )
            remaining = self._budget
            if remaining is None:
                remaining = engine.long_form_budget(n)
            self._long_form = _LongForm(remaining)
        else:
            self.control.step(0, 1)
            self._steps = [Span(0, n)]
        self._audio.forget_before(self._needed_from())

    # ------------------------------------------------------------------ decoding as audio arrives
    def _needed_from(self) -> int:
        if self._stopped or self._next >= len(self._steps):
            return self.n_samples
        return _audio_span(self._steps[self._next]).start

    def _run_ready(self) -> None:
        while not self._stopped and self._next < len(self._steps):
            step = self._steps[self._next]
            if _audio_span(step).end > self._audio.end:
                break
            self._run(step)
            self._next += 1
        self._audio.forget_before(self._needed_from())

    def _run(self, step: LongFormWindow | Span | SpeechWindow) -> None:
        engine, n = self.engine, self.n_samples
        span = _audio_span(step)
        total = n / SAMPLE_RATE
        if isinstance(step, LongFormWindow):
            assert self._long_form is not None
            self.control.step(span.start / SAMPLE_RATE, total)
            if self._long_form.remaining <= 0:
                self._stopped = True
                return
            got, self._long_form.state = engine.decode_long_form_window(
                self._audio.read(span.start, span.end),
                step,
                self._long_form.state,
                self._long_form.remaining,
                self.bias,
            )
            self._tokens.extend(got)
            self._long_form.remaining -= len(got)
            return
        if isinstance(step, SpeechWindow) or self.mode is DecodeMode.VAD:
            self.control.step(span.start / SAMPLE_RATE, total)
            if self._budget is not None and self._budget <= 0:
                self._stopped = True
                return
        audio = self._audio.read(span.start, span.end)
        result = engine.decode_full_context(audio, Span(0, span.length), self._budget, self.bias)
        if self._budget is not None and (isinstance(step, SpeechWindow) or self.mode is DecodeMode.VAD):
            self._budget -= len(result.tokens)
        if isinstance(step, SpeechWindow):
            gate = self.gate
            assert gate is not None
            margin = seconds_to_samples(gate.margin_sec or 0.0)
            kept = tokens_of_window(
                result.tokens, engine.tokenizer.starts_word, step, engine.samples_per_frame, margin
            )
            self._decoded.append(SpanDecode(span, kept))
        else:
            self._decoded.append(SpanDecode(span, result.tokens))


def _audio_span(step: LongFormWindow | Span | SpeechWindow) -> Span:
    if isinstance(step, LongFormWindow | SpeechWindow):
        return step.window
    return step
