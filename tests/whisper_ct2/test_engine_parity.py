"""The engine against transformers' greedy tokens (expected.json): token ids and text exactly."""

from __future__ import annotations

from typing import Any

import pytest

from tests.blas_threads import numpy_blas_threads, recording_blas_threads
from tests.whisper_ct2.whisper_fixtures import MODELS, cases, clip, expected, request_options

CASES = cases("model80")
ALL = [(model, case) for model in MODELS for case in cases(model)]


@pytest.mark.parametrize(
    ("model", "case"),
    ALL,
    ids=[f"{m}-{c['clip']}-{c['language']}-{c['task']}-{bool(c['initial_prompt'])}" for m, c in ALL],
)
def test_greedy_tokens_and_text_equal_transformers(engines: Any, model: str, case: dict[str, Any]) -> None:
    transcript = engines(model).transcribe(clip(case["clip"]), **request_options(case))
    assert transcript.token_ids == case["token_ids"]
    assert transcript.text == case["text"].strip()
    assert transcript.language == (case["language"] or case["detected_language"])


def test_the_128_bin_model_is_the_large_v3_layout(engines: Any) -> None:
    engine = engines("model128")
    assert engine.features.n_mels == 128 and "yue" in engine.tokenizer.languages
    assert len(engine.tokenizer.languages) == 100


def test_long_audio_is_decoded_in_30_second_windows(engine: Any) -> None:
    case = next(c for c in CASES if c["clip"] == "long40")
    transcript = engine.transcribe(clip("long40"), **request_options(case))
    assert [(s.start_s, s.end_s) for s in transcript.segments] == [(0.0, 30.0), (30.0, 40.0)]
    assert transcript.timing is not None and transcript.timing.audio_s == 40.0


def test_the_prompt_changes_the_decoding(engine: Any) -> None:
    with_prompt = next(c for c in CASES if c["initial_prompt"])
    options = request_options(with_prompt)
    del options["initial_prompt"]
    assert engine.transcribe(clip(with_prompt["clip"]), **options).token_ids != with_prompt["token_ids"]


def test_beam_search_decodes_and_is_at_least_as_likely_as_greedy(engine: Any) -> None:
    case = CASES[0]
    beam = engine.transcribe(clip(case["clip"]), **request_options(case), beam_size=4)
    assert beam.token_ids and all(i < 51865 for i in beam.token_ids)
    assert len(beam.token_ids) <= expected()["max_new_tokens"]


def test_digital_silence_gives_an_empty_transcript_without_decoding(engine: Any) -> None:
    import numpy as np

    transcript = engine.transcribe(np.zeros(16000 * 3, np.float32))
    assert transcript.text == "" and transcript.token_ids == [] and transcript.segments == []


def test_word_times_are_ordered_and_inside_the_audio(engine: Any) -> None:
    samples = clip("long40")
    transcript = engine.transcribe(samples, language="en", max_new_tokens=20)
    assert transcript.words
    ends = samples.size / 16000
    previous = 0.0
    for word in transcript.words:
        assert previous <= word.start_s <= word.end_s <= ends
        assert word.confidence is not None and 0.0 <= word.confidence <= 1.0
        previous = word.start_s
    assert all(w.start_s >= 30.0 for w in transcript.segments[1].words)
    without = engine.transcribe(samples, language="en", max_new_tokens=20, word_timestamps=False)
    assert without.words == [] and without.token_ids == transcript.token_ids


def test_the_mel_runs_on_one_blas_thread(engine: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """A second BLAS thread for the window's mel product would leave numpy's OpenBLAS worker spinning on a core
    through CTranslate2's encoder right after (Whisper-base f32 on 2 cores: 418 against 355 ms); the process's
    BLAS setting is back afterwards."""
    from inference.audio import whisper_mel

    seen: list[set[int]] = []
    monkeypatch.setattr(
        whisper_mel, "log10_mel_of_padded", recording_blas_threads(whisper_mel.log10_mel_of_padded, seen)
    )
    before = numpy_blas_threads()
    case = next(c for c in CASES if c["clip"] == "long40")
    engine.transcribe(clip("long40"), **request_options(case))
    assert len(seen) == 2 and all(pools == {1} for pools in seen), seen
    assert numpy_blas_threads() == before
