"""The confucius4_r2t2 engine: offline transcription of Qwen3-ASR / Confucius4-R2T2 checkpoints.

Offline (docs/families/confucius4_r2t2.md §6): consecutive 30 s spans, each frontend → audio tower (ggml) →
prompt → thinker prefill and greedy decoding; non-empty span texts are joined with one space. One thinker
context serves every span and every stream chunk (its KV cache is cleared in between).

Live: ``open_stream`` returns an :class:`~inference.families.confucius4_r2t2.streaming.R2T2Stream`
(Longest-Stable-Prefix, docs/families/confucius4_r2t2.md §7); its options default to the session options and may
be overridden per stream. The tower reads safetensors or GGUF package tensors in place; the thinker runs from a
llama.cpp GGUF written next to the model (``tower_weight_type`` / ``thinker_weight_type`` pick each half's storage).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from threadpoolctl import ThreadpoolController

from inference.audio.samples import checked_samples
from inference.contract import (
    SAMPLE_RATE,
    CancelToken,
    Capabilities,
    JobControl,
    ProgressCallback,
    Segment,
    Timing,
    Transcript,
)
from inference.errors import ModelError, UsageError
from inference.families.confucius4_r2t2.audio_tower import AudioTower
from inference.families.confucius4_r2t2.checkpoint import R2T2Checkpoint, load_checkpoint
from inference.families.confucius4_r2t2.chunk_decoder import EngineChunkDecoder, max_stream_samples
from inference.families.confucius4_r2t2.endpointing import EndpointedStream, EndpointOptions
from inference.families.confucius4_r2t2.frontend import log_mel
from inference.families.confucius4_r2t2.languages import resolve_language, supported_languages
from inference.families.confucius4_r2t2.lsp import StreamOptions
from inference.families.confucius4_r2t2.offline_job import R2T2Spans
from inference.families.confucius4_r2t2.options import RequestSettings, SessionSettings
from inference.families.confucius4_r2t2.postprocess import parse_asr_output, truncate_at_pipe
from inference.families.confucius4_r2t2.prompt import PromptOverflow, build_prompt
from inference.families.confucius4_r2t2.spans import join_span_texts, plan_offline_spans
from inference.families.confucius4_r2t2.streaming import R2T2Stream
from inference.families.confucius4_r2t2.thinker import GreedyResult, Thinker, ThinkerOptions
from inference.family import EngineRequest
from inference.models.spec import FamilySpec, load_family_spec
from inference.native import Backend, open_backend
from inference.offline_jobs import ConsecutiveWindowsJob

log = logging.getLogger(__name__)

FAMILY = "confucius4_r2t2"
# Prompt (~30 tokens + context) + 390 audio tokens per 30 s span + the default 512-token budget fit in 2048;
# KV memory at the 1.7B shape is 28 x 2 x 1024 x 2048 x 2 bytes (f16) = 235 MB, twice that for f32.
THINKER_CONTEXT = 2048
# Every chunk re-decodes the open tower window and the text after it (~45-60 prefilled rows however short the
# chunk), so a CPU's cost per audio second falls as the chunk grows: on 2 Zen 5 cores a 0.6B q4_k decode takes
# ~0.27 s at the median but p95 0.36 s, just over a 320 ms chunk, and the 1.7B's 0.8 s is over a 640 ms one; at
# 1000 ms both q4_k shapes keep up (push p95 496 / 933 ms over 10 minutes; tests/bench/README.md, "Qwen-sized
# words, a segment's header drafted"; on 2 Zen 4 cores only the 0.6B does, "A bf16 tower by default"), and
# committed text comes no later than at 640 ms. Streams on the CPU backend take this unless the session names
# chunk_size_ms.
CPU_CHUNK_MS = 1000.0
# A live push re-runs the open tower window's layers; on a CPU with AVX512-BF16 bf16 matrices cost less than q8_0
# ones (the default package's) and less than native bf16 promoted to f32, and are closer to the checkpoint than
# q8_0 (tests/bench/README.md, "A bf16 tower by default"). Elsewhere bf16 products are emulated: native stays.
CPU_BF16_TOWER = "bf16"


def cpu_defaults(backend: Backend, named: Mapping[str, object]) -> dict[str, object]:
    """The session options a CPU backend gets unless the session names them (CPU_CHUNK_MS, CPU_BF16_TOWER)."""
    if not backend.is_cpu:
        return {}
    defaults: dict[str, object] = {}
    if "chunk_size_ms" not in named:
        defaults["chunk_size_ms"] = CPU_CHUNK_MS
    if "tower_weight_type" not in named and backend.has_bf16_dot():
        defaults["tower_weight_type"] = CPU_BF16_TOWER
    return defaults


@dataclass(frozen=True)
class SpanResult:
    start_s: float
    end_s: float
    language: str
    text: str
    token_ids: list[int]
    eos_id: int | None


class R2T2Engine:
    """Owns the backend, the audio tower and the thinker of one checkpoint (close it)."""

    family = FAMILY

    def __init__(self, request: EngineRequest, spec: FamilySpec | None = None) -> None:
        self.spec = spec or load_family_spec(FAMILY)
        self.session = SessionSettings.from_options(self.spec, dict(request.session_options))
        self.checkpoint: R2T2Checkpoint = load_checkpoint(request.model_path)
        self.languages = supported_languages(self.checkpoint.config.support_languages)
        self.backend: Backend = open_backend(request.backend, threads=request.threads)
        named = dict(request.session_options)
        defaults = cpu_defaults(self.backend, self.spec.validate_session_options(dict(named)))
        self.session = SessionSettings.from_options(self.spec, {**defaults, **named})
        self.session_options = self.session.values
        self.tower: AudioTower | None = None
        self.thinker: Thinker | None = None
        try:
            self.tower = AudioTower(
                self.backend,
                self.checkpoint.files,
                self.checkpoint.config.audio,
                storage=self.session.tower_weight_type,
            )
            # files.root is the package file for GGUF packages, the directory otherwise.
            self.thinker = Thinker(
                self.checkpoint.files.root,
                ThinkerOptions(
                    storage_type=self.session.thinker_weight_type,
                    n_ctx=THINKER_CONTEXT,
                    n_threads=request.threads,
                    n_gpu_layers=0 if self.backend.is_cpu else -1,
                ),
                progress=lambda fraction: request.control.step(
                    fraction, 1.0, "converting the thinker to GGUF"
                ),
            )
        except BaseException:
            self.close()
            raise
        # One KV cache: streams and jobs take turns on the worker's thread (Stream state lives apart).
        self.capabilities = Capabilities(
            streaming=True,
            snapshots=True,
            language_detection=True,
            context=True,
            streams_per_engine=8,
        )
        # The stream decoder whose prefill the thinker's KV cache holds (it may keep a prefix of it).
        self.kv_owner: object | None = None
        special = self.checkpoint.special
        self.drop_ids = frozenset(special.eos) | ({special.pad} if special.pad is not None else set())
        self._blas = ThreadpoolController()

    def one_blas_thread(self) -> AbstractContextManager[object]:
        """numpy's BLAS at one thread, for the frontend's small mel product. A second thread would wake numpy's
        OpenBLAS worker, which then spins for ~0.1 s on a core that ggml's threads need for the tower and the
        thinker right after: on 2 cores a live push's tower took ~70 ms longer (tests/bench/README.md, "A
        spinning BLAS thread and a wandering script")."""
        return self._blas.limit(limits=1, user_api="blas")

    # ----------------------------------------------------------------- requests
    def _request(self, options: dict[str, Any]) -> tuple[str, int, str]:
        """(resolved language, token budget, context) from canonical or raw request options."""
        request = RequestSettings.from_options(self.spec, options)
        stream_only = request.stream_only()
        if stream_only:
            raise UsageError(
                f"option(s) {', '.join(stream_only)} apply to live streams only",
                "remove them, or transcribe with --mode streaming",
            )
        language = resolve_language(request.language, self.languages)
        max_tokens = (
            self.checkpoint.generation.max_new_tokens if request.max_tokens is None else request.max_tokens
        )
        return language, max_tokens, request.context

    def transcribe(
        self,
        audio: np.ndarray,
        *,
        progress: ProgressCallback | None = None,
        cancel: CancelToken | None = None,
        **request_options: Any,
    ) -> Transcript:
        """Offline transcription of float32 mono 16 kHz samples; cancel/progress are checked between 30 s spans."""
        started = time.perf_counter()
        control = JobControl(progress, cancel)
        language, max_tokens, context = self._request(request_options)
        samples = checked_samples(audio, "Confucius4-R2T2", convert=True)
        total_s = samples.size / SAMPLE_RATE
        spans = []
        for start, end in plan_offline_spans(samples.size, SAMPLE_RATE):
            control.step(start / SAMPLE_RATE, total_s)
            spans.append(
                self.transcribe_span(samples[start:end], language, max_tokens, context, start / SAMPLE_RATE)
            )
        control.step(total_s, total_s)
        return self.spans_transcript(spans, total_s, time.perf_counter() - started)

    def offline_request(self, request_options: dict[str, Any]) -> tuple[str, int, str]:
        """Language, token budget and context of an offline request (refusing what only streams take)."""
        return self._request(request_options)

    def spans_transcript(self, spans: list[SpanResult], total_s: float, wall_s: float) -> Transcript:
        """The offline transcript of decoded spans."""
        detected = next((span.language for span in spans if span.language), None)
        return Transcript(
            text=join_span_texts([span.text for span in spans]),
            language=detected,
            segments=[Segment(span.text, span.start_s, span.end_s) for span in spans if span.text],
            token_ids=[token for span in spans for token in span.token_ids],
            timing=Timing(total_s, wall_s),
        )

    def open_offline_job(
        self,
        *,
        progress: ProgressCallback | None = None,
        cancel: CancelToken | None = None,
        **request_options: Any,
    ) -> ConsecutiveWindowsJob:
        """``transcribe`` of a file fed in blocks, one 30 s span held at a time (offline_job.py)."""
        return ConsecutiveWindowsJob(R2T2Spans(self, request_options), JobControl(progress, cancel))

    def transcribe_span(
        self, samples: np.ndarray, language: str, max_tokens: int, context: str, offset_s: float = 0.0
    ) -> SpanResult:
        """One offline span (at most 30 s): the steps of docs/families/confucius4_r2t2.md §6."""
        assert self.tower is not None and self.thinker is not None
        ckpt = self.checkpoint
        with self.one_blas_thread():
            mel = log_mel(samples, ckpt.config.audio.num_mel_bins)
        embeddings = self.tower.encode(mel.values[:, : mel.valid_frames])
        prompt = build_prompt(ckpt.tokenizer, ckpt.special.audio, embeddings.shape[0], context, language)
        result = self._generate(prompt.ids, embeddings, np.asarray(prompt.audio_positions), max_tokens)
        # The model's vocabulary may be larger than the tokenizer (padding rows): such ids carry no text.
        raw = ckpt.tokenizer.decode(
            [i for i in result.token_ids if i < ckpt.tokenizer.size], drop=self.drop_ids
        )
        parsed = parse_asr_output(raw, language)
        end_s = offset_s + samples.size / SAMPLE_RATE
        return SpanResult(
            offset_s, end_s, parsed.language, truncate_at_pipe(parsed.text), result.token_ids, result.eos_id
        )

    def check_room(
        self, prompt_length: int, max_tokens: int, audio_tokens: int = 0, prefix_tokens: int = 0
    ) -> int:
        """The token budget that fits the thinker context after a prompt of ``prompt_length`` positions."""
        room = THINKER_CONTEXT - prompt_length
        if room < 1:
            raise PromptOverflow(prompt_length + 1, THINKER_CONTEXT, audio_tokens, prefix_tokens)
        if max_tokens > room:
            log.warning(
                "max_tokens %d exceeds the %d positions left in the thinker context; using %d",
                max_tokens,
                room,
                room,
            )
        return min(max_tokens, room)

    def _generate(
        self, prompt_ids: np.ndarray, embeddings: np.ndarray, positions: np.ndarray, max_tokens: int
    ) -> GreedyResult:
        assert self.thinker is not None
        budget = self.check_room(len(prompt_ids), max_tokens, int(embeddings.shape[0]))
        self.kv_owner = None  # a stream's cached KV rows are gone
        self.thinker.truncate(0)
        self.thinker.prefill(prompt_ids, embeddings, positions)
        return self.thinker.decode_greedy(budget, self.checkpoint.special.eos)

    def open_stream(
        self, sample_rate: int = SAMPLE_RATE, **request_options: Any
    ) -> R2T2Stream | EndpointedStream:
        """A live LSP stream; stream options come from the session, overridden by ``request_options``."""
        if sample_rate != SAMPLE_RATE:
            raise UsageError(
                f"streams take {SAMPLE_RATE} Hz audio, got sample_rate={sample_rate}",
                "resample first (inference.audio.io.to_mono_16k)",
            )
        request = RequestSettings.from_options(self.spec, request_options)
        language = resolve_language(request.language, self.languages)
        cache = self.session.stream_cache if request.stream_cache is None else request.stream_cache
        rolling = (
            self.session.rolling_window_seconds
            if request.rolling_window_seconds is None
            else request.rolling_window_seconds
        )
        context = request.context
        stream_options = StreamOptions.from_options(self.session.stream_options(request))
        endpointing = self.session.stream_endpointing(rolling)
        if rolling and endpointing:
            raise UsageError(
                "rolling_window_seconds and endpointing both bound a live stream",
                "use one of them (endpointing for speech with pauses, the rolling window without)",
            )
        if rolling and rolling * 1000 < 4 * stream_options.chunk_size_ms:
            raise UsageError(
                f"rolling_window_seconds {rolling:g} holds fewer than 4 chunks of "
                f"{stream_options.chunk_size_ms:g} ms",
                "use a longer window, e.g. 16",
            )

        last: EngineChunkDecoder | None = None

        def new_decoder() -> EngineChunkDecoder:  # one per utterance: its caches hold that utterance's audio
            nonlocal last
            last = EngineChunkDecoder(self, context, language, cache) if last is None else last.successor()
            return last

        if endpointing:
            from inference.audio.vad import SileroVad

            path = self.session.vad_model_path
            vad = SileroVad(Path(path) if path else None)
            endpoints = EndpointOptions.from_options(self.session_options)
            return EndpointedStream(new_decoder, stream_options, endpoints, vad, language)
        limit = max_stream_samples(self.checkpoint.config.audio.max_source_positions)
        window = round(rolling * SAMPLE_RATE) if rolling else None
        return R2T2Stream(new_decoder(), stream_options, language, limit, window, new_decoder, auto_roll=True)

    # ----------------------------------------------------------------- lifetime
    def close(self) -> None:
        """Free native memory and unmap every model file (so the model folder can be deleted, also on Windows)."""
        if self.thinker is not None:
            self.thinker.close()
            self.thinker.checkpoint.close()  # the embedding rows' memory maps
            self.thinker = None
        if self.tower is not None:
            self.tower.close()
            self.tower = None
        if getattr(self, "backend", None) is not None:
            self.backend.close()

    def __enter__(self) -> R2T2Engine:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()


def create_engine(request: EngineRequest) -> R2T2Engine:
    if request.family != FAMILY:
        raise ModelError(f"the {FAMILY} factory cannot load a {request.family} model")
    return R2T2Engine(request)
