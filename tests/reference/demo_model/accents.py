"""Accent-like pronunciation variety for the demo corpus: seeded rewrites of espeak-ng's phoneme strings.

espeak-ng's English voices differ in voice quality and a few vowel realisations, but they all pronounce a word
from (nearly) the same phoneme string, so a model trained on them has heard one set of pronunciations. This
module takes the phonemes espeak-ng itself would use (`espeak-ng -q -x -v VOICE TEXT`, its ASCII phoneme
mnemonics), applies a randomly drawn *accent profile* of generic rewrites, and the caller speaks the result back
with the same voice as phoneme input (`[[...]]`). Without rewrites the round trip renders the same audio as the
plain text (checked on the training bases).

The rewrites are generic features that recur across many varieties of English (Wells, *Accents of English*;
the phonology chapters of the *Handbook of Varieties of English*); none is modelled on any one accent:

* consonants: TH-stopping (T D -> t d), TH-fronting (T -> f, D -> v after the word start), H-dropping
  (word-initial h), final consonant-cluster reduction (a word-final t/d after another consonant is dropped),
  T-glottalling (t after a vowel, before a vowel or at the word end -> ?), G-dropping (word-final -IN -> -In),
  final obstruent devoicing (word-final z d v -> s t f), W/V merger (word-initial v -> w);
* rhoticity: rhotic (an r after the r-coloured vowels A@ O@ o@ e@ i@ i@3 U@ 3:) or non-rhotic (the
  unstressed r-coloured schwa 3 -> @, NURSE 3: -> @: is not an English phoneme, so it is left);
* vowels, each a shift to a neighbouring vowel: FACE and GOAT monophthongs (eI -> e:, oU -> o:), PRICE
  monophthong (aI -> aa), KIT/FLEECE and FOOT/GOOSE length neutralisation (I <-> i:, U <-> u:), TRAP raising
  (a -> E), TRAP/BATH backing (a -> A:), STRUT (V -> U or 0), LOT unrounding or rounding (0 -> A: or O:),
  unreduced unstressed vowels (@ a# -> a, as in syllable-timed varieties).

A profile switches each feature on with probability `feature_prob` and draws, per feature, how often a
matching site is rewritten (U(0.5, 1)); the same profile holds for the whole clip, as an accent would.
Everything comes from the caller's seeded `random.Random`. Only the phoneme names of espeak-ng's English
phoneme table are produced.
"""

from __future__ import annotations

import random
import re
import subprocess
from collections.abc import Callable

# espeak-ng English phoneme mnemonics longer than one character (longest first), pause and stress marks;
# anything else is one character.
_MULTI = sorted(
    """
aI@ aU@ i@3 aI3 aI2 oU# z/2 l/2 @L @2 @5 a# aa a2 A: A@ A# 3: e@ eI e: E2 E# E: i: i@ I2 I# 0# 02 O2 O: O@ o@ o: OI oU
U@ u: aI aU IR VR tS dZ t# d# z# r- l/ w# t2 @# _: _! _^
""".split(),
    key=len,
    reverse=True,
)
_TOKEN = re.compile("|".join(re.escape(p) for p in _MULTI) + r"|.", re.DOTALL)
VOWELS = frozenset(
    """
aI@ aU@ i@3 aI3 aI2 oU# @L @2 @5 a# aa a2 A: A@ A# 3: e@ eI e: E2 E# E: i: i@ I2 I# 0# 02 O2 O: O@ o@ o: OI oU U@ u:
aI aU IR VR @# @ 3 a E I i 0 O V U
""".split()
)
STRESS = frozenset("',%=")
CONSONANTS = frozenset(
    "p b t d k g f v T D s z S Z h m n N l r w j ? x tS dZ t# d# z# r- l/ w# t2 z/2 l/2".split()
)
R_COLOURED = frozenset("A@ O@ o@ e@ i@ i@3 U@ 3:".split())

Word = list[str]


def tokenize(word: str) -> Word:
    """One espeak-ng word (no spaces) into phoneme, stress and pause tokens."""
    return _TOKEN.findall(word)


def _sounds(word: Word) -> list[int]:
    """Indices of the phonemes of a word (stress and pause marks skipped)."""
    return [i for i, t in enumerate(word) if t in VOWELS or t in CONSONANTS]


def _substitute(mapping: dict[str, str]) -> Callable[[Word, random.Random, float], None]:
    def rule(word: Word, rng: random.Random, rate: float) -> None:
        for i, token in enumerate(word):
            if token in mapping and rng.random() < rate:
                word[i] = mapping[token]

    return rule


def _th_fronting(word: Word, rng: random.Random, rate: float) -> None:
    sounds = _sounds(word)
    for n, i in enumerate(sounds):
        if word[i] == "T" and rng.random() < rate:
            word[i] = "f"
        elif word[i] == "D" and rng.random() < rate:  # word-initial DH becomes a stop ("de"), elsewhere v
            word[i] = "d" if n == 0 else "v"


def _h_dropping(word: Word, rng: random.Random, rate: float) -> None:
    sounds = _sounds(word)
    if sounds and word[sounds[0]] == "h" and len(sounds) > 1 and rng.random() < rate:
        del word[sounds[0]]


def _cluster_reduction(word: Word, rng: random.Random, rate: float) -> None:
    sounds = _sounds(word)
    if (
        len(sounds) >= 3
        and word[sounds[-1]] in ("t", "d", "t#", "d#")
        and word[sounds[-2]] in CONSONANTS
        and word[sounds[-2]] not in ("r", "r-")
        and rng.random() < rate
    ):
        del word[sounds[-1]]


def _t_glottalling(word: Word, rng: random.Random, rate: float) -> None:
    sounds = _sounds(word)
    for n, i in enumerate(sounds):
        if word[i] not in ("t", "t#") or n == 0 or word[sounds[n - 1]] not in VOWELS:
            continue
        final = n == len(sounds) - 1
        if (final or word[sounds[n + 1]] in VOWELS) and rng.random() < rate:
            word[i] = "?"


def _g_dropping(word: Word, rng: random.Random, rate: float) -> None:
    sounds = _sounds(word)
    if (
        len(sounds) >= 3
        and word[sounds[-1]] == "N"
        and word[sounds[-2]] in ("I", "I2")
        and rng.random() < rate
    ):
        word[sounds[-1]] = "n"


def _final_devoicing(word: Word, rng: random.Random, rate: float) -> None:
    sounds = _sounds(word)
    if len(sounds) >= 2 and rng.random() < rate:
        last = sounds[-1]
        word[last] = {"z": "s", "d": "t", "v": "f", "z#": "s", "d#": "t", "z/2": "s"}.get(
            word[last], word[last]
        )


def _w_v_merger(word: Word, rng: random.Random, rate: float) -> None:
    sounds = _sounds(word)
    if sounds and word[sounds[0]] == "v" and rng.random() < rate:
        word[sounds[0]] = "w"


def _rhotic(word: Word, rng: random.Random, rate: float) -> None:
    i = 0
    while i < len(word):
        nxt = word[i + 1] if i + 1 < len(word) else ""
        if word[i] in R_COLOURED and nxt not in ("r", "r-") and rng.random() < rate:
            word.insert(i + 1, "r")
            i += 1
        i += 1


def _unreduced_vowels(word: Word, rng: random.Random, rate: float) -> None:
    for i, token in enumerate(word):
        if token in ("@", "a#", "@2") and rng.random() < rate:
            word[i] = "a"


def _either(*mappings: dict[str, str]) -> Callable[[Word, random.Random, float], None]:
    """A feature with alternative realisations; the profile picks one per clip (see `draw_profile`)."""
    rules = [_substitute(m) for m in mappings]

    def rule(word: Word, rng: random.Random, rate: float, choice: list[int] | None = None) -> None:
        rules[choice[0] if choice else 0](word, rng, rate)

    rule.alternatives = len(rules)  # type: ignore[attr-defined]
    return rule


FEATURES: dict[str, Callable[..., None]] = {
    "th_stopping": _substitute({"T": "t", "D": "d"}),
    "th_fronting": _th_fronting,
    "h_dropping": _h_dropping,
    "cluster_reduction": _cluster_reduction,
    "t_glottalling": _t_glottalling,
    "g_dropping": _g_dropping,
    "final_devoicing": _final_devoicing,
    "w_v_merger": _w_v_merger,
    "rhotic": _rhotic,
    "non_rhotic": _substitute({"3": "@"}),
    "face_goat_monophthongs": _substitute({"eI": "e:", "oU": "o:"}),
    "price_monophthong": _substitute({"aI": "aa"}),
    "kit_fleece": _either({"I": "i:"}, {"i:": "I"}),
    "foot_goose": _either({"U": "u:"}, {"u:": "U"}),
    "trap": _either({"a": "E"}, {"a": "A:"}),
    "strut": _either({"V": "U"}, {"V": "0"}),
    "lot": _either({"0": "A:"}, {"0": "O:"}),
    "unreduced_vowels": _unreduced_vowels,
}
# Features that contradict each other: at most one of each group per profile.
EXCLUSIVE = [("th_stopping", "th_fronting"), ("rhotic", "non_rhotic")]


def draw_profile(rng: random.Random, feature_prob: float) -> dict[str, tuple[float, int]]:
    """feature -> (per-site rate, alternative index)."""
    profile: dict[str, tuple[float, int]] = {}
    for name, rule in FEATURES.items():
        if rng.random() < feature_prob:
            rate = rng.uniform(0.5, 1.0)
            profile[name] = (rate, rng.randrange(getattr(rule, "alternatives", 1)))
    for group in EXCLUSIVE:
        present = [name for name in group if name in profile]
        for name in present[1:] if present else []:
            del profile[name]
    return profile


def apply_profile(phonemes: str, profile: dict[str, tuple[float, int]], rng: random.Random) -> str:
    """Rewrite an espeak-ng phoneme string (words separated by spaces) with a profile, in FEATURES order."""
    words = [tokenize(w) for w in phonemes.split()]
    for name, rule in FEATURES.items():
        if name not in profile:
            continue
        rate, alternative = profile[name]
        for word in words:
            if getattr(rule, "alternatives", None):
                rule(word, rng, rate, [alternative])
            else:
                rule(word, rng, rate)
    return " ".join("".join(w) for w in words if w)


def espeak_phonemes(text: str, voice: str) -> str:
    """espeak-ng's own phoneme mnemonics for `text` with `voice`, one line."""
    out = subprocess.run(
        ["espeak-ng", "-q", "-x", "-v", voice, text], check=True, capture_output=True, text=True
    )
    return " ".join(out.stdout.split())


def accent_input(text: str, voice: str, rng: random.Random, feature_prob: float) -> tuple[str, list[str]]:
    """The espeak-ng input (`[[phonemes]]`) for `text` spoken with a random accent profile, and the profile's
    feature names."""
    profile = draw_profile(rng, feature_prob)
    return f"[[{apply_profile(espeak_phonemes(text, voice), profile, rng)}]]", sorted(profile)
