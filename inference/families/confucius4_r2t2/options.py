"""Typed Confucius4-R2T2 session and request options, validated against ``model_specs/confucius4_r2t2.json``.

A live stream's options are the session's, overridden by those a request gives; offline, the token budget is
the checkpoint's unless the request gives one. So a request keeps which options it gave (``None``: not given).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from inference.families.confucius4_r2t2.lsp import STREAM_OPTIONS
from inference.models.spec import FamilySpec

STREAM_ENGINE_OPTIONS = frozenset(
    {"stream_cache", "rolling_window_seconds"}
)  # stream options beyond the LSP's


@dataclass(frozen=True)
class SessionSettings:
    tower_weight_type: str
    thinker_weight_type: str
    stream_cache: bool
    rolling_window_seconds: float
    endpointing: bool
    # The session named ``endpointing`` itself (the default yields to a stream's rolling window; a choice does not).
    endpointing_chosen: bool
    vad_model_path: str
    values: dict[str, Any]  # every session option (the LSP and endpointing read theirs by name)

    @classmethod
    def from_options(cls, spec: FamilySpec, options: dict[str, Any]) -> SessionSettings:
        values = spec.resolved_options("session", options)
        chosen = "endpointing" in spec.validate_session_options(dict(options))
        return cls(
            tower_weight_type=str(values["tower_weight_type"]),
            thinker_weight_type=str(values["thinker_weight_type"]),
            stream_cache=bool(values["stream_cache"]),
            rolling_window_seconds=float(values["rolling_window_seconds"]),
            endpointing=bool(values["endpointing"]),
            endpointing_chosen=chosen,
            vad_model_path=str(values["vad_model_path"] or ""),
            values=values,
        )

    def stream_endpointing(self, rolling_window_seconds: float) -> bool:
        """Whether a stream with this rolling window is endpointed: the family's live default is endpointing
        (the app, the CLI and /live open the same streams); a rolling window replaces it unless the session
        chose endpointing, which the engine then refuses as a conflict."""
        if rolling_window_seconds and not self.endpointing_chosen:
            return False
        return self.endpointing

    def stream_options(self, request: RequestSettings) -> dict[str, Any]:
        """The LSP's options of one stream: the session's, with the request's on top."""
        return {name: self.values[name] for name in STREAM_OPTIONS} | request.stream


@dataclass(frozen=True)
class RequestSettings:
    language: str | None  # as given (a code or a name); None: not given
    max_tokens: int | None
    context: str
    stream: dict[str, Any]  # the LSP options the request gives
    stream_cache: bool | None
    rolling_window_seconds: float | None

    @classmethod
    def from_options(cls, spec: FamilySpec, options: dict[str, Any]) -> RequestSettings:
        given = spec.validate_request_options(dict(options))
        cache = given.get("stream_cache")
        rolling = given.get("rolling_window_seconds")
        return cls(
            language=None if given.get("language") is None else str(given["language"]),
            max_tokens=None if given.get("max_tokens") is None else int(given["max_tokens"]),
            context=str(given.get("context") or ""),
            stream={name: given[name] for name in STREAM_OPTIONS if name in given},
            stream_cache=None if cache is None else bool(cache),
            rolling_window_seconds=None if rolling is None else float(rolling),
        )

    def stream_only(self) -> list[str]:
        """Options given that apply to live streams only (``max_tokens`` is offline's budget too)."""
        names = set(self.stream) - {"max_tokens"}
        names |= {"stream_cache"} if self.stream_cache is not None else set()
        names |= {"rolling_window_seconds"} if self.rolling_window_seconds is not None else set()
        return sorted(names)
