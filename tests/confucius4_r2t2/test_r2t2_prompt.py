"""Prompt ids and detokenised text against the reference fixtures, for both checkpoint layouts."""

from __future__ import annotations

import numpy as np
import pytest
from r2t2_fixtures import (
    HF_CHECKPOINT,
    LEGACY_CHECKPOINT,
    load_audio,
    load_expected_arrays,
    load_expected_meta,
)

from inference.errors import ModelError
from inference.families.confucius4_r2t2.checkpoint import load_checkpoint
from inference.families.confucius4_r2t2.frontend import audio_token_count, log_mel
from inference.families.confucius4_r2t2.languages import resolve_language, supported_languages
from inference.families.confucius4_r2t2.prompt import build_prompt, prompt_text

CASES = sorted(load_expected_meta()["cases"])


@pytest.fixture(scope="module", params=[HF_CHECKPOINT, LEGACY_CHECKPOINT], ids=["hf", "legacy"])
def checkpoint(request):
    return load_checkpoint(request.param)


def test_prompt_text_shapes():
    assert prompt_text() == (
        "<|im_start|>system\n<|im_end|>\n<|im_start|>user\n<|audio_start|><|audio_pad|><|audio_end|><|im_end|>\n"
        "<|im_start|>assistant\n"
    )
    assert prompt_text("ctx", "Chinese").endswith("assistant\nlanguage Chinese<asr_text>")
    assert prompt_text("ctx", "Chinese").startswith("<|im_start|>system\nctx<|im_end|>")
    assert prompt_text(language="Auto") == prompt_text()
    assert prompt_text(prefix="abc").endswith("assistant\nabc")


@pytest.mark.parametrize("name", CASES)
def test_prompt_ids_equal_reference(checkpoint, name):
    case = load_expected_meta()["cases"][name]
    start, end = case.get("span", [0, None])
    audio = load_audio()[case["clip"]][start:end]
    language = resolve_language(case["language"], supported_languages(checkpoint.config.support_languages))
    prompt = build_prompt(
        checkpoint.tokenizer,
        checkpoint.special.audio,
        audio_token_count(log_mel(audio).valid_frames),
        context=case["context"] or "",
        language=language,
        prefix=case["prefix"] or "",
    )
    expected = load_expected_arrays()[f"case/{name}/prompt_ids"]
    np.testing.assert_array_equal(prompt.ids, expected)
    positions = np.flatnonzero(expected == checkpoint.special.audio)
    assert list(prompt.audio_positions) == positions.tolist()
    assert prompt.ids[prompt.audio_start - 1] == checkpoint.special.audio_start
    assert prompt.ids[prompt.audio_start + prompt.audio_count] == checkpoint.special.audio_end


@pytest.mark.parametrize("name", CASES)
def test_decoded_text_equals_reference(checkpoint, name):
    case = load_expected_meta()["cases"][name]
    generated = load_expected_arrays()[f"case/{name}/generated_ids"]
    text = checkpoint.tokenizer.decode(generated.tolist(), drop=checkpoint.special.eos)
    assert text == case["text"]


def test_asr_text_is_kept_and_specials_dropped(checkpoint):
    tok = checkpoint.tokenizer
    tag = tok.require_id("<asr_text>")
    ids = [tok.require_id("<|im_start|>")] + tok.encode("language English") + [tag] + tok.encode("hi")
    ids += [checkpoint.special.eos[0]]
    assert tok.decode(ids, drop=checkpoint.special.eos) == "language English<asr_text>hi"
    assert tok.encode("x<asr_text>y")[1] == tag
    assert tag not in tok.special_ids


def test_partial_utf8_token_gives_one_replacement_per_byte(checkpoint):
    tok = checkpoint.tokenizer
    ids = tok.encode("你")  # byte-level: three one-byte tokens in this tiny vocabulary
    assert tok.decode(ids) == "你"
    assert tok.decode(ids[:-1]) == "\ufffd" * len(tok.decode_bytes(ids[:-1]))


def test_audio_pad_mismatch_is_reported(checkpoint):
    with pytest.raises(ModelError, match="audio_token_id"):
        build_prompt(checkpoint.tokenizer, checkpoint.tokenizer.require_id("<asr_text>"), 3)
