"""Held-out fixtures, bundled samples, the WER function, and (once it exists) the engine against torch."""

from __future__ import annotations

import importlib.util
import json
import wave
from pathlib import Path

import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[2]
MODEL = REPO / "resources" / "demo_model"
FIXTURES = REPO / "tests" / "fixtures" / "demo_model"
SAMPLES = REPO / "resources" / "samples"


# Held-out splits: held-out sentences of the training structures (`test`) and sentences of structures never produced
# for training (`test_structures`), both spoken by held-out variants of the training voices, and unseen base voices
# (`unseen`). WER of the default path (`captioneer transcribe CLIP`, the speech gate) on the full splits (300/400/400
# clips), resources/demo_model/PROVENANCE.md "Speech gate": tests/bench/bench_speech_gate.py --clips-per-split 0
# --condition corpus --candidate default --candidate full.
MEASURED_WER = {"test": 0.0128, "test_structures": 0.0411, "unseen": 0.1416}
# The fixtures are 3 short clips per split (picked by length and voice, not by result), so their WER is bounded
# loosely: the measured figure plus a margin for ~15 words per split (one or two more word errors).
TARGET_WER = {split: wer + 0.15 for split, wer in MEASURED_WER.items()}


def _load_wer_module():
    spec = importlib.util.spec_from_file_location(
        "demo_wer", REPO / "tests" / "reference" / "demo_model" / "wer.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


wer = _load_wer_module()


def read_wav(path: Path) -> np.ndarray:
    with wave.open(str(path), "rb") as wav:
        assert (wav.getframerate(), wav.getnchannels(), wav.getsampwidth()) == (16000, 1, 2)
        return np.frombuffer(wav.readframes(wav.getnframes()), dtype="<i2").astype(np.float32) / 32768.0


@pytest.fixture(scope="module")
def manifest() -> dict:
    return json.loads((FIXTURES / "manifest.json").read_text())


def test_word_errors_counts_substitutions_insertions_deletions() -> None:
    assert wer.word_errors("the cat sat", "the cat sat") == 0
    assert wer.word_errors("the cat sat", "the dog sat") == 1
    assert wer.word_errors("the cat sat", "the cat") == 1
    assert wer.word_errors("the cat", "the big cat sat") == 2
    assert wer.word_errors("a b c d", "") == 4
    assert wer.corpus_wer([("a b c d", "a b c d"), ("e f", "e x")]) == pytest.approx(1 / 6)
    assert wer.corpus_wer([("Hello, World.", "hello world")]) == 0.0
    with pytest.raises(ValueError):
        wer.corpus_wer([("", "x")])


def test_fixture_clips_are_small_16k_wavs(manifest: dict) -> None:
    splits = {entry["split"] for entry in manifest["clips"]}
    assert splits == set(TARGET_WER)
    total = sum((FIXTURES / e["wav"]).stat().st_size for e in manifest["clips"])
    assert total < 1024 * 1024
    for entry in manifest["clips"]:
        audio = read_wav(FIXTURES / entry["wav"])
        assert 1.5 < len(audio) / 16000 < 4.0
        assert np.abs(audio).max() > 0.05  # real speech, not silence


@pytest.mark.parametrize("split", sorted(TARGET_WER))
def test_torch_reference_outputs_are_real_words(manifest: dict, split: str) -> None:
    # The recorded torch greedy output of the shipped model must meet the quality targets on the fixture clips;
    # the engine has to meet them too (it must equal these outputs, test_engine_output_equals_torch_greedy).
    pairs = [(e["text"], e["torch_greedy_text"]) for e in manifest["clips"] if e["split"] == split]
    assert pairs
    assert wer.corpus_wer(pairs) <= TARGET_WER[split]


def test_bundled_samples_exist_with_transcripts() -> None:
    samples = json.loads((SAMPLES / "samples.json").read_text())["samples"]
    assert samples
    for sample in samples:
        audio = read_wav(SAMPLES / sample["wav"])
        assert 3.0 < len(audio) / 16000 < 6.0
        assert sample["text"] and "torch_greedy_text" in sample


def test_bundled_samples_are_transcribed_by_torch() -> None:
    samples = json.loads((SAMPLES / "samples.json").read_text())["samples"]
    # fixed sentences kept out of training, rendered by make_fixtures.py with held-out voices (chosen before training)
    assert (
        wer.corpus_wer([(s["text"], s["torch_greedy_text"]) for s in samples]) <= MEASURED_WER["test"] + 0.05
    )


@pytest.mark.slow
def test_engine_output_equals_torch_greedy(manifest: dict) -> None:
    from inference.engine import load_engine

    engine = load_engine(MODEL)
    try:
        for entry in manifest["clips"]:
            transcript = engine.transcribe(
                read_wav(FIXTURES / entry["wav"]), audio_chunk_mode="none"
            )  # no speech gate: torch decodes the whole clip
            assert transcript.text == entry["torch_greedy_text"], entry["id"]
            assert list(transcript.token_ids) == entry["torch_greedy_token_ids"], entry["id"]
    finally:
        engine.close()


@pytest.mark.slow
def test_default_path_wer_on_fixtures_is_within_the_bound(manifest: dict) -> None:
    # The default path (speech gate on) is what a user gets; its WER, not only full context's, is bounded.
    from inference.engine import load_engine

    with load_engine(MODEL) as engine:  # type: ignore[attr-defined]
        for split, target in TARGET_WER.items():
            clips = [e for e in manifest["clips"] if e["split"] == split]
            pairs = [(e["text"], engine.transcribe(read_wav(FIXTURES / e["wav"])).text) for e in clips]
            assert wer.corpus_wer(pairs) <= target, split
