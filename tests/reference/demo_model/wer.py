"""Word error rate: word-level Levenshtein distance over the reference word count (no torch needed)."""

from __future__ import annotations


def normalise(text: str) -> list[str]:
    """Lower-case words; punctuation other than apostrophes is dropped (the demo corpus has none)."""
    kept = "".join(ch if ch.isalnum() or ch == "'" or ch.isspace() else " " for ch in text.lower())
    return kept.split()


def word_errors(reference: str, hypothesis: str) -> int:
    """Substitutions + deletions + insertions needed to turn the reference words into the hypothesis."""
    ref, hyp = normalise(reference), normalise(hypothesis)
    previous = list(range(len(hyp) + 1))
    for i, ref_word in enumerate(ref, start=1):
        current = [i] + [0] * len(hyp)
        for j, hyp_word in enumerate(hyp, start=1):
            current[j] = min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (ref_word != hyp_word))
        previous = current
    return previous[-1]


def corpus_wer(pairs: list[tuple[str, str]]) -> float:
    """Total word errors over total reference words, for (reference, hypothesis) pairs."""
    words = sum(len(normalise(ref)) for ref, _ in pairs)
    if words == 0:
        raise ValueError("WER needs at least one reference word")
    return sum(word_errors(ref, hyp) for ref, hyp in pairs) / words
