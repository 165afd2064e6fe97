"""The speech gate of a model that invents words in non-speech (the demo model), set by its folder's
``captioneer_model.json`` (docs/families/parakeet_tdt.md §8).

Two methods:
* ``words``: the clip is decoded in context exactly as without a gate, then every word that does not come within
  ``margin_sec`` of the Silero VAD's speech is dropped. Speech keeps its full-context transcript (a VAD span
  cut in noise costs no onset), and what the model invents in silence, noise or tones lies outside the speech.
* ``windows``: each group of the VAD's speech segments (merged across gaps up to ``merge_gap_sec``, at most
  ``max_span_sec``) is decoded with ``padding_sec`` of audio on each side, in full context from a fresh decoder;
  a word is kept once (by its midpoint) and only within ``margin_sec`` of the group's speech. Short windows suit
  a model trained on short clips; the padding keeps the onsets and ends that a VAD cuts in noise.
* ``spans``: only the VAD's speech spans (padded by ``padding_sec``, merged across gaps up to ``merge_gap_sec``,
  at most ``max_span_sec`` each) are decoded, each from a fresh decoder; with ``margin_sec``, the words of a span
  that lie further than that outside the speech are dropped as well.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from inference.audio.spans import Span, SpeechWindow
from inference.errors import ModelError
from inference.families.parakeet_tdt.decoder import TokenStep

METHODS = ("words", "windows", "spans")
WORDS_MARGIN_SEC = 0.5  # the words method's margin when the file gives none


@dataclass(frozen=True)
class SpeechGate:
    method: str  # one of METHODS
    margin_sec: float | None = None  # how far outside the VAD's speech a word may lie and still be kept
    max_span_sec: float = 20.0  # windows, spans: the cap of one group of speech
    padding_sec: float = 0.25  # windows, spans: audio added to each side of the speech
    merge_gap_sec: float = 0.5  # windows, spans: closer speech segments are decoded together


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
    if method in ("words", "windows"):
        values.setdefault("margin_sec", WORDS_MARGIN_SEC)
    return SpeechGate(method, **values)


def _words(
    tokens: Sequence[TokenStep], starts_word: Callable[[int], bool], samples_per_frame: int
) -> list[tuple[int, int, list[TokenStep]]]:
    """(start, end, tokens) of each word in samples: from its first token's frame to the end of its last token
    (at least one frame each); tokens before the first word-start piece belong to the first word."""
    words: list[tuple[int, int, list[TokenStep]]] = []
    current: list[TokenStep] = []
    for token in [*tokens, None]:
        if current and (token is None or starts_word(token.token_id)):
            end = max(t.frame + max(t.duration, 1) for t in current)
            words.append((current[0].frame * samples_per_frame, end * samples_per_frame, current))
            current = []
        if token is not None:
            current.append(token)
    return words


def tokens_near_speech(
    tokens: Sequence[TokenStep],
    starts_word: Callable[[int], bool],
    speech: Sequence[Span],
    samples_per_frame: int,
    margin_samples: int,
) -> list[TokenStep]:
    """The tokens of the words that overlap a speech span widened by ``margin_samples`` on each side (token
    frames and spans count from the same sample)."""
    near = [Span(max(0, s.start - margin_samples), s.end + margin_samples) for s in speech]
    return [
        token
        for start, end, word in _words(tokens, starts_word, samples_per_frame)
        if any(start < span.end and span.start < end for span in near)
        for token in word
    ]


def tokens_of_window(
    tokens: Sequence[TokenStep],
    starts_word: Callable[[int], bool],
    window: SpeechWindow,
    samples_per_frame: int,
    margin_samples: int,
) -> list[TokenStep]:
    """The tokens of a decoded speech window (frames count from ``window.window.start``) whose words have their
    midpoint in the window's zone and come within ``margin_samples`` of its speech."""
    offset = window.window.start
    zone = Span(window.zone.start - offset, window.zone.end - offset)
    speech = Span(window.speech.start - offset, window.speech.end - offset)
    near = tokens_near_speech(tokens, starts_word, [speech], samples_per_frame, margin_samples)
    return [
        token
        for start, end, word in _words(near, starts_word, samples_per_frame)
        if zone.start <= (start + end) // 2 < zone.end
        for token in word
    ]
