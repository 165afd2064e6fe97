"""Text and timestamps against transformers' processor.decode output stored in the fixtures."""

from __future__ import annotations

import pytest
from parakeet_fixtures import CLIPS, MODELS, expected, model_dir

from inference.families.parakeet_tdt.checkpoint import open_parakeet_checkpoint
from inference.families.parakeet_tdt.decoder import TokenStep
from inference.families.parakeet_tdt.text import (
    ParakeetTokenizer,
    default_word_timestamps,
    token_duration_word_timestamps,
    token_timestamps,
)

SECONDS_PER_FRAME = 0.08


def _tokenizer(model: str) -> ParakeetTokenizer:
    with open_parakeet_checkpoint(model_dir(model)) as ckpt:
        return ParakeetTokenizer(ckpt.tokenizer_json, ckpt.config)


def _tokens(ref: dict) -> list[TokenStep]:
    return [
        TokenStep(*t) for t in zip(ref["token_ids"], ref["token_frames"], ref["token_durations"], strict=True)
    ]


@pytest.mark.parametrize("model", MODELS)
@pytest.mark.parametrize("clip", CLIPS)
def test_text_and_timestamps_match_reference(model: str, clip: str) -> None:
    ref = expected(model)["clips"][clip]
    tok = _tokenizer(model)
    tokens = _tokens(ref)
    assert tok.decode(ref["token_ids"]) == ref["text"]
    assert tok.decode(ref["token_ids"], keep_language_tags=True) == ref["text_with_special"]
    # transformers' token-level timestamps (punctuation moved to the previous token's end).
    got = token_timestamps(tokens, tok, SECONDS_PER_FRAME)
    assert [g["token"] for g in got] == [h["token"] for h in ref["hf_token_timestamps"]]
    for g, h in zip(got, ref["hf_token_timestamps"], strict=True):
        assert g["start"] == pytest.approx(h["start"], abs=1e-9) and g["end"] == pytest.approx(
            h["end"], abs=1e-9
        )

    end_frame = -(-ref["num_samples"] // 1280)
    words = default_word_timestamps(tokens, tok, end_frame, SECONDS_PER_FRAME)
    assert " ".join(w.text for w in words) == ref["text"]
    for prev, word in zip(words, words[1:], strict=False):
        assert prev.end_s <= word.start_s + 1e-9
    assert all(0 <= w.start_s <= w.end_s <= end_frame * SECONDS_PER_FRAME + 1e-9 for w in words)


def test_unk_and_pad_are_special_like_transformers() -> None:
    tok = _tokenizer("tiny_a")
    unk = tok._tok.token_to_id("<unk>")
    pad = tok._tok.token_to_id("<pad>")
    assert tok.decode([unk, pad, tok.blank_id]) == ""
    assert tok.decode([unk, pad, tok.blank_id], keep_language_tags=True) == "<unk>"
    tag = tok._tok.token_to_id("<|en|>")
    hello = tok._tok.encode("hello there").ids
    assert tok.decode([tag, *hello]) == "hello there"
    assert tok.decode([tag, *hello], keep_language_tags=True).endswith("hello there")


def test_word_rules_on_a_known_sequence() -> None:
    tok = _tokenizer("tiny_a")
    ids = tok._tok.encode("the quick brown fox, jumps").ids
    tokens = [TokenStep(t, frame=2 * i, duration=1 if i % 2 else 0) for i, t in enumerate(ids)]
    words = default_word_timestamps(tokens, tok, audio_end_frame=2 * len(ids) - 1, seconds_per_frame=0.08)
    assert [w.text for w in words] == ["the", "quick", "brown", "fox,", "jumps"]
    first_token_frames = [t.frame for t in tokens if tok.piece(t.token_id).startswith("\u2581")]
    assert [round(w.start_s / 0.08) for w in words] == first_token_frames
    assert [round(w.end_s / 0.08) for w in words[:-1]] == first_token_frames[1:]
    assert words[-1].end_s == pytest.approx((2 * len(ids) - 1) * 0.08)  # clamped to the audio end

    punct = frozenset(
        i for i in range(tok.vocab_size) if tok.piece(i) and not any(c.isalnum() for c in tok.piece(i))
    )
    tdw = token_duration_word_timestamps(tokens, tok, punct, audio_end_s=10.0, seconds_per_frame=0.08)
    assert [w.text for w in tdw] == ["the", "quick", "brown", "fox,", "jumps"]
    last = tokens[-1]
    assert tdw[-1].end_s == pytest.approx((last.frame + last.duration) * 0.08)


class _Pieces:
    """A stand-in tokenizer: id i is ``pieces[i]``; the last id is blank."""

    def __init__(self, pieces: list[str]) -> None:
        self.pieces = pieces

    def is_text_token(self, token_id: int, keep_language_tags: bool = False) -> bool:
        return 0 <= token_id < len(self.pieces) - 1

    def piece(self, token_id: int) -> str:
        return self.pieces[token_id]


def test_token_duration_rules() -> None:
    """docs/families/parakeet_tdt.md §7.5: word = first piece start .. last piece start + duration; punctuation (even with a
    leading space) attaches to the previous word; a whitespace-only piece opens a word; no stretching."""
    pieces = ["\u2581hello", ",", "\u2581.", "\u2581", "world", "\u2581again", "\u2581!", "<blank>"]
    tok = _Pieces(pieces)
    punct = frozenset({1, 2, 3, 6})  # ",", "▁.", "▁" and "▁!" have no alphanumeric character
    spf = 0.08
    steps = [
        TokenStep(0, frame=1, duration=2),  # ▁hello   0.08 .. 0.24
        TokenStep(1, frame=3, duration=0),  # ,        attaches; zero duration: end = its start 0.24
        TokenStep(7, frame=3, duration=1),  # blank is skipped
        TokenStep(2, frame=4, duration=1),  # ▁.       punctuation with a space: still the same word
        TokenStep(3, frame=6, duration=1),  # ▁        whitespace-only: opens a new word
        TokenStep(4, frame=7, duration=3),  # world    continues it: " world" → "world"
        TokenStep(5, frame=11, duration=0),  # ▁again  zero duration: start == end
        TokenStep(6, frame=12, duration=4),  # ▁!      attaches; its end 16 frames is clamped to the audio
    ]
    words = token_duration_word_timestamps(steps, tok, punct, audio_end_s=1.0, seconds_per_frame=spf)  # type: ignore[arg-type]
    assert [w.text for w in words] == ["hello, .", "world", "again !"]
    assert [(round(w.start_s / spf), round(w.end_s / spf, 6)) for w in words] == [(1, 5), (6, 10), (11, 12.5)]
    only_space = token_duration_word_timestamps([TokenStep(3, 0, 1)], tok, punct, 1.0, spf)  # type: ignore[arg-type]
    assert only_space == []  # empty after trimming: dropped
