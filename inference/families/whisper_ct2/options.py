"""Typed whisper_ct2 session and request options, validated against ``model_specs/whisper_ct2.json``."""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from inference.models.spec import FamilySpec, load_family_spec

FAMILY = "whisper_ct2"


@lru_cache(maxsize=1)
def family_spec() -> FamilySpec:
    return load_family_spec(FAMILY)


@dataclass(frozen=True)
class SessionSettings:
    compute_type: str

    @classmethod
    def from_options(cls, options: dict[str, Any]) -> SessionSettings:
        values = family_spec().resolved_options("session", options)
        return cls(compute_type=str(values["compute_type"]))


@dataclass(frozen=True)
class RequestSettings:
    language: str | None  # None: detected per window
    task: str
    beam_size: int
    patience: float
    initial_prompt: str
    word_timestamps: bool
    max_new_tokens: int

    @classmethod
    def from_options(cls, options: dict[str, Any]) -> RequestSettings:
        values = family_spec().resolved_options("request", options)
        language = values["language"]
        language = str(language).strip().lower() or None if language is not None else None
        return cls(
            language=language,
            task=str(values["task"]),
            beam_size=int(values["beam_size"]),
            patience=float(values["patience"]),
            initial_prompt=str(values["initial_prompt"]),
            word_timestamps=bool(values["word_timestamps"]),
            max_new_tokens=int(values["max_new_tokens"]),
        )
