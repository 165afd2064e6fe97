"""Word timestamps from CTranslate2's alignment of text tokens to encoder frames (``Whisper.align``).

The alignment is a monotonic path of (token index, frame index) pairs; a token starts at the frame where the
path first reaches it. The text tokens are followed by ``<|endoftext|>``, whose start ends the last word.
Encoder frames are 20 ms (two 10 ms mel frames each).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from inference.contract import Word

SECONDS_PER_ENCODER_FRAME = 0.02
# Written without spaces between words: each token (or each complete character) is a word of its own.
SPACELESS_LANGUAGES = frozenset({"zh", "ja", "th", "lo", "my", "yue"})
MAX_UTF8_BYTES = 4  # a character split over byte tokens spans at most this many


def token_start_times(alignments: Sequence[tuple[int, int]], n_tokens: int) -> list[float]:
    """Start time of each of ``n_tokens`` tokens (text tokens and the final ``<|endoftext|>``)."""
    starts: list[float | None] = [None] * n_tokens
    for token_index, frame_index in alignments:
        if 0 <= token_index < n_tokens and starts[token_index] is None:
            starts[token_index] = frame_index * SECONDS_PER_ENCODER_FRAME
    # A token the path skips starts where the next one does (keeps times monotonic).
    filled: list[float] = [0.0] * n_tokens
    following = starts[-1] if starts and starts[-1] is not None else 0.0
    for i in range(n_tokens - 1, -1, -1):
        value = starts[i]
        following = min(following, value) if value is not None else following
        filled[i] = following if value is None else value
    for i in range(1, n_tokens):
        filled[i] = max(filled[i], filled[i - 1])
    return filled


def group_words(
    tokens: Sequence[int], decode: Callable[[list[int]], str], spaceless: bool
) -> list[tuple[str, list[int]]]:
    """(word text, token indices) in order; a token that starts with a space starts a word.

    Tokens that only decode together (one UTF-8 character split over several) stay in one word.
    """
    words: list[tuple[str, list[int]]] = []
    pending: list[int] = []
    for index in range(len(tokens)):
        pending.append(index)
        text = decode([tokens[i] for i in pending])
        if "\ufffd" in text and index + 1 < len(tokens) and len(pending) < MAX_UTF8_BYTES:
            continue  # an incomplete character: wait for the rest of its bytes
        starts_word = spaceless or not words or text[:1].isspace()
        if starts_word:
            words.append((text, list(pending)))
        else:
            previous_text, previous_indices = words[-1]
            words[-1] = (previous_text + text, previous_indices + pending)
        pending = []
    return [(text.strip(), indices) for text, indices in words if text.strip()]


def aligned_words(
    tokens: Sequence[int],
    alignments: Sequence[tuple[int, int]],
    token_probs: Sequence[float],
    decode: Callable[[list[int]], str],
    spaceless: bool,
) -> list[Word]:
    """Words with times relative to the window's start (``tokens`` are text tokens, without ``<|endoftext|>``)."""
    starts = token_start_times(alignments, len(tokens) + 1)
    words = []
    for text, indices in group_words(tokens, decode, spaceless):
        start, end = starts[indices[0]], starts[indices[-1] + 1]
        probs = [token_probs[i] for i in indices if i < len(token_probs)]
        confidence = sum(probs) / len(probs) if probs else None
        words.append(Word(text, start, max(end, start), confidence))
    return words
