"""Phonon-2 hotwords (docs/families/parakeet_tdt.md §7.3): parsing, the Aho-Corasick bonus automaton, biased token selection.

Terms past the limits are refused with the limit named, except a recognition context standing in for hotwords:
it is prose, so its first 25 distinct words are kept with a warning (a project decision). A step that extends a
match by ``k`` trie levels earns ``strength × k`` on that token's logit; blank and the duration logits are never
biased.
"""

from __future__ import annotations

import heapq
import json
import logging
import math
import re
from collections import deque
from dataclasses import dataclass
from typing import Any

import numpy as np

from inference.errors import UsageError

log = logging.getLogger(__name__)

MAX_INPUT_BYTES = 16384
MAX_TERMS = 25
MAX_TERM_BYTES = 256
MAX_SPOKEN = 8
MAX_STRENGTH = 100.0
DEFAULT_STRENGTH = 2.0
KEEP_SEGMENTATIONS = 6
MAX_CANDIDATES = 24
MAX_STATES = 8192
WORD_MARK = "\u2581"
_SEPARATORS = re.compile(r"[,\n;]")
_EXPANSION_LIMIT = 50_000  # search steps per spelling: a guard against pathological vocabularies


@dataclass(frozen=True)
class Hotword:
    word: str
    spoken: tuple[str, ...] = ()

    @property
    def surfaces(self) -> tuple[str, ...]:
        return (self.word, *self.spoken)


# ------------------------------------------------------------------------------------------ parsing


def _collapse(text: str) -> str:
    return " ".join(text.split())


def _check_bytes(text: str, what: str) -> str:
    size = len(text.encode("utf-8"))
    if size > MAX_TERM_BYTES:
        raise UsageError(
            f"the hotword {what} {text[:40]!r}... is {size} bytes long; the limit is {MAX_TERM_BYTES}",
            "shorten it",
        )
    return text


def _json_term(item: Any, index: int) -> Hotword | None:
    if isinstance(item, str):
        term = _collapse(item)
        return Hotword(_check_bytes(term, "term")) if term else None
    if not isinstance(item, dict):
        raise UsageError(
            f'hotwords item {index} is {type(item).__name__}; items are strings or {{"word", "spoken"}} objects',
            'write e.g. ["Captioneer", {"word": "Phonon", "spoken": ["fonon"]}]',
        )
    unknown = sorted(set(item) - {"word", "spoken"})
    if unknown:
        raise UsageError(f"hotwords item {index} has unknown keys {unknown}", 'use only "word" and "spoken"')
    word, spoken = item.get("word"), item.get("spoken", [])
    if not isinstance(word, str):
        raise UsageError(
            f'hotwords item {index} needs a "word" string', 'write {"word": "...", "spoken": [...]}'
        )
    if not (isinstance(spoken, list) and all(isinstance(s, str) for s in spoken)):
        raise UsageError(
            f'hotwords item {index}: "spoken" must be a list of strings', 'write "spoken": ["..."]'
        )
    if len(spoken) > MAX_SPOKEN:
        raise UsageError(
            f"hotwords item {index} ({word!r}) has {len(spoken)} spoken forms; the limit is {MAX_SPOKEN}",
            "keep the most likely spellings",
        )
    word = _check_bytes(_collapse(word), "term")
    forms = tuple(_check_bytes(s, "spoken form") for s in (_collapse(s) for s in spoken) if s)
    return Hotword(word, forms) if word else None


def parse_hotwords(text: str, *, truncate: bool = False) -> list[Hotword]:
    """Hotword terms from the request text; an empty list when it holds none. More than 25 distinct terms
    are refused, or (``truncate``, for context text) cut to the first 25."""
    size = len(text.encode("utf-8"))
    if size > MAX_INPUT_BYTES:
        raise UsageError(
            f"the hotwords text is {size} bytes; the limit is {MAX_INPUT_BYTES}", "send fewer terms"
        )
    cleaned = text.strip()
    if not cleaned:
        return []
    if cleaned.startswith("["):
        try:
            items = json.loads(cleaned)
        except json.JSONDecodeError as exc:
            raise UsageError(
                f"the hotwords start with '[' but are not valid JSON: {exc.msg} at character {exc.pos}",
                'write a JSON array such as ["Captioneer", "Phonon"], or plain comma-separated terms',
            ) from None
        if not isinstance(items, list):
            raise UsageError("the hotwords JSON must be an array", 'write e.g. ["Captioneer", "Phonon"]')
        parsed = [_json_term(item, i) for i, item in enumerate(items)]
    else:
        parts = _SEPARATORS.split(cleaned) if _SEPARATORS.search(cleaned) else cleaned.split()
        parsed = [Hotword(_check_bytes(word, "term")) if word else None for word in map(_collapse, parts)]
    terms: list[Hotword] = []
    seen: set[str] = set()
    for term in parsed:
        if term is None or term.word.casefold() in seen:
            continue
        seen.add(term.word.casefold())
        terms.append(term)
    if len(terms) > MAX_TERMS:
        if not truncate:
            raise UsageError(
                f"{len(terms)} distinct hotwords were given; the limit is {MAX_TERMS}",
                f"keep the {MAX_TERMS} terms that matter most (names, jargon the model gets wrong)",
            )
        log.warning(
            "the context holds %d distinct words; only the first %d are used as hotwords",
            len(terms),
            MAX_TERMS,
        )
        terms = terms[:MAX_TERMS]
    return terms


def check_strength(value: float) -> float:
    if not (math.isfinite(value) and 0.0 <= value <= MAX_STRENGTH):
        raise UsageError(
            f"hotwords_score must be a number in [0, {MAX_STRENGTH:g}], got {value!r}", "use e.g. 2"
        )
    return float(value)


# ------------------------------------------------------------------------------------------ spelling


class PieceVocabulary:
    """The vocabulary pieces a hotword may be spelled with (blank, ``<unk>``, ``<pad>`` and ``<|…|>`` excluded)."""

    def __init__(self, pieces: list[str], excluded_ids: set[int]) -> None:
        self.ids: dict[str, int] = {}
        for token_id, piece in enumerate(pieces):
            if not piece or token_id in excluded_ids or piece in ("<unk>", "<pad>"):
                continue
            if piece.startswith("<|") and piece.endswith("|>"):
                continue
            self.ids.setdefault(piece, token_id)
        self.max_len = max((len(p) for p in self.ids), default=0)
        self.characters = frozenset("".join(self.ids))

    def segmentations(self, spelled: str) -> list[tuple[int, ...]]:
        """Up to ``KEEP_SEGMENTATIONS`` shortest ways to spell ``spelled`` in pieces (fewest pieces first,
        ties by token ids), from at most ``MAX_CANDIDATES`` complete candidates."""
        n = len(spelled)
        inf = n + 1
        fewest = [inf] * (n + 1)  # fewest pieces from position i to the end
        fewest[n] = 0
        for i in range(n - 1, -1, -1):
            for j in range(i + 1, min(n, i + self.max_len) + 1):
                if spelled[i:j] in self.ids and fewest[j] + 1 < fewest[i]:
                    fewest[i] = fewest[j] + 1
        if fewest[0] >= inf:
            return []
        # Best-first search with an exact bound: complete spellings come out shortest first.
        heap: list[tuple[int, tuple[int, ...], int]] = [(fewest[0], (), 0)]
        found: list[tuple[int, ...]] = []
        steps = 0
        while heap and len(found) < MAX_CANDIDATES and steps < _EXPANSION_LIMIT:
            _bound, ids, pos = heapq.heappop(heap)
            steps += 1
            if pos == n:
                found.append(ids)
                continue
            for j in range(pos + 1, min(n, pos + self.max_len) + 1):
                token = self.ids.get(spelled[pos:j])
                if token is not None and fewest[j] < inf:
                    heapq.heappush(heap, (len(ids) + 1 + fewest[j], (*ids, token), j))
        return found[:KEEP_SEGMENTATIONS]

    def variants(self, surface: str) -> list[str]:
        """As-is, lower case, and word-initial capitals (only capitals the vocabulary can spell)."""

        def capital(word: str) -> str:
            head = word[:1].upper()
            return head + word[1:] if head in self.characters else word

        out: list[str] = []
        for variant in (surface, surface.lower(), " ".join(capital(w) for w in surface.split(" "))):
            if variant and variant not in out:
                out.append(variant)
        return out


# ------------------------------------------------------------------------------------------ automaton


class HotwordBias:
    """A token trie with Aho-Corasick failure links; a ``decoder.TokenBias`` for the greedy TDT loop."""

    def __init__(
        self, terms: list[Hotword], vocabulary: PieceVocabulary, blank_id: int, strength: float
    ) -> None:
        self.blank_id = blank_id
        self.strength = check_strength(strength)
        self.children: list[dict[int, int]] = [{}]
        self.depth: list[int] = [0]
        self.fail: list[int] = [0]
        self.dropped = 0  # spellings that did not fit in MAX_STATES
        for term in terms:
            spelled_any = False
            for surface in term.surfaces:
                for variant in vocabulary.variants(surface):
                    for ids in vocabulary.segmentations(WORD_MARK + variant.replace(" ", WORD_MARK)):
                        spelled_any = True
                        self._insert(ids)
            if not spelled_any:
                log.warning(
                    "the hotword %r cannot be spelled with this model's vocabulary; it is ignored", term.word
                )
        if self.dropped:
            log.warning("hotword trie full (%d states): %d spellings left out", MAX_STATES, self.dropped)
        self._link()
        self.tokens = np.array(sorted({t for child in self.children for t in child}), dtype=np.int64)
        self._bonus_cache: dict[int, tuple[np.ndarray, np.ndarray]] = {}

    @property
    def states(self) -> int:
        return len(self.children)

    def _insert(self, ids: tuple[int, ...]) -> None:
        node, new = 0, 0
        for token in ids:  # count first: a spelling goes in whole or not at all
            node = self.children[node].get(token, -1) if node >= 0 else -1
            new += node < 0
        if len(self.children) + new > MAX_STATES:
            self.dropped += 1
            return
        node = 0
        for token in ids:
            nxt = self.children[node].get(token)
            if nxt is None:
                nxt = len(self.children)
                self.children.append({})
                self.depth.append(self.depth[node] + 1)
                self.fail.append(0)
                self.children[node][token] = nxt
            node = nxt

    def _link(self) -> None:
        queue = deque(self.children[0].values())
        while queue:
            node = queue.popleft()
            for token, child in self.children[node].items():
                f = self.fail[node]
                while f and token not in self.children[f]:
                    f = self.fail[f]
                target = self.children[f].get(token, 0)
                self.fail[child] = target if target != child else 0
                queue.append(child)

    # ------------------------------------------------------------------ decoder.TokenBias
    def step(self, state: int, token: int) -> int:
        if token == self.blank_id or token < 0:
            return state
        while state and token not in self.children[state]:
            state = self.fail[state]
        return self.children[state].get(token, 0)

    def bonus(self, state: int, token: int) -> float:
        if token == self.blank_id:
            return 0.0
        return self.strength * max(0, self.depth[self.step(state, token)] - self.depth[state])

    def select(self, token_logits: np.ndarray, state: int) -> int:
        """argmax over ``logit + bonus`` (lowest id on ties), i.e. the unbiased argmax unless a trie token
        beats it (or ties it with a lower id) once its bonus is added."""
        cached = self._bonus_cache.get(state)
        if cached is None:
            bonuses = np.array([self.bonus(state, int(t)) for t in self.tokens], dtype=np.float32)
            keep = bonuses > 0
            cached = (self.tokens[keep], bonuses[keep])
            self._bonus_cache[state] = cached
        ids, bonuses = cached
        if ids.size == 0:
            return int(np.argmax(token_logits))
        biased = np.array(token_logits, dtype=np.float32, copy=True)
        biased[ids] += bonuses
        return int(np.argmax(biased))


def resolve_terms(hotwords: str | None, context: str) -> list[Hotword]:
    """The request's hotwords; without a ``hotwords`` option the context text stands in (an explicit
    empty list still wins). Only the context is cut to the first 25 terms; explicit hotwords past the
    limit are refused."""
    if hotwords is not None:
        return parse_hotwords(hotwords)
    return parse_hotwords(context, truncate=True)
