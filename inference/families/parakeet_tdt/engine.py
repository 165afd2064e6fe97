"""The Parakeet-TDT offline engine: frontend → ggml encoder → TDT decoder → text and word timestamps.

Modes ``full_context``, ``long_form`` and ``vad`` (docs/families/parakeet_tdt.md §6, chosen in :mod:`options`); a
model folder's speech gate (:mod:`speech_gate`, §6.5) either drops the words outside the VAD's speech or decodes
VAD spans only.
Digital silence (no audio, or every sample exactly 0; per window in long-form mode) gives an empty transcript
without running the model: normalisation maps it to all-zero features, on which a model only hallucinates.
Live streams (``open_stream``): stock checkpoints run the long-form windows as audio arrives (:mod:`streaming`),
Phonon-2 the rolling phrase policy (:mod:`rolling`) and hotwords (:mod:`hotwords`). ``close()`` frees the weights.
"""

from __future__ import annotations

import logging
import math
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from threadpoolctl import ThreadpoolController

from inference.audio.live_windows import SpeechWindowGate
from inference.audio.samples import checked_samples
from inference.audio.spans import (
    LongFormWindow,
    Span,
    SpeechWindow,
    SpeechWindowPlan,
    plan_long_form_windows,
    plan_speech_windows,
    plan_vad_chunks,
    seconds_to_samples,
)
from inference.contract import (
    SAMPLE_RATE,
    CancelToken,
    Capabilities,
    JobControl,
    ProgressCallback,
    Segment,
    Timing,
    Transcript,
    Word,
)
from inference.errors import BackendError, UsageError
from inference.families.parakeet_tdt.checkpoint import ParakeetCheckpoint, open_parakeet_checkpoint
from inference.families.parakeet_tdt.config import ParakeetConfig
from inference.families.parakeet_tdt.decoder import (
    DecoderState,
    DecoderWeights,
    TokenBias,
    TokenStep,
)
from inference.families.parakeet_tdt.decoder_ggml import make_decoder
from inference.families.parakeet_tdt.encoder import ParakeetEncoder
from inference.families.parakeet_tdt.frontend import compute_features
from inference.families.parakeet_tdt.hotwords import (
    Hotword,
    HotwordBias,
    PieceVocabulary,
    check_strength,
    resolve_terms,
)
from inference.families.parakeet_tdt.offline_job import ParakeetOfflineJob
from inference.families.parakeet_tdt.options import (
    DecodeMode,
    RequestSettings,
    SessionSettings,
    choose_mode,
)
from inference.families.parakeet_tdt.rolling import RollingStream
from inference.families.parakeet_tdt.speech_gate import SpeechGate, tokens_near_speech, tokens_of_window
from inference.families.parakeet_tdt.streaming import BufferedStream
from inference.families.parakeet_tdt.text import (
    ParakeetTokenizer,
    default_word_timestamps,
    token_duration_word_timestamps,
)
from inference.families.parakeet_tdt.types import SpanDecode
from inference.family import EngineRequest
from inference.native import Backend, open_backend

log = logging.getLogger(__name__)

VAD_MERGE_GAP_SEC = 0.5
VAD_PADDING_SEC = 0.25
TOKENS_PER_FRAME_BUDGET = (
    10  # docs/families/parakeet_tdt.md §5: the default budget is 10 tokens per encoder frame
)
MIB = 1 << 20


@dataclass(frozen=True)
class Decoded:
    mode: DecodeMode
    spans: list[
        SpanDecode
    ]  # full context / long form: one span over the clip (none for silence); vad: per span
    n_samples: int


class ParakeetEngine:
    family = "parakeet_tdt"

    def __init__(self, checkpoint: ParakeetCheckpoint, backend: Backend, session: SessionSettings) -> None:
        """Loads everything it needs from ``checkpoint``, which the caller may close afterwards."""
        config = checkpoint.config
        self.config: ParakeetConfig = config
        self.session = session
        self.backend = backend
        self.tokenizer = ParakeetTokenizer(
            checkpoint.tokenizer_json, config, f"{checkpoint.source} tokenizer.json"
        )
        if session.perf_mode == "flash_attention":
            # The relative-position scores are added before the softmax, which ggml's fused kernel cannot take
            # here yet; the standard path gives the same result, only without the fused speed-up.
            log.warning(
                "perf_mode=flash_attention is not available for Parakeet-TDT yet; using standard attention"
            )
        self.encoder = ParakeetEncoder(
            backend,
            checkpoint.tensors,
            checkpoint.tensors,
            config.encoder,
            weight_type=session.weight_type,
            conv_weight_type=session.conv_weight_type,
            graph_arena_mb=session.encoder_graph_arena_mb,
        )
        try:
            check_weight_budget(self.encoder.weights.buffer_bytes, session.weight_context_mb)
            self.decoder = make_decoder(
                DecoderWeights.from_checkpoint(checkpoint.tensors, config),
                config,
                backend,
                session.weight_type,
            )
        except BaseException:
            self.encoder.close()
            raise
        self.samples_per_frame = config.samples_per_frame
        self.seconds_per_frame = self.samples_per_frame / SAMPLE_RATE
        self._punctuation = frozenset(config.punctuation_token_ids)
        # Phonon-2 is recognised by its token-duration timestamps (docs/families/parakeet_tdt.md §7.1: the converter's variant key
        # is not public; the older marker is this flag): it adds hotwords and the rolling live policy.
        self.is_phonon = config.word_timestamp_mode == "token_duration"
        self._vocabulary: PieceVocabulary | None = None
        self._biases: dict[tuple[tuple[Hotword, ...], float], HotwordBias] = {}
        # Limits numpy's BLAS threads where one is enough (the mel product in encode_frames).
        self._blas = ThreadpoolController()
        self._vad: Any = None  # SileroVad, created on the first VAD request
        self.speech_gate: SpeechGate | None = checkpoint.speech_gate
        self.capabilities = Capabilities(
            streaming=True,
            snapshots=True,
            word_timestamps=True,
            hotwords=self.is_phonon,
            context=self.is_phonon,  # the context text stands in for hotwords
            streams_per_engine=8,
            speech_gate=self.speech_gate is not None,
        )

    # ------------------------------------------------------------------------------------ public API
    def transcribe(
        self,
        audio: np.ndarray,
        *,
        progress: ProgressCallback | None = None,
        cancel: CancelToken | None = None,
        **request_options: Any,
    ) -> Transcript:
        """Offline transcription; ``cancel`` is checked and ``progress`` reported between windows/spans."""
        started = time.perf_counter()
        request = RequestSettings.from_options(request_options)
        decoded = self._decode(audio, request, JobControl(progress, cancel))
        transcript = self.render_transcript(
            decoded.mode, decoded.spans, decoded.n_samples, request.keep_language_tags
        )
        transcript.timing = Timing(decoded.n_samples / SAMPLE_RATE, time.perf_counter() - started)
        return transcript

    def decode(self, audio: np.ndarray, **request_options: Any) -> Decoded:
        """The raw greedy result (token ids with frames and durations, per decoded span), before text."""
        return self._decode(audio, RequestSettings.from_options(request_options), JobControl())

    def open_offline_job(
        self,
        *,
        progress: ProgressCallback | None = None,
        cancel: CancelToken | None = None,
        **request_options: Any,
    ) -> ParakeetOfflineJob:
        """``transcribe`` of a file fed in blocks, holding only what the next window needs (offline_job.py)."""
        return ParakeetOfflineJob(self, request_options, JobControl(progress, cancel))

    def open_stream(self, **request_options: Any) -> BufferedStream | RollingStream:
        """A live stream: Phonon-2's rolling phrases (docs/families/parakeet_tdt.md §7.4), else buffered long-form windows (§6.4)."""
        request = RequestSettings.from_options(request_options)
        bias = self.token_bias(request)
        if self.is_phonon:
            return RollingStream(self, request, bias)
        return BufferedStream(self, request, bias)

    def speech_window_gate(self) -> SpeechWindowGate | None:
        """The window plan of a speech gate that decodes windows, for a live stream that decodes the same
        windows (``inference/streaming_windows.py``); None for any other model."""
        gate = self.speech_gate
        if gate is None or gate.method != "windows":
            return None
        # How far past its window a word's midpoint can lie: its last token's duration reaches past the audio.
        reach = max(*self.config.durations, 1) * self.samples_per_frame // 2 + self.samples_per_frame
        plan = SpeechWindowPlan(
            seconds_to_samples(gate.max_span_sec),
            seconds_to_samples(gate.merge_gap_sec),
            seconds_to_samples(gate.padding_sec),
            reach,
        )
        path = Path(self.session.vad_model_path) if self.session.vad_model_path else None
        return SpeechWindowGate(plan, path)

    def transcribe_speech_window(
        self, audio: np.ndarray, window: SpeechWindow, **request_options: Any
    ) -> Transcript:
        """One window of the speech gate's plan decoded exactly as the offline pass decodes it (``audio`` holds
        the samples of ``window.window``); word times count from the window's start."""
        started = time.perf_counter()
        gate = self.speech_gate
        if gate is None or gate.method != "windows":
            raise UsageError(
                "this model's speech gate does not decode speech windows", "transcribe the audio"
            )
        request = RequestSettings.from_options(request_options)
        samples = _mono_16k(audio)
        if samples.size != window.window.length:
            raise UsageError(f"a speech window of {window.window.length} samples got {samples.size}")
        offset = window.window.start
        local = SpeechWindow(
            Span(0, samples.size),
            Span(window.zone.start - offset, window.zone.end - offset),
            Span(window.speech.start - offset, window.speech.end - offset),
        )
        budget = request.max_tokens or None
        result = self.decode_full_context(samples, local.window, budget, self.token_bias(request))
        margin = seconds_to_samples(gate.margin_sec or 0.0)
        kept = tokens_of_window(
            result.tokens, self.tokenizer.starts_word, local, self.samples_per_frame, margin
        )
        decoded = Decoded(DecodeMode.VAD, [SpanDecode(local.window, kept)], samples.size)
        transcript = self._transcript(decoded, request.keep_language_tags)
        if self.is_phonon:
            transcript.language = "en"
        transcript.timing = Timing(samples.size / SAMPLE_RATE, time.perf_counter() - started)
        return transcript

    def close(self) -> None:
        self.decoder.close()
        self.encoder.close()
        self.backend.close()
        self._vad = None

    def __enter__(self) -> ParakeetEngine:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------------------------ decoding
    def token_bias(self, request: RequestSettings) -> HotwordBias | None:
        """The hotword automaton of a request (Phonon-2), or None when nothing is biased."""
        if not self.is_phonon:
            if (request.hotwords or "").strip() or request.context.strip():
                raise UsageError(
                    "hotwords (and the context that stands in for them) are a Phonon-2 feature; "
                    "this is a stock Parakeet-TDT checkpoint",
                    "remove the hotwords/context options or load a Phonon-2 model",
                )
            return None
        terms = resolve_terms(request.hotwords, request.context)
        strength = check_strength(request.hotwords_score)
        if not terms or strength == 0.0:
            return None
        key = (tuple(terms), strength)
        bias = self._biases.get(key)
        if bias is None:
            if self._vocabulary is None:
                pieces = [self.tokenizer.piece(i) for i in range(self.config.vocab_size)]
                self._vocabulary = PieceVocabulary(
                    pieces, {self.config.blank_token_id, self.config.pad_token_id}
                )
            bias = HotwordBias(terms, self._vocabulary, self.config.blank_token_id, strength)
            if len(self._biases) >= 8:  # live sessions reuse a handful of lists; don't grow without bound
                self._biases.pop(next(iter(self._biases)))
            self._biases[key] = bias
        return bias

    def _decode(self, audio: np.ndarray, request: RequestSettings, control: JobControl) -> Decoded:
        bias = self.token_bias(request)
        samples = _mono_16k(audio)
        limit = self.encoder.full_context_samples(self.config.features.hop_length)
        # The gate applies to "auto" only; a caller whose own VAD found this speech (speech_checked) skips it.
        gate = None if request.speech_checked or request.audio_chunk_mode != "auto" else self.speech_gate
        mode = choose_mode(
            samples.size, self.session, request, limit, gate is not None and gate.method != "words"
        )
        log.debug("parakeet_tdt: %d samples, mode %s", samples.size, mode.value)
        budget = request.max_tokens or None
        margin = None if gate is None else gate.margin_sec
        speech = (
            self._speech(samples)
            if samples.any() and (mode is DecodeMode.VAD or margin is not None)
            else None
        )
        if not samples.any() or speech == []:
            spans: list[SpanDecode] = []
        elif gate is not None and gate.method == "windows" and speech is not None:
            spans = self._decode_windows(samples, speech, gate, budget, control, bias)
        elif mode is DecodeMode.VAD and speech is not None:
            spans = self._decode_vad(samples, speech, request, budget, control, bias)
        elif mode is DecodeMode.LONG_FORM:
            spans = [self._decode_long_form(samples, budget, control, bias)]
        else:
            control.step(0, 1)
            spans = [self.decode_full_context(samples, Span(0, samples.size), budget, bias)]
        if speech is not None and margin is not None and gate is not None and gate.method != "windows":
            spans = [self._near_speech(span, speech, seconds_to_samples(margin)) for span in spans]
        control.step(samples.size / SAMPLE_RATE, samples.size / SAMPLE_RATE)
        return Decoded(mode, spans, samples.size)

    def encode_frames(self, samples: np.ndarray) -> np.ndarray:
        """Encoder output (valid frames only) of one stretch of mono 16 kHz samples."""
        # One BLAS thread for the mel product: a second one would wake numpy's OpenBLAS worker, which then spins
        # for ~0.1 s on a core that ggml's threads need for the encoder (tests/bench/README.md, "Parakeet on
        # 2-10 s clips"); the product is small enough for one thread.
        with self._blas.limit(limits=1, user_api="blas"):
            features = compute_features(samples, self.config.features)
        return self.encoder.encode(features.values, features.valid_frames).hidden

    def greedy(
        self,
        frames: np.ndarray,
        state: DecoderState | None,
        frame_offset: int,
        max_tokens: int | None,
        bias: TokenBias | None = None,
    ) -> tuple[list[TokenStep], DecoderState]:
        """Greedy TDT over encoder frames, continuing ``state`` (None: a fresh decoder)."""
        projected = self.decoder.project_encoder(frames)  # one matmul: BLAS threads help here
        return self.decoder.decode(
            projected, state, frame_offset=frame_offset, max_tokens=max_tokens, bias=bias
        )

    def decode_full_context(
        self, samples: np.ndarray, span: Span, budget: int | None, bias: TokenBias | None = None
    ) -> SpanDecode:
        """One span in one encoder pass from a fresh decoder; token frames count from ``span.start``."""
        audio = samples[span.start : span.end]
        if (budget is not None and budget <= 0) or not audio.any():
            return SpanDecode(span, [])
        frames = self.encode_frames(audio)
        if frames.shape[0] == 0:
            return SpanDecode(span, [])
        tokens, _state = self.greedy(frames, None, 0, budget, bias)
        return SpanDecode(span, tokens)

    def _decode_long_form(
        self, samples: np.ndarray, budget: int | None, control: JobControl, bias: TokenBias | None
    ) -> SpanDecode:
        n = samples.size
        session = self.session
        windows = plan_long_form_windows(
            n,
            seconds_to_samples(session.center_sec),
            seconds_to_samples(session.left_context_sec),
            seconds_to_samples(session.right_context_sec),
            hop_length=self.config.features.hop_length,
        )
        remaining = budget if budget is not None else self.long_form_budget(n)
        state: DecoderState | None = None
        tokens: list[TokenStep] = []
        for window in windows:
            control.step(window.window.start / SAMPLE_RATE, n / SAMPLE_RATE)
            if remaining <= 0:
                break
            window_samples = samples[window.window.start : window.window.end]
            got, state = self.decode_long_form_window(window_samples, window, state, remaining, bias)
            tokens.extend(got)
            remaining -= len(got)
        log.debug("long-form: %d windows, %d tokens", len(windows), len(tokens))
        return SpanDecode(Span(0, n), tokens)

    def long_form_budget(self, n_samples: int) -> int:
        return TOKENS_PER_FRAME_BUDGET * math.ceil(n_samples / self.samples_per_frame)

    def decode_long_form_window(
        self,
        window_samples: np.ndarray,
        window: LongFormWindow,
        state: DecoderState | None,
        remaining: int,
        bias: TokenBias | None,
    ) -> tuple[list[TokenStep], DecoderState | None]:
        """One long-form window (``window_samples`` are the samples of ``window.window``), continuing ``state``."""
        if window.kept_frames <= 0 or not window_samples.any():
            return (
                [],
                state,
            )  # digital silence carries no information (see the module doc); streams skip it too
        frames = self.encode_frames(window_samples)
        kept = frames[window.keep_start : min(window.keep_end, frames.shape[0])]
        if kept.shape[0] == 0:
            return [], state
        return self.greedy(kept, state, window.frame_offset, remaining, bias)

    def _decode_vad(
        self,
        samples: np.ndarray,
        speech: list[Span],
        request: RequestSettings,
        budget: int | None,
        control: JobControl,
        bias: TokenBias | None,
    ) -> list[SpanDecode]:
        spans = self.plan_vad_spans(speech, samples.size, request)
        decoded: list[SpanDecode] = []
        for span in spans:  # each span from a fresh decoder state; the token budget spans the request
            control.step(span.start / SAMPLE_RATE, samples.size / SAMPLE_RATE)
            if budget is not None and budget <= 0:
                break
            result = self.decode_full_context(samples, span, budget, bias)
            if budget is not None:
                budget -= len(result.tokens)
            decoded.append(result)
        log.debug("vad: %d spans", len(spans))
        return decoded

    def plan_vad_spans(self, speech: list[Span], n_samples: int, request: RequestSettings) -> list[Span]:
        """The VAD chunks decoded in mode ``vad``."""
        gate = self.speech_gate
        chunk_sec = request.vad_chunk_sec or (gate.max_span_sec if gate else self.session.center_sec)
        if gate is not None and gate.method != "spans":
            gate = None  # its padding and merge gap are for its own windows, not for plain VAD spans
        max_full_context_sec = self.config.encoder.max_position_embeddings * self.seconds_per_frame
        if chunk_sec >= max_full_context_sec:
            raise UsageError(
                f"audio_chunk_duration_sec={chunk_sec:g} is too long for VAD spans decoded in full context "
                f"(the encoder attends to at most {max_full_context_sec:.0f} s)",
                "use a shorter audio_chunk_duration_sec",
            )
        return plan_vad_chunks(
            speech,
            n_samples,
            seconds_to_samples(chunk_sec),
            merge_gap_samples=seconds_to_samples(gate.merge_gap_sec if gate else VAD_MERGE_GAP_SEC),
            padding_samples=seconds_to_samples(gate.padding_sec if gate else VAD_PADDING_SEC),
        )

    def _decode_windows(
        self,
        samples: np.ndarray,
        speech: list[Span],
        gate: SpeechGate,
        budget: int | None,
        control: JobControl,
        bias: TokenBias | None,
    ) -> list[SpanDecode]:
        """Each group of speech decoded in full context with its padding; only its own words are kept."""
        windows = plan_speech_windows(
            speech,
            samples.size,
            seconds_to_samples(gate.max_span_sec),
            merge_gap_samples=seconds_to_samples(gate.merge_gap_sec),
            padding_samples=seconds_to_samples(gate.padding_sec),
        )
        margin = seconds_to_samples(gate.margin_sec or 0.0)
        decoded: list[SpanDecode] = []
        for window in windows:
            control.step(window.window.start / SAMPLE_RATE, samples.size / SAMPLE_RATE)
            if budget is not None and budget <= 0:
                break
            result = self.decode_full_context(samples, window.window, budget, bias)
            kept = tokens_of_window(
                result.tokens, self.tokenizer.starts_word, window, self.samples_per_frame, margin
            )
            if budget is not None:
                budget -= len(result.tokens)
            decoded.append(SpanDecode(window.window, kept))
        log.debug("speech windows: %d", len(windows))
        return decoded

    def _speech(self, samples: np.ndarray) -> list[Span]:
        """The Silero VAD's speech segments of the clip (one VAD pass)."""
        from inference.audio.vad import speech_segments

        if self._vad is None:
            self._vad = self.new_vad()
        return [Span(segment.start, segment.end) for segment in speech_segments(samples, self._vad)]

    def new_vad(self) -> Any:
        """A Silero VAD of this model's settings (a ``SileroVad``; onnxruntime is imported only for VAD)."""
        from inference.audio.vad import SileroVad

        return SileroVad(Path(self.session.vad_model_path) if self.session.vad_model_path else None)

    def near_speech(self, decoded: SpanDecode, speech: list[Span], margin: int) -> SpanDecode:
        return self._near_speech(decoded, speech, margin)

    def render_transcript(
        self, mode: DecodeMode, spans: list[SpanDecode], n_samples: int, keep_language_tags: bool
    ) -> Transcript:
        """The transcript of decoded spans, as ``transcribe`` builds it (without its timing)."""
        transcript = self._transcript(Decoded(mode, spans, n_samples), keep_language_tags)
        if self.is_phonon:
            transcript.language = "en"  # Phonon-2 is English only
        return transcript

    def _near_speech(self, decoded: SpanDecode, speech: list[Span], margin: int) -> SpanDecode:
        """``decoded`` without the words that lie more than ``margin`` samples outside the VAD's speech."""
        offset = decoded.span.start  # token frames count from the span's start
        local = [Span(s.start - offset, s.end - offset) for s in speech]
        kept = tokens_near_speech(
            decoded.tokens, self.tokenizer.starts_word, local, self.samples_per_frame, margin
        )
        return SpanDecode(decoded.span, kept)

    # ------------------------------------------------------------------------------------ text
    def _transcript(self, decoded: Decoded, keep_language_tags: bool) -> Transcript:
        token_ids = [t.token_id for span in decoded.spans for t in span.tokens]
        if decoded.mode is not DecodeMode.VAD:
            if not decoded.spans:
                return Transcript(text="", token_ids=token_ids)
            text, words = self.render(decoded.spans[0], keep_language_tags)
            return Transcript(text=text, words=words, token_ids=token_ids)
        texts: list[str] = []
        words = []
        segments: list[Segment] = []
        for span in decoded.spans:
            text, span_words = self.render(span, keep_language_tags)
            text = text.strip()
            if not text:
                continue
            offset, end = span.span.start / SAMPLE_RATE, span.span.end / SAMPLE_RATE
            # Clamped to the span (the last frame may reach past it), so words of the next span never overlap.
            shifted = [w.shifted(offset, limit=end) for w in span_words]
            texts.append(text)
            words.extend(shifted)
            segments.append(Segment(text, offset, end, tuple(shifted)))
        return Transcript(text=" ".join(texts), words=words, segments=segments, token_ids=token_ids)

    def render(self, decoded: SpanDecode, keep_language_tags: bool) -> tuple[str, list[Word]]:
        """Text and words of one span; word times count from the span's start."""
        ids = [t.token_id for t in decoded.tokens]
        text = self.tokenizer.decode(ids, keep_language_tags=keep_language_tags)
        n = decoded.span.length
        if self.config.word_timestamp_mode == "token_duration":
            words = token_duration_word_timestamps(
                decoded.tokens, self.tokenizer, self._punctuation, n / SAMPLE_RATE, self.seconds_per_frame
            )
        else:
            end_frame = -(-n // self.samples_per_frame)
            words = default_word_timestamps(decoded.tokens, self.tokenizer, end_frame, self.seconds_per_frame)
        return text, words


def check_weight_budget(used_bytes: int, limit_mb: int) -> None:
    """``weight_context_mb`` is the user's upper bound for weight memory (the decoder is small and not counted)."""
    if used_bytes > limit_mb * MIB:
        raise BackendError(
            f"the encoder weights need {used_bytes / MIB:.1f} MiB, more than weight_context_mb={limit_mb}",
            "raise --session-option weight_context_mb or pick a smaller weight_type (f16, q8_0)",
        )


def _mono_16k(audio: np.ndarray) -> np.ndarray:
    # The contract: engines refuse NaN/Inf (file decoding already replaced them) and non-mono audio.
    return np.ascontiguousarray(checked_samples(audio, "Parakeet-TDT", convert=True))


def create_engine(request: EngineRequest) -> ParakeetEngine:
    session = SessionSettings.from_options(request.session_options)
    with open_parakeet_checkpoint(request.model_path) as checkpoint:
        backend = open_backend(request.backend, request.threads)
        try:
            return ParakeetEngine(checkpoint, backend, session)
        except BaseException:
            backend.close()
            raise
