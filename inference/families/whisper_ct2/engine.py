"""The whisper_ct2 engine: numpy log-mel per 30 s window → CTranslate2 encoder → language detection (unless
forced) → greedy or beam decoding → text, and word times from the cross-attention alignment.

Long audio is cut into consecutive 30 s windows, each decoded on its own with the same prompt (no text carried
from one window to the next, so a hallucination cannot feed the following windows). A window of digital
silence (every sample 0) is skipped without running the model. There is no live path of its own: live audio is
captioned through VAD segments (``inference.streaming.SegmentedStream``). ``close()`` frees the weights.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
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
    Stream,
    Timing,
    Transcript,
    Word,
)
from inference.errors import BackendError, ModelError, NotImplementedFamilyError, UsageError
from inference.families.whisper_ct2.folder import WhisperFolder, open_whisper_folder
from inference.families.whisper_ct2.frontend import log_mel_window
from inference.families.whisper_ct2.offline_job import WhisperWindows
from inference.families.whisper_ct2.options import RequestSettings, SessionSettings
from inference.families.whisper_ct2.tokenizer import WhisperTokenizer
from inference.families.whisper_ct2.words import SPACELESS_LANGUAGES, aligned_words
from inference.family import EngineRequest
from inference.native_stderr import CTRANSLATE2_LINES, native_output_logged
from inference.offline_jobs import ConsecutiveWindowsJob

log = logging.getLogger(__name__)

DECODER_POSITIONS = 448
MEDIAN_FILTER_WIDTH = 7  # the alignment smoothing openai-whisper and faster-whisper use


@dataclass
class WindowResult:
    start_s: float
    end_s: float
    token_ids: list[int]
    language: str | None
    words: list[Word] = field(default_factory=list)


class WhisperEngine:
    family = "whisper_ct2"

    def __init__(self, folder: WhisperFolder, model: Any, tokenizer: WhisperTokenizer, device: str) -> None:
        self.folder = folder
        self.model = model
        self.tokenizer = tokenizer
        self.device = device
        self.features = folder.features
        self.multilingual = bool(model.is_multilingual)
        self._blas = ThreadpoolController()
        self.capabilities = Capabilities(
            streaming=False,
            snapshots=False,
            word_timestamps=True,
            language_detection=self.multilingual,
            context=True,
            streams_per_engine=4,
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
        """Offline transcription; ``cancel`` is checked and ``progress`` reported between 30 s windows."""
        started = time.perf_counter()
        request = RequestSettings.from_options(request_options)
        self.check_request(request)
        samples = _mono_16k(audio)
        control = JobControl(progress, cancel)
        windows = self.decode_windows(samples, request, control)
        transcript = self._transcript(windows, request)
        transcript.timing = Timing(samples.size / SAMPLE_RATE, time.perf_counter() - started)
        return transcript

    def open_stream(self, **request_options: Any) -> Stream:
        raise NotImplementedFamilyError(
            "Whisper has no live path of its own",
            "open the stream in mode auto or segmented (VAD segments are transcribed one by one)",
        )

    def close(self) -> None:
        if self.model is not None:
            self.model.unload_model()
            self.model = None

    def __enter__(self) -> WhisperEngine:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------------------------ decoding
    def check_request(self, request: RequestSettings) -> None:
        if request.task == "translate" and (not self.multilingual or "translate" not in self.tokenizer.tasks):
            raise UsageError(
                "this Whisper model cannot translate (it is English-only or has no <|translate|> token)",
                "use task=transcribe, or a multilingual Whisper model",
            )
        language = request.language
        if language is None:
            return
        if not self.multilingual:
            if language != "en":
                raise UsageError(
                    f"this Whisper model is English-only; language {language!r} is not available",
                    "leave the language unset, or use a multilingual Whisper model",
                )
            return
        if language not in self.tokenizer.languages:
            known = ", ".join(sorted(self.tokenizer.languages))
            raise UsageError(
                f"unknown language {language!r} for this Whisper model",
                f"use one of: {known}; or leave it unset to detect it",
            )

    def decode_windows(
        self, samples: np.ndarray, request: RequestSettings, control: JobControl
    ) -> list[WindowResult]:
        size = self.features.window_samples
        total_s = samples.size / SAMPLE_RATE
        results = []
        for start in range(0, samples.size, size):
            control.step(start / SAMPLE_RATE, total_s)
            result = self.decode_placed_window(samples[start : start + size], start, request)
            if result is not None:
                results.append(result)
        control.step(total_s, total_s)
        return results

    def decode_placed_window(
        self, window: np.ndarray, start: int, request: RequestSettings
    ) -> WindowResult | None:
        """The window of the clip starting at sample ``start``, its times counted from the clip's start; None for
        digital silence (Whisper would only invent text)."""
        if not window.any():
            return None
        result = self.decode_window(window, request)
        result.start_s += start / SAMPLE_RATE
        result.end_s += start / SAMPLE_RATE
        result.words = [w.shifted(start / SAMPLE_RATE, limit=result.end_s) for w in result.words]
        return result

    def windows_transcript(self, windows: list[WindowResult], request: RequestSettings) -> Transcript:
        """The offline transcript of decoded windows (without its timing)."""
        return self._transcript(windows, request)

    def open_offline_job(
        self,
        *,
        progress: ProgressCallback | None = None,
        cancel: CancelToken | None = None,
        **request_options: Any,
    ) -> ConsecutiveWindowsJob:
        """``transcribe`` of a file fed in blocks, one 30 s window held at a time (offline_job.py)."""
        return ConsecutiveWindowsJob(WhisperWindows(self, request_options), JobControl(progress, cancel))

    def decode_window(self, window: np.ndarray, request: RequestSettings) -> WindowResult:
        """One window of at most 30 s; times count from its start."""
        import ctranslate2

        # One BLAS thread for the mel product: a second would wake numpy's OpenBLAS worker, which then spins for
        # ~0.1 s on a core that CTranslate2's encoder needs right after (Whisper-base f32 on 2 cores: encoder 418
        # against 355 ms; tests/bench/README.md, "Whisper's frontend on one BLAS thread").
        with self._blas.limit(limits=1, user_api="blas"):
            features = log_mel_window(window, self.features)
        encoded = self.model.encode(ctranslate2.StorageView.from_array(features[None]), to_cpu=False)
        language = request.language if self.multilingual else None
        if self.multilingual and language is None:
            language = self.detect_language(encoded)
        task_tokens = self.task_tokens(language, request.task)
        prefix: list[int] = []
        if request.initial_prompt.strip() and self.tokenizer.prev is not None:
            prefix = [self.tokenizer.prev, *self.tokenizer.encode_prompt(request.initial_prompt)]
        prompt = [*prefix, *task_tokens, self.tokenizer.no_timestamps]
        result = self.model.generate(
            encoded,
            [prompt],
            beam_size=request.beam_size,
            patience=request.patience,
            max_length=_max_length(request.max_new_tokens, len(prompt)),
            suppress_blank=True,
            suppress_tokens=[-1],
        )[0]
        ids = [int(i) for i in result.sequences_ids[0]]
        duration = window.size / SAMPLE_RATE
        words: list[Word] = []
        text_ids = self.tokenizer.text_ids(ids)
        if request.word_timestamps and text_ids:
            words = self.word_times(encoded, task_tokens, text_ids, window.size, language)
            words = [w.shifted(0.0, limit=duration) for w in words]
        return WindowResult(0.0, duration, ids, language, words)

    def task_tokens(self, language: str | None, task: str) -> list[int]:
        """``<|startoftranscript|>``, then the language and task on multilingual models."""
        if not self.multilingual or language is None:
            return [self.tokenizer.sot]
        return [self.tokenizer.sot, self.tokenizer.languages[language], self.tokenizer.tasks[task]]

    def detect_language(self, encoded: Any) -> str:
        scores = self.model.detect_language(encoded)[0]
        token, _probability = scores[0]
        return str(token)[2:-2]

    def word_times(
        self, encoded: Any, task_tokens: list[int], text_ids: list[int], n_samples: int, language: str | None
    ) -> list[Word]:
        frames = min(n_samples // self.features.hop_length, self.features.window_frames)
        aligned = self.model.align(
            encoded, task_tokens, [text_ids], frames, median_filter_width=MEDIAN_FILTER_WIDTH
        )[0]
        return aligned_words(
            text_ids,
            [(int(t), int(f)) for t, f in aligned.alignments],
            [float(p) for p in aligned.text_token_probs],
            self.tokenizer.decode,
            language in SPACELESS_LANGUAGES,
        )

    # ------------------------------------------------------------------------------------ text
    def _transcript(self, windows: list[WindowResult], request: RequestSettings) -> Transcript:
        token_ids = [i for w in windows for i in w.token_ids]
        segments = []
        words: list[Word] = []
        for window in windows:
            text = self.tokenizer.decode(window.token_ids).strip()
            if text:
                segments.append(Segment(text, window.start_s, window.end_s, tuple(window.words)))
                words.extend(window.words)
        language = request.language or next((w.language for w in windows if w.language), None)
        if not self.multilingual:
            language = "en"
        text = self.tokenizer.decode(token_ids).strip()
        return Transcript(text=text, language=language, words=words, segments=segments, token_ids=token_ids)


def _max_length(max_new_tokens: int, prompt_length: int) -> int:
    """CTranslate2 decodes at most ``min(max_length // 2, max_length - (prompt_length - 1))`` tokens; the
    value giving ``max_new_tokens``, fewer when the decoder's 448 positions would overflow."""
    new = min(max_new_tokens, DECODER_POSITIONS - prompt_length)
    return max(2 * new, new + prompt_length - 1)


def _mono_16k(audio: np.ndarray) -> np.ndarray:
    # The contract: engines refuse NaN/Inf (file decoding already replaced them) and non-mono audio.
    return np.ascontiguousarray(checked_samples(audio, "Whisper", convert=True))


def resolve_device(backend: str) -> str:
    """CTranslate2 runs on the CPU or CUDA; ``auto`` takes CUDA when a device is visible."""
    import ctranslate2

    if backend in ("auto", "cuda"):
        if ctranslate2.get_cuda_device_count() > 0:
            return "cuda"
        if backend == "cuda":
            raise BackendError(
                "no CUDA device is visible to CTranslate2",
                "use --backend cpu, or install the CUDA 12 runtime",
            )
        return "cpu"
    if backend == "cpu":
        return "cpu"
    raise BackendError(
        f"the whisper_ct2 family runs on CTranslate2, which has no {backend} backend",
        "use --backend cpu or cuda",
    )


def create_engine(request: EngineRequest) -> WhisperEngine:
    import ctranslate2

    session = SessionSettings.from_options(request.session_options)
    folder = open_whisper_folder(request.model_path)
    device = resolve_device(request.backend)
    compute_type = session.compute_type
    if compute_type not in ("default", "auto"):
        supported = ctranslate2.get_supported_compute_types(device)
        if compute_type not in supported:
            raise BackendError(
                f"compute_type={compute_type} is not available on {device}",
                f"use one of: {', '.join(sorted(supported))}",
            )
    tokenizer = WhisperTokenizer(folder.tokenizer_path, folder.lang_ids)
    try:
        with native_output_logged(CTRANSLATE2_LINES):  # a float16 model on a CPU: the conversion notice
            model = ctranslate2.models.Whisper(
                str(folder.root), device=device, compute_type=compute_type, intra_threads=request.threads or 0
            )
    except (RuntimeError, ValueError) as exc:
        raise ModelError(f"CTranslate2 cannot load {folder.root}: {exc}", "re-download the model") from exc
    if model.n_mels != folder.features.n_mels:
        raise ModelError(
            f"{folder.root}: the model takes {model.n_mels} mel bins, preprocessor_config.json says "
            f"{folder.features.n_mels}",
            "re-download the model's preprocessor_config.json",
        )
    log.debug("whisper_ct2: %s on %s (%s)", folder.root, device, compute_type)
    return WhisperEngine(folder, model, tokenizer, device)
