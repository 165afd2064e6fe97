"""Phonon-2 hotwords (docs/families/parakeet_tdt.md §7.3): parsing limits, the Aho-Corasick automaton and biased greedy TDT."""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from decoder_parts import decoder_config, random_decoder_weights
from parakeet_fixtures import audio_path, model_dir
from phonon_variant import make_phonon_variant

from inference.audio.io import load_audio_file
from inference.engine import load_engine
from inference.errors import UsageError
from inference.families.parakeet_tdt.decoder import JointStep, TdtDecoder
from inference.families.parakeet_tdt.engine import ParakeetEngine
from inference.families.parakeet_tdt.hotwords import (
    MAX_STATES,
    Hotword,
    HotwordBias,
    PieceVocabulary,
    check_strength,
    parse_hotwords,
    resolve_terms,
)

M = "\u2581"


# ------------------------------------------------------------------------------------------ parsing


def words(text: str) -> list[str]:
    return [t.word for t in parse_hotwords(text)]


def test_separators_whitespace_and_duplicates() -> None:
    assert words("Captioneer, Phonon;  Parakeet\nTDT") == ["Captioneer", "Phonon", "Parakeet", "TDT"]
    assert words("  new   york , los\tangeles ") == ["new york", "los angeles"]  # whitespace collapses
    assert words("alpha beta  gamma") == ["alpha", "beta", "gamma"]  # no separator: split on whitespace
    assert words("Phonon, phonon, PHONON, Parakeet") == ["Phonon", "Parakeet"]  # first spelling wins
    assert words(",, ;\n") == [] and words("") == [] and words("   ") == []


def test_json_forms() -> None:
    text = json.dumps(["Captioneer", {"word": "Phonon", "spoken": ["fonon", " pho  non "]}, {"word": "TDT"}])
    assert parse_hotwords(text) == [
        Hotword("Captioneer"),
        Hotword("Phonon", ("fonon", "pho non")),
        Hotword("TDT"),
    ]
    assert parse_hotwords('  ["a b", "A  B", ""]') == [Hotword("a b")]
    assert parse_hotwords("[]") == []


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[not json", "not valid JSON"),
        ("[1, 2]", "item 0 is int"),
        ('[{"word": "x", "sound": []}]', "unknown keys"),
        ('[{"spoken": ["x"]}]', '"word" string'),
        ('[{"word": "x", "spoken": "y"}]', "list of strings"),
        (
            json.dumps([{"word": "x", "spoken": [f"s{i}" for i in range(9)]}]),
            "9 spoken forms; the limit is 8",
        ),
        ("x" * 257, "257 bytes long; the limit is 256"),
        ("é" * 129, "258 bytes long"),
        (json.dumps([{"word": "x", "spoken": ["y" * 257]}]), "spoken form"),
        ("a," * 8193, "bytes; the limit is 16384"),
    ],
)
def test_limits_and_errors(text: str, message: str) -> None:
    with pytest.raises(UsageError, match=message):
        parse_hotwords(text)


def test_limits_at_their_edges() -> None:
    assert words("x" * 256) == ["x" * 256]
    assert (
        parse_hotwords(json.dumps([{"word": "x", "spoken": [f"s{i}" for i in range(8)]}]))[0].spoken[-1]
        == "s7"
    )
    many = ", ".join(f"term{i}" for i in range(30))
    with pytest.raises(UsageError, match="30 distinct hotwords were given; the limit is 25"):
        parse_hotwords(many)
    assert words(", ".join(f"term{i}" for i in range(25)) + ", TERM3") == [f"term{i}" for i in range(25)]
    # Context text stands in as prose: its first 25 distinct words are kept, as the reference does.
    assert [t.word for t in resolve_terms(None, many)] == [f"term{i}" for i in range(25)]
    with pytest.raises(UsageError, match="the limit is 25"):
        resolve_terms(many, "")
    assert len(parse_hotwords(("ab, " * 4096)[:16384])) == 1


def test_strength() -> None:
    assert check_strength(0) == 0.0 and check_strength(100) == 100.0 and check_strength(2.5) == 2.5
    for bad in (-0.1, 100.5, math.nan, math.inf):
        with pytest.raises(UsageError, match=r"hotwords_score must be a number in \[0, 100\]"):
            check_strength(bad)


def test_context_stands_in_unless_hotwords_are_given() -> None:
    assert resolve_terms(None, "Captioneer, Phonon") == [Hotword("Captioneer"), Hotword("Phonon")]
    assert resolve_terms("", "Captioneer") == []  # an explicit empty list wins
    assert resolve_terms("[]", "Captioneer") == []
    assert resolve_terms("TDT", "Captioneer") == [Hotword("TDT")]


# ------------------------------------------------------------------------------------------ automaton


def vocabulary(pieces: list[str]) -> PieceVocabulary:
    return PieceVocabulary(pieces, excluded_ids={len(pieces) - 1})  # the last piece plays blank


def test_segmentations_are_shortest_first() -> None:
    pieces = ["<unk>", "<pad>", M, "a", "b", "c", M + "a", "ab", "bc", M + "ab", "abc", "<|en|>", "<blank>"]
    vocab = vocabulary(pieces)
    assert "<unk>" not in vocab.ids and "<|en|>" not in vocab.ids and "<blank>" not in vocab.ids
    ids = {p: i for i, p in enumerate(pieces)}
    got = vocab.segmentations(M + "abc")
    as_pieces = [[pieces[i] for i in seg] for seg in got]
    assert as_pieces[0] == [M, "abc"]  # 2 pieces; among the 2-piece spellings the lower ids come first
    assert [len(s) for s in got] == sorted(len(s) for s in got) and len(got) == 6
    assert all("".join(pieces[i] for i in seg) == M + "abc" for seg in got)
    assert (ids[M], ids["abc"]) in got and (ids[M + "a"], ids["bc"]) in got
    assert vocab.segmentations(M + "xyz") == []


def test_variants_capitalise_only_letters_the_vocabulary_has() -> None:
    vocab = vocabulary(["<unk>", M, "N", "new", "york", "ew", "<blank>"])
    assert vocab.variants("new york") == ["new york", "New york"]  # no "Y" in the vocabulary
    assert vocab.variants("NEW") == ["NEW", "new"]


def classic_automaton(strength: float = 1.5) -> tuple[HotwordBias, dict[str, int]]:
    """The textbook Aho-Corasick example (he, she, his, hers) over single-letter pieces."""
    pieces = ["<unk>", "<pad>", M, "h", "e", "s", "i", "r", "x", "<blank>"]
    ids = {p: i for i, p in enumerate(pieces)}
    vocab = vocabulary(pieces)
    # Spelled as "▁he" etc.: a leading ▁ piece, then letters (one segmentation each).
    bias = HotwordBias([Hotword(w) for w in ("he", "she", "his", "hers")], vocab, ids["<blank>"], strength)
    return bias, ids


def walk(bias: HotwordBias, ids: dict[str, int], text: str, state: int = 0) -> int:
    for ch in text:
        state = bias.step(state, ids[M if ch == " " else ch])
    return state


def test_trie_depths_and_failure_links() -> None:
    bias, ids = classic_automaton()
    # root, ▁, ▁h, ▁he, ▁her, ▁hers, ▁hi, ▁his, ▁s, ▁sh, ▁she
    assert bias.states == 11
    she = walk(bias, ids, " she")
    assert bias.depth[she] == 4
    # Every spelling starts with ▁, so no suffix of "▁she" is a prefix: "r" falls back to the root
    # (without the word mark the textbook automaton would go on to "her").
    assert walk(bias, ids, "r", she) == 0
    assert bias.fail[she] == 0
    # "▁hers" reached letter by letter: depth 5, and "▁hex" falls back to the root
    assert bias.depth[walk(bias, ids, " hers")] == 5
    assert walk(bias, ids, " hex") == 0
    # A second "▁" after "▁h" restarts a match (failure link to ▁)
    assert bias.depth[walk(bias, ids, " h ")] == 1


def test_failure_links_inside_a_phrase() -> None:
    pieces = ["<unk>", "<pad>", M, "h", "a", "i", "<blank>"]
    ids = {p: i for i, p in enumerate(pieces)}
    bias = HotwordBias([Hotword("ha ha"), Hotword("hi")], vocabulary(pieces), ids["<blank>"], 1.0)
    ha_h = walk(bias, ids, " ha h")
    assert bias.depth[ha_h] == 5 and bias.depth[bias.fail[ha_h]] == 2  # "▁ha▁h" falls back to "▁h"
    hi = bias.step(ha_h, ids["i"])
    assert hi == walk(bias, ids, " hi") and bias.depth[hi] == 3
    assert bias.bonus(ha_h, ids["i"]) == 0.0  # max(0, 3 - 5)
    assert bias.bonus(ha_h, ids["a"]) == 1.0  # the phrase goes on


def test_step_and_bonus_vectors() -> None:
    bias, ids = classic_automaton(strength=1.5)
    blank = ids["<blank>"]
    root = 0
    assert bias.bonus(root, ids[M]) == 1.5  # one level deeper
    h = walk(bias, ids, " h")
    assert bias.bonus(h, ids["e"]) == 1.5 and bias.bonus(h, ids["i"]) == 1.5
    assert bias.bonus(h, ids["x"]) == 0.0  # the match breaks: never a negative bonus
    assert bias.bonus(h, ids[M]) == 0.0  # ▁ restarts at depth 1 from depth 2: max(0, 1 - 2)
    for state in (root, h, walk(bias, ids, " she")):
        assert bias.step(state, blank) == state and bias.bonus(state, blank) == 0.0
        assert bias.step(state, -1) == state
    assert bias.tokens.tolist() == sorted({ids[c] for c in (M, "h", "e", "s", "i", "r")})


def test_select_adds_bonuses_and_breaks_ties_by_lower_id() -> None:
    bias, ids = classic_automaton(strength=2.0)
    blank = ids["<blank>"]
    logits = np.zeros(len(ids), np.float32)
    logits[blank] = 3.0
    logits[ids[M]] = 1.5
    assert bias.select(logits, 0) == ids[M]  # 1.5 + 2 beats blank's 3.0
    logits[ids[M]] = 0.9
    assert bias.select(logits, 0) == blank  # 0.9 + 2 does not: blank itself is never biased
    logits[ids[M]] = 1.0
    assert bias.select(logits, 0) == ids[M]  # 1.0 + 2 ties 3.0, and ▁ has the lower id
    logits[ids["x"]] = 3.5  # a token outside the trie above everything
    assert bias.select(logits, 0) == ids["x"]
    h = walk(bias, ids, " h")
    logits[:] = 0.0
    logits[ids["s"]] = 1.0  # no bonus after ▁h: "▁hs" is not in the trie
    assert bias.select(logits, h) == ids["e"]  # e and i both get +2; e has the lower id
    assert bias.select(logits, 0) == ids[M]  # from the root only ▁ starts a match (+2 > 1)


def test_the_trie_is_capped() -> None:
    letters = "abcdefghijklmnopqrstuvwxyz"
    pieces = ["<unk>", "<pad>", M, *letters, *letters.upper(), "<blank>"]
    vocab = vocabulary(pieces)  # two variants per term (as-is and capitalised): 25 x 2 x 251 states wanted
    rng = np.random.default_rng(0)
    terms = [Hotword("".join(rng.choice(list(letters), 250))) for _ in range(40)]
    bias = HotwordBias(terms[:25], vocab, len(pieces) - 1, 1.0)
    assert bias.states <= MAX_STATES and bias.dropped > 0


# ------------------------------------------------------------------------------------------ decoding


def tiny_decoder(seed: int, vocab: int = 9, hidden: int = 6, enc: int = 5) -> TdtDecoder:
    weights = random_decoder_weights(np.random.default_rng(seed), vocab, hidden, enc)
    return TdtDecoder(weights, decoder_config(vocab, hidden, enc))


def spec_reference_decode(
    dec: TdtDecoder, enc_proj: np.ndarray, bias: HotwordBias
) -> list[tuple[int, int, int]]:
    """docs/families/parakeet_tdt.md §5 + §7.3 written out literally: argmax, then each trie token tried with its bonus."""
    state = dec.new_state()
    dec.step.advance(state, dec.blank)
    hot = 0
    out = []
    fi, last, count = 0, -1, 0
    while fi < enc_proj.shape[0] and len(out) < 10 * enc_proj.shape[0]:
        logits = dec.step.joint(enc_proj[fi], state.pred)
        best = int(np.argmax(logits[: dec.vocab]))
        best_value = logits[best]
        for token in bias.tokens.tolist():
            value = np.float32(logits[token] + np.float32(bias.bonus(hot, token)))
            if value > best_value or (value == best_value and token < best):
                best, best_value = token, value
        hot = bias.step(hot, best)
        duration = int(dec.durations[int(np.argmax(logits[dec.vocab :]))])  # never biased
        if best == dec.blank:
            fi += duration or 1
            continue
        out.append((best, fi, duration))
        dec.step.advance(state, best)
        count, last = (count + 1, last) if fi == last else (1, fi)
        fi += duration
        if count >= 10 and fi == last:
            fi += 1
    return out


@pytest.mark.parametrize("seed", range(6))
def test_biased_greedy_equals_the_literal_spec_loop(seed: int) -> None:
    dec = tiny_decoder(seed)
    pieces = ["<unk>", "<pad>", M, "a", "b", M + "a", "ab", "ba", "<blank>"]
    vocab = vocabulary(pieces)
    rng = np.random.default_rng(100 + seed)
    enc_proj = dec.project_encoder(rng.normal(0, 1, (40, 5)).astype(np.float32))
    plain, _ = dec.decode(enc_proj)
    changed = 0
    for strength in (0.5, 2.0, 8.0):
        bias = HotwordBias([Hotword("ab"), Hotword("ba ab")], vocab, dec.blank, strength)
        trace: list[JointStep] = []
        got, state = dec.decode(enc_proj, bias=bias, trace=trace)
        assert [(t.token_id, t.frame, t.duration) for t in got] == spec_reference_decode(dec, enc_proj, bias)
        changed += [t.token_id for t in got] != [t.token_id for t in plain]
        # the duration of every step is the argmax of the unbiased duration logits (checked above through
        # the reference), and the blank decision is the bias's: blank never gains a bonus
        assert all(step.token_id == dec.blank or step.token_id in range(dec.vocab) for step in trace)
        assert state.bias_state >= 0
    assert changed >= 1  # strong hotwords change the output of a random decoder


# ------------------------------------------------------------------------------------------ engine


@pytest.fixture(scope="module")
def phonon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ParakeetEngine]:
    eng = load_engine(
        make_phonon_variant(tmp_path_factory.mktemp("phonon") / "tiny_phonon"), backend="cpu", threads=2
    )
    assert isinstance(eng, ParakeetEngine)
    yield eng
    eng.close()


def test_phonon_capabilities(phonon: ParakeetEngine) -> None:
    caps = phonon.capabilities
    assert phonon.is_phonon and caps.hotwords and caps.context and caps.streaming and caps.snapshots


def test_hotwords_change_the_output_and_context_stands_in(phonon: ParakeetEngine) -> None:
    audio = load_audio_file(audio_path("medium"))
    plain = phonon.transcribe(audio)
    assert plain.language == "en"
    biased = phonon.transcribe(audio, hotwords="umbrella, tomorrow")
    assert biased.text != plain.text and "umbrella" in biased.text and "tomorrow" in biased.text
    assert phonon.transcribe(audio, context="umbrella, tomorrow").text == biased.text
    assert phonon.transcribe(audio, hotwords="", context="umbrella, tomorrow").text == plain.text
    assert phonon.transcribe(audio, hotwords="umbrella, tomorrow", hotwords_score=0).text == plain.text
    json_form = json.dumps([{"word": "umbrella", "spoken": []}, "tomorrow"])
    assert phonon.transcribe(audio, hotwords=json_form).text == biased.text
    # Long-form windows are biased too (the automaton state runs across windows with the predictor).
    assert (
        phonon.transcribe(audio, hotwords="umbrella", audio_chunk_mode="fixed").text
        != phonon.transcribe(audio, audio_chunk_mode="fixed").text
    )


def test_hotword_errors_reach_the_caller(phonon: ParakeetEngine) -> None:
    audio = np.zeros(1600, np.float32)
    with pytest.raises(UsageError, match="not valid JSON"):
        phonon.transcribe(audio, hotwords="[oops")
    with pytest.raises(UsageError, match="hotwords_score"):
        phonon.transcribe(audio, hotwords="x", hotwords_score=101)


def test_stock_checkpoints_refuse_hotwords_and_context() -> None:
    with load_engine(model_dir("tiny_b"), backend="cpu", threads=2) as eng:
        for options in ({"hotwords": "x"}, {"context": "names"}, {"prompt": "names"}):
            with pytest.raises(UsageError, match="Phonon-2"):
                eng.transcribe(np.zeros(1600, np.float32), **options)
        assert eng.transcribe(np.zeros(1600, np.float32), hotwords="").text == ""


def test_phonon_variant_config(tmp_path: Path) -> None:
    config = json.loads((make_phonon_variant(tmp_path / "p") / "config.json").read_text())
    assert config["audiocpp_word_timestamp_mode"] == "token_duration"
    punct = config["audiocpp_punctuation_token_ids"]
    assert punct == sorted(punct) and punct
