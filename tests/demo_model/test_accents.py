"""Accent-like phoneme rewrites for the demo corpus (tests/reference/demo_model/accents.py): tokenising espeak-ng's
phoneme mnemonics, each generic feature, seeded profiles, and (with espeak-ng) the phoneme-input round trip."""

from __future__ import annotations

import importlib.util
import random
import shutil
import subprocess
from pathlib import Path

import pytest

ACCENTS = Path(__file__).resolve().parents[2] / "tests" / "reference" / "demo_model" / "accents.py"
_spec = importlib.util.spec_from_file_location("demo_accents", ACCENTS)
accents = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(accents)

# espeak-ng 1.51, en-us: "the three brothers thought that their father had a car near the hotel at half past seven
# and they were hungry"
PHONEMES = (
    "D@2 Tr'i: br'VD3z T'O:t Dat De@ f'A:D3 had a# k'A@ n,i@3 D@2 hoUt'El at h'af p'aast s'Ev@n_:_: and "
    "DeI w3: h'VNgri"
)


def rewrite(phonemes: str, feature: str, alternative: int = 0) -> str:
    return accents.apply_profile(phonemes, {feature: (1.0, alternative)}, random.Random(0))


def test_tokenize_splits_multi_character_phonemes_and_round_trips() -> None:
    assert accents.tokenize("n,i@3") == ["n", ",", "i@3"]
    assert accents.tokenize("s'Ev@n_:_:") == ["s", "'", "E", "v", "@", "n", "_:", "_:"]
    assert accents.tokenize("hoUt'El") == ["h", "oU", "t", "'", "E", "l"]
    assert accents.tokenize("maI2") == ["m", "aI2"]
    for word in PHONEMES.split():
        assert "".join(accents.tokenize(word)) == word
    assert accents.apply_profile(PHONEMES, {}, random.Random(0)) == PHONEMES


def test_each_feature_rewrites_its_sites() -> None:
    assert rewrite("Tr'i: D@2 br'VD3z", "th_stopping") == "tr'i: d@2 br'Vd3z"
    assert rewrite("Tr'i: D@2 br'VD3z", "th_fronting") == "fr'i: d@2 br'Vv3z"
    assert rewrite("hoUt'El h'VNgri", "h_dropping") == "oUt'El 'VNgri"
    assert rewrite("p'aast and h'a", "cluster_reduction") == "p'aas an h'a"  # needs a consonant before t/d
    assert rewrite("w'O:t3 Dat t'En", "t_glottalling") == "w'O:?3 Da? t'En"  # never word-initial
    assert rewrite("s'ININ m'O@nIN", "g_dropping") == "s'INIn m'O@nIn"
    assert rewrite("br'VD3z had", "final_devoicing") == "br'VD3s hat"
    assert rewrite("v'Eri wIv", "w_v_merger") == "w'Eri wIv"
    assert rewrite("k'A@ De@r", "rhotic") == "k'A@r De@r"
    assert rewrite("f'A:D3", "non_rhotic") == "f'A:D@"
    assert rewrite("DeI hoUt'El", "face_goat_monophthongs") == "De: ho:t'El"
    assert rewrite("l'aIk", "price_monophthong") == "l'aak"
    assert (
        rewrite("sIt si:", "kit_fleece", 0) == "si:t si:" and rewrite("sIt si:", "kit_fleece", 1) == "sIt sI"
    )
    assert (
        rewrite("fUt gu:s", "foot_goose", 0) == "fu:t gu:s"
        and rewrite("fUt gu:s", "foot_goose", 1) == "fUt gUs"
    )
    assert rewrite("had", "trap", 0) == "hEd" and rewrite("had", "trap", 1) == "hA:d"
    assert rewrite("b'Vs", "strut", 0) == "b'Us" and rewrite("b'Vs", "strut", 1) == "b'0s"
    assert rewrite("l'0t", "lot", 0) == "l'A:t" and rewrite("l'0t", "lot", 1) == "l'O:t"
    assert rewrite("D@2 a#baUt", "unreduced_vowels") == "Da abaUt"


def test_profiles_are_seeded_and_consistent() -> None:
    profiles = [accents.draw_profile(random.Random(seed), 0.3) for seed in range(300)]
    assert profiles == [accents.draw_profile(random.Random(seed), 0.3) for seed in range(300)]
    for profile in profiles:
        for group in accents.EXCLUSIVE:
            assert sum(name in profile for name in group) <= 1
        assert all(0.5 <= rate <= 1.0 for rate, _ in profile.values())
    mean = sum(len(p) for p in profiles) / len(profiles)
    assert 0.25 * len(accents.FEATURES) < mean < 0.33 * len(accents.FEATURES)
    assert accents.draw_profile(random.Random(1), 0.0) == {}
    rng = random.Random(3)
    once = accents.apply_profile(PHONEMES, profiles[7], rng)
    assert once == accents.apply_profile(PHONEMES, profiles[7], random.Random(3)) != PHONEMES


@pytest.mark.skipif(shutil.which("espeak-ng") is None, reason="espeak-ng not installed")
def test_espeak_speaks_its_own_phonemes_back_unchanged_and_rewrites_differently() -> None:
    def render(text: str) -> bytes:
        return subprocess.run(
            ["espeak-ng", "--stdout", "-v", "en-us", "-s", "160", text], check=True, capture_output=True
        ).stdout

    text = "the three brothers thought that their father had a car"
    phonemes = accents.espeak_phonemes(text, "en-us")
    assert render(f"[[{phonemes}]]") == render(text)
    assert render(f"[[{rewrite(phonemes, 'th_stopping')}]]") != render(text)
    spoken, features = accents.accent_input(text, "en-us", random.Random(5), 1.0)
    assert spoken.startswith("[[") and spoken != f"[[{phonemes}]]"
    assert len(features) == len(accents.FEATURES) - len(accents.EXCLUSIVE)
