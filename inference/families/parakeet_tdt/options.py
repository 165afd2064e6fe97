"""Typed Parakeet-TDT session/request options and the choice of offline decoding mode (docs/families/parakeet_tdt.md §6.1).

The CLI already validates options through ``model_specs/parakeet_tdt.json``; the engine validates again
(idempotent on canonical, typed values) and fills in the spec's defaults, so direct callers get the same
checks and the same defaults.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from functools import lru_cache
from typing import Any

from inference.audio.spans import seconds_to_samples
from inference.contract import SAMPLE_RATE
from inference.models.spec import FamilySpec, load_family_spec

FAMILY = "parakeet_tdt"


class DecodeMode(Enum):
    FULL_CONTEXT = "full_context"
    LONG_FORM = "long_form"
    VAD = "vad"


@lru_cache(maxsize=1)
def family_spec() -> FamilySpec:
    return load_family_spec(FAMILY)


@dataclass(frozen=True)
class SessionSettings:
    offline_mode: str
    center_sec: float
    left_context_sec: float
    right_context_sec: float
    threshold_sec: float
    streaming_attention_mode: str
    weight_type: str
    conv_weight_type: str
    perf_mode: str
    weight_context_mb: int
    encoder_graph_arena_mb: int
    decoder_graph_arena_mb: int
    vad_model_path: str

    @classmethod
    def from_options(cls, options: dict[str, Any]) -> SessionSettings:
        values = family_spec().resolved_options("session", options)
        return cls(
            offline_mode=values["offline_mode"],
            center_sec=float(values["audio_chunk_duration_sec"]),
            left_context_sec=float(values["left_context_sec"]),
            right_context_sec=float(values["right_context_sec"]),
            threshold_sec=float(values["audio_chunk_threshold_sec"]),
            streaming_attention_mode=values["streaming_attention_mode"],
            weight_type=values["matmul_weight_type"] or values["weight_type"],  # matmul_weight_type inherits
            conv_weight_type=values["conv_weight_type"],
            perf_mode=values["perf_mode"],
            weight_context_mb=int(values["weight_context_mb"]),
            encoder_graph_arena_mb=int(values["encoder_graph_arena_mb"]),
            decoder_graph_arena_mb=int(values["decoder_graph_arena_mb"]),
            vad_model_path=str(values["vad_model_path"]),
        )


@dataclass(frozen=True)
class RequestSettings:
    max_tokens: int  # 0: derived from the audio length
    keep_language_tags: bool
    audio_chunk_mode: str
    speech_checked: bool  # the caller's VAD already found speech here: a speech gate runs no VAD of its own
    vad_chunk_sec: float | None  # per-request override of the VAD span cap
    hotwords: str | None  # None: not given (the context text stands in on Phonon-2)
    hotwords_score: float
    context: str
    snapshot_window_sec: float  # Phonon-2 live snapshots: audio re-decoded per update; 0 = the whole phrase

    @classmethod
    def from_options(cls, options: dict[str, Any]) -> RequestSettings:
        values = family_spec().resolved_options("request", options)
        chunk = values["audio_chunk_duration_sec"]
        return cls(
            max_tokens=int(values["max_tokens"]),
            keep_language_tags=bool(values["keep_language_tags"]),
            audio_chunk_mode=values["audio_chunk_mode"],
            speech_checked=bool(values["speech_checked"]),
            vad_chunk_sec=None if chunk is None else float(chunk),
            hotwords=None if values["hotwords"] is None else str(values["hotwords"]),
            hotwords_score=float(values["hotwords_score"]),
            context=str(values["context"]),
            snapshot_window_sec=float(values["snapshot_window_sec"]),
        )


def choose_mode(
    n_samples: int,
    session: SessionSettings,
    request: RequestSettings,
    full_context_limit: int | None = None,
    vad_spans: bool = False,
) -> DecodeMode:
    """The request's ``audio_chunk_mode`` wins; ``auto`` follows the session's ``offline_mode``, except that a
    clip longer than the encoder can take at once (``full_context_limit`` samples) uses long-form windows, and
    ``vad_spans`` (a model whose speech gate decodes VAD spans, speech_gate.py) makes it VAD spans."""
    chunk_mode = request.audio_chunk_mode
    if chunk_mode == "vad" or (chunk_mode == "auto" and vad_spans):
        return DecodeMode.VAD
    if chunk_mode == "fixed":
        return DecodeMode.LONG_FORM
    if chunk_mode == "none":
        return DecodeMode.FULL_CONTEXT
    if session.offline_mode == "long_form":
        return DecodeMode.LONG_FORM
    if session.offline_mode == "auto" and n_samples > seconds_to_samples(session.threshold_sec, SAMPLE_RATE):
        return DecodeMode.LONG_FORM
    if full_context_limit is not None and n_samples > full_context_limit:
        return DecodeMode.LONG_FORM  # full context cannot hold it: the only way to transcribe it at all
    return DecodeMode.FULL_CONTEXT
