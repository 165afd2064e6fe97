"""The demo corpus generator (tests/reference/demo_model): grammar coverage, held-out structures that never
reach training, a closed vocabulary, and voice sets free of identical renders. No torch needed."""

from __future__ import annotations

import importlib.util
import shutil
import sys
from collections import Counter
from pathlib import Path

import pytest

REFERENCE = Path(__file__).resolve().parents[2] / "tests" / "reference" / "demo_model"


def _load(name: str):
    if str(REFERENCE) not in sys.path:
        sys.path.insert(0, str(REFERENCE))  # make_data.py imports its siblings by plain name
    spec = importlib.util.spec_from_file_location(name, REFERENCE / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up; make_data.py's sibling imports reuse it
    spec.loader.exec_module(module)
    return module


sentences = _load("sentences")
voices = _load("voices")


@pytest.fixture(scope="module")
def train_sample() -> list[tuple[str, str]]:
    return sentences.make_sentences(11, 20000)


@pytest.fixture(scope="module")
def held_out_sample() -> list[tuple[str, str]]:
    return sentences.make_sentences(12, 2000, held_out=True)


def test_numbers_and_dates_are_spelled_out() -> None:
    assert sentences.cardinal(0) == "zero"
    assert sentences.cardinal(23) == "twenty three"
    assert sentences.cardinal(40) == "forty"
    assert sentences.cardinal(312) == "three hundred and twelve"
    assert sentences.cardinal(700) == "seven hundred"
    assert sentences.cardinal(2024) == "two thousand and twenty four"
    assert sentences.cardinal(5310) == "five thousand three hundred and ten"
    assert [sentences.ordinal(n) for n in (1, 3, 12, 20, 21, 30, 31)] == [
        "first",
        "third",
        "twelfth",
        "twentieth",
        "twenty first",
        "thirtieth",
        "thirty first",
    ]
    with pytest.raises(ValueError):
        sentences.ordinal(32)
    assert [sentences.plural(n) for n in ("box", "city", "day", "child", "bus", "heart")] == [
        "boxes",
        "cities",
        "days",
        "children",
        "buses",
        "hearts",
    ]


def test_grammar_covers_every_frame_clause_kind_and_conjunction(train_sample: list[tuple[str, str]]) -> None:
    structures = Counter(structure for _, structure in train_sample)
    frames = {structure.split(":")[0] for structure in structures}
    assert frames >= set(sentences.FRAMES) - {"date_time"}  # date_time's ids are date:* and time:*
    assert {"date", "time"} <= frames
    compound = [s.split(":") for s in structures if s.startswith(("compound:", "fronted:"))]
    # compound:FIRST:CONJ:SECOND and fronted:CONJ:FIRST:SECOND
    assert {c[1] if c[0] == "fronted" else c[2] for c in compound} == set(sentences.CONJUNCTIONS)
    assert {c[1] for c in compound if c[0] == "compound"} == set(sentences.CLAUSES)
    assert {c[3] for c in compound} == set(sentences.CLAUSES)
    assert len(structures) > 500  # far more shapes than the old generator's ten templates
    words = Counter(w for text, _ in train_sample for w in text.split())
    for word in (
        "because",
        "although",
        "if",
        "did",
        "does",
        "not",
        "for",
        "with",
        "from",
        "about",
        "twenty",
        "monday",
        "january",
        "third",
        "oclock",
        "or",
        "then",
        "while",
    ):
        assert words[word] > 20, word


def test_held_out_structures_never_reach_training(train_sample, held_out_sample) -> None:
    train_structures = {structure for _, structure in train_sample}
    assert not train_structures & sentences.TEST_STRUCTURES
    held = {structure for _, structure in held_out_sample}
    assert held <= sentences.TEST_STRUCTURES
    assert held == sentences.TEST_STRUCTURES  # every held-out structure is really produced
    assert not {text for text, _ in train_sample} & {text for text, _ in held_out_sample}


def test_held_out_structures_are_made_of_parts_heard_in_training(train_sample) -> None:
    train_structures = {structure for _, structure in train_sample}
    parts = {part for s in train_structures for part in s.split(":")}
    for structure in sentences.TEST_STRUCTURES:
        if structure.startswith(("compound:", "fronted:")):
            assert set(structure.split(":")) <= parts, structure


def test_vocabulary_is_closed_and_every_word_is_heard(train_sample, held_out_sample) -> None:
    vocabulary = set(sentences.VOCABULARY)
    assert 700 <= len(vocabulary) <= 900  # small enough for a tiny model
    heard = Counter(w for text, _ in train_sample for w in text.split())
    assert set(heard) <= vocabulary
    assert {w for text, _ in held_out_sample for w in text.split()} <= vocabulary
    assert vocabulary <= set(heard)  # no word exists only in held-out text
    samples = ["emma quickly closed the early bottle and sang", "there are twenty hearts in the garden"]
    assert all(set(s.split()) <= vocabulary for s in samples)


def test_grammar_2_says_every_word_in_a_training_production(train_sample) -> None:
    """Grammar 1 said "plus" and "minus" only in the held-out sums (and random word strings); grammar 2's
    training-only arithmetic frame says them in other shapes, and the sums stay held out."""

    def framed_words(sample: list[tuple[str, str]]) -> set[str]:
        return {w for text, structure in sample if structure != "random_words" for w in text.split()}

    assert set(sentences.VOCABULARY) - framed_words(train_sample) == {"plus", "minus"}
    grammar2 = sentences.make_sentences(11, 20000, grammar=2)
    assert framed_words(grammar2) == set(sentences.VOCABULARY)
    structures = Counter(structure for _, structure in grammar2)
    assert {s for s in structures if s.startswith("arithmetic:")} == {
        "arithmetic:what_is",
        "arithmetic:minus_temperature",
        "arithmetic:amount_plus",
    }
    assert not set(structures) & sentences.TEST_STRUCTURES and "numbers:sum" in sentences.TEST_STRUCTURES
    assert {w for text, _ in grammar2 for w in text.split()} <= set(sentences.VOCABULARY)
    # revision 1 is unchanged (the data4 corpus stays reproducible); held-out sampling ignores the revision
    assert (
        sentences.make_sentences(7, 500)
        == sentences.make_sentences(7, 500, grammar=1)
        != sentences.make_sentences(7, 500, grammar=2)
    )


def test_generation_is_reproducible_distinct_and_respects_exclusions() -> None:
    first = sentences.make_sentences(3, 300)
    assert first == sentences.make_sentences(3, 300)
    assert first != sentences.make_sentences(4, 300)
    texts = [text for text, _ in first]
    assert len(set(texts)) == len(texts)
    excluded = set(texts[:50])
    assert not excluded & {text for text, _ in sentences.make_sentences(3, 300, exclude=excluded)}
    assert all(text == " ".join(text.split()) and text == text.lower() for text in texts)


def test_make_data_splits_keep_held_out_text_and_samples_out_of_training() -> None:
    make_data = _load("make_data")
    fake = voices.VoiceSets(train=["t1", "t2"], test=["h1"], unseen=["u1"], dropped={}, hashes={})
    fake.fresh = ["u2"]
    held_out = set(make_data.SAMPLE_TEXTS)
    jobs = {}
    for split in make_data.HELD_OUT_SPLITS:
        jobs[split] = make_data.plan_jobs(split, 60, 5, held_out, make_data.split_voices(split, fake))
        held_out |= {j["text"] for j in jobs[split]}
    jobs["train"] = make_data.plan_jobs("train", 400, 5, held_out, fake.train)
    train_texts = {j["text"] for j in jobs["train"]}
    assert not train_texts & held_out
    assert not {j["structure"] for j in jobs["train"]} & sentences.TEST_STRUCTURES
    assert {j["structure"] for j in jobs["test_structures"]} <= sentences.TEST_STRUCTURES
    assert not {j["structure"] for j in jobs["test"]} & sentences.TEST_STRUCTURES
    for split in ("unseen", "unseen_fresh"):
        unseen_held = [j for j in jobs[split] if j["structure"] in sentences.TEST_STRUCTURES]
        assert len(unseen_held) == 30  # half of the unseen-voice clips are held-out structures
    assert {j["voice"] for j in jobs["test"] + jobs["test_structures"]} == {"h1"}
    assert {j["voice"] for j in jobs["unseen"]} == {"u1"}
    assert {j["voice"] for j in jobs["unseen_fresh"]} == {"u2"}
    assert not any("accent_feature_prob" in j for split in jobs.values() for j in split)
    # a grammar-2 training split with accent profiles: same exclusions, the plain clips' draws unchanged
    accented = make_data.plan_jobs("train", 400, 5, held_out, fake.train, grammar=2, accent_fraction=0.7)
    assert not {j["text"] for j in accented} & held_out
    assert not {j["structure"] for j in accented} & sentences.TEST_STRUCTURES
    assert 0.6 < sum("accent_feature_prob" in j for j in accented) / len(accented) < 0.8
    plain = make_data.plan_jobs("train", 400, 5, held_out, fake.train, grammar=2)
    assert [{k: v for k, v in j.items() if k != "accent_feature_prob"} for j in accented] == plain


# --- voices -----------------------------------------------------------------------------------------------


def fake_espeak(voice: str) -> bytes:
    """Mimics espeak-ng 1.51: `en-gb+VARIANT` renders as plain `en-gb`; the `fast` variant only changes the
    speed (overridden by -s), and `caleb` is a copy of `klatt`."""
    base, _, variant = voice.partition("+")
    if base == "en-gb" or variant == "fast":
        variant = ""
    variant = {"caleb": "klatt"}.get(variant, variant)
    return f"{base}|{variant}".encode()


def test_dedupe_keeps_the_first_of_identical_renders() -> None:
    result = voices.dedupe(
        ["en-gb", "en-gb+m1", "en-us", "en-us+m1", "en-us+klatt", "en-us+caleb"], fake_espeak
    )
    assert result.kept == ["en-gb", "en-us", "en-us+m1", "en-us+klatt"]
    assert result.dropped == {"en-gb+m1": "en-gb", "en-us+caleb": "en-us+klatt"}
    assert result.hashes["en-gb+m1"] == result.hashes["en-gb"]


def test_voice_sets_drop_no_op_variants_and_held_out_copies_of_training_voices() -> None:
    sets = voices.build_voice_sets(
        fake_espeak,
        train_bases=["en-us", "en-gb"],
        train_variants=["", "m1", "fast", "klatt"],
        test_variants=["m7", "caleb"],
        unseen_bases=["en-029"],
        unseen_variants=["", "m8"],
    )
    assert sets.train == ["en-us", "en-gb", "en-us+m1", "en-us+klatt"]
    assert sets.dropped["en-gb+m1"] == "en-gb" and sets.dropped["en-us+fast"] == "en-us"
    # en-gb+m7 is really the en-gb training voice, en-us+caleb really en-us+klatt: neither may be held out
    assert sets.test == ["en-us+m7"]
    assert sets.dropped["en-gb+m7"] == "en-gb" and sets.dropped["en-us+caleb"] == "en-us+klatt"
    assert sets.unseen == ["en-029", "en-029+m8"]
    train_hashes = {sets.hashes[v] for v in sets.train}
    assert not train_hashes & {sets.hashes[v] for v in sets.test + sets.unseen}


def test_fresh_unseen_voices_differ_from_every_other_set() -> None:
    sets = voices.build_voice_sets(
        fake_espeak,
        train_bases=["en-us"],
        train_variants=["", "m1", "klatt"],
        test_variants=["m7", "caleb"],
        unseen_bases=["en-029", "en-gb"],
        unseen_variants=["", "m8"],
        fresh_variants=["m7", "caleb"],
    )
    # en-gb+VARIANT renders as en-gb (an unseen voice); en-029+caleb as en-029+klatt (new), so it stays
    assert sets.fresh == ["en-029+m7", "en-029+caleb"]
    assert sets.dropped["en-gb+m7"] == "en-gb"
    others = {sets.hashes[v] for v in sets.train + sets.test + sets.unseen}
    assert not others & {sets.hashes[v] for v in sets.fresh}
    with pytest.raises(ValueError, match="also a training variant"):
        voices.build_voice_sets(fake_espeak, fresh_variants=["m1"])
    assert voices.build_voice_sets(fake_espeak).fresh == []


def test_voice_set_check_rejects_a_held_out_voice_that_sounds_like_training() -> None:
    sets = voices.VoiceSets(
        train=["a"], test=["b"], unseen=["c"], dropped={}, hashes={"a": "1", "b": "1", "c": "2"}
    )
    with pytest.raises(ValueError, match="render like training"):
        sets.check()
    with pytest.raises(ValueError, match="also a training variant"):
        voices.build_voice_sets(fake_espeak, train_variants=["", "m7"], test_variants=["m7"])


@pytest.mark.skipif(shutil.which("espeak-ng") is None, reason="espeak-ng not installed")
def test_real_espeak_ignores_variants_on_en_gb_but_not_on_its_voice_file() -> None:
    render = voices.espeak_render
    assert render("en-gb+m1") == render("en-gb")  # the espeak-ng 1.51 behaviour the voice sets work around
    assert render("gmw/en+m1") != render("gmw/en") == render("en-gb")
    assert render("en-us+m1") != render("en-us")


def test_shipped_voice_lists_keep_held_out_variants_out_of_training() -> None:
    assert not set(voices.TRAIN_VARIANTS) & (set(voices.TEST_VARIANTS) | set(voices.UNSEEN_VARIANTS) - {""})
    assert not set(voices.TRAIN_BASES) & set(voices.UNSEEN_BASES)
    assert not set(voices.TRAIN_VARIANTS) & set(voices.FRESH_VARIANTS)
    assert not set(voices.UNSEEN_VARIANTS) & set(
        voices.FRESH_VARIANTS
    )  # new combinations on the unseen bases
    assert "en-gb" not in voices.TRAIN_BASES  # its variants are no-ops; gmw/en stands for it
