"""The speech gate of a model that invents words in non-speech (the demo model), set by its folder's
``captioneer_model.json`` (docs/families/parakeet_tdt.md §6.5).

Two methods:
* ``words``: the clip is decoded in context exactly as without a gate, then every word that does not come within
  ``margin_sec`` of the Silero VAD's speech is dropped. Speech keeps its full-context transcript (a VAD span
  cut in noise costs no onset), and what the model invents in silence, noise or tones lies outside the speech.
* ``spans``: only the VAD's speech spans (padded by ``padding_sec``, merged across gaps up to ``merge_gap_sec``,
  at most ``max_span_sec`` each) are decoded, each from a fresh decoder.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from inference.audio.spans import Span, seconds_to_samples
from inference.errors import ModelError
from inference.families.parakeet_tdt.decoder import TokenStep

METHODS = ("words", "spans")


@dataclass(frozen=True)
class SpeechGate:
    method: str  # "words" or "spans"
    margin_sec: float = 0.5  # words: how far outside the VAD's speech a word may lie and still be kept
    max_span_sec: float = 20.0  # spans: the cap of one decoded span
    padding_sec: float = 0.25  # spans: added to each side of a speech segment
    merge_gap_sec: float = 0.5  # spans: closer segments are decoded together


# name -> (lowest, highest) allowed value, in seconds
_LIMITS = {
    "margin_sec": (0.0, 5.0),
    "max_span_sec": (1.0, 60.0),
    "padding_sec": (0.0, 5.0),
    "merge_gap_sec": (0.0, 10.0),
}


def parse_speech_gate(data: Any, path: Path) -> SpeechGate | None:
    """The gate described by the ``speech_gate`` value of ``path`` (None: no gate). A file without a
    ``method`` asks for spans, as files written before the words method did."""
    if data is None:
        return None
    if not isinstance(data, dict):
        raise ModelError(f"{path}: speech_gate must be an object", "fix or remove the file")
    unknown = sorted(set(data) - {"method", *_LIMITS})
    if unknown:
        raise ModelError(
            f"{path}: unknown speech_gate field(s) {unknown}",
            f"use method ({' or '.join(METHODS)}) and {', '.join(_LIMITS)}",
        )
    method = data.get("method", "spans")
    if method not in METHODS:
        raise ModelError(
            f"{path}: speech_gate.method must be one of {list(METHODS)}", "fix or remove the file"
        )
    values: dict[str, float] = {}
    for name, (low, high) in _LIMITS.items():
        if name not in data:
            continue
        value = data[name]
        if not isinstance(value, int | float) or isinstance(value, bool) or not low <= value <= high:
            raise ModelError(
                f"{path}: speech_gate.{name} must be a number of seconds from {low:g} to {high:g}",
                "fix or remove the file",
            )
        values[name] = float(value)
    return SpeechGate(method, **values)


def tokens_near_speech(
    tokens: Sequence[TokenStep],
    starts_word: Callable[[int], bool],
    speech: Sequence[Span],
    samples_per_frame: int,
    margin_samples: int,
) -> list[TokenStep]:
    """The tokens of the words that overlap a speech span widened by ``margin_samples`` on each side.

    A word runs from its first token's frame to the end of its last token (at least one frame each); tokens
    before the first word-start piece belong to the first word. Token frames count from sample 0 of the clip.
    """
    near = [Span(max(0, s.start - margin_samples), s.end + margin_samples) for s in speech]
    kept: list[TokenStep] = []
    word: list[TokenStep] = []

    def close_word() -> None:
        if not word:
            return
        start = word[0].frame * samples_per_frame
        end = max(t.frame + max(t.duration, 1) for t in word) * samples_per_frame
        if any(start < span.end and span.start < end for span in near):
            kept.extend(word)
        word.clear()

    for token in tokens:
        if starts_word(token.token_id):
            close_word()
        word.append(token)
    close_word()
    return kept


def margin_samples(gate: SpeechGate) -> int:
    return seconds_to_samples(gate.margin_sec)
