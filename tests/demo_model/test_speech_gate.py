"""The demo model invents words in noise; its folder asks for a speech gate (captioneer_model.json), so only the
Silero VAD's speech reaches it, offline and live. The 10-minute figure: tests/bench/bench_false_words.py."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from inference.audio.io import load_audio_file
from inference.engine import load_engine
from inference.errors import ModelError
from tests.conftest import REPO_ROOT
from tests.nonspeech import KINDS, nonspeech

MODEL = REPO_ROOT / "resources" / "demo_model"


@pytest.fixture(scope="module")
def engine():  # type: ignore[no-untyped-def]
    with load_engine(MODEL, threads=2) as loaded:  # type: ignore[attr-defined]
        yield loaded


def test_non_speech_gives_no_words_through_the_gate(engine) -> None:  # type: ignore[no-untyped-def]
    ungated = 0
    for kind in KINDS:
        audio = nonspeech(kind, 8.0)
        assert engine.transcribe(audio).text == "", kind
        ungated += len(engine.transcribe(audio, audio_chunk_mode="none").text.split())
    assert ungated > 5  # without the gate the model does invent words: the gate is what removes them


def test_the_gate_keeps_sentences_whole(engine) -> None:  # type: ignore[no-untyped-def]
    # 2 s VAD spans (the option's default) cut "garden" and added a stray "gl"; gated spans reach 20 s.
    audio = load_audio_file(REPO_ROOT / "resources" / "samples" / "demo_sample_2.wav")
    cut = engine.transcribe(audio, audio_chunk_mode="vad", audio_chunk_duration_sec=2.0)
    assert cut.text == "there are twenty hearts in the gl garden"
    assert engine.transcribe(audio).text == "there are twenty hearts in the garden"
    assert engine.capabilities.speech_gate


def test_speech_in_noise_is_still_transcribed(engine) -> None:  # type: ignore[no-untyped-def]
    speech = load_audio_file(REPO_ROOT / "resources" / "samples" / "demo_sample_1.wav")
    padded = np.concatenate([nonspeech("white_1e-3", 6.0), speech, nonspeech("white_1e-3", 6.0, seed=8)])
    assert engine.transcribe(padded).text == "emma quickly closed the early bottle and sang"


def test_a_bad_gate_file_is_refused_by_name(tmp_path: Path) -> None:
    model = Path(shutil.copytree(MODEL, tmp_path / "demo"))
    (model / "captioneer_model.json").write_text(json.dumps({"speech_gate": {"max_span_sec": "long"}}))
    with pytest.raises(ModelError) as refused:
        load_engine(model)
    assert "captioneer_model.json" in refused.value.message and "max_span_sec" in refused.value.message


def test_live_captions_of_the_demo_are_vad_segmented_and_stay_empty_in_noise() -> None:
    from inference.client import WorkerClient
    from inference.contract import SAMPLE_RATE

    speech = load_audio_file(REPO_ROOT / "resources" / "samples" / "demo_sample_1.wav")
    audio = np.concatenate(
        [nonspeech("chords", 6.0), nonspeech("white_1e-3", 4.0), speech, np.zeros(SAMPLE_RATE)]
    )
    with WorkerClient() as client:
        stream = client.load(str(MODEL)).open_stream()
        assert stream.kind == "segmented"  # "auto" on a gated model: only VAD speech reaches it
        step = int(0.32 * SAMPLE_RATE)
        for start in range(0, audio.size, step):
            stream.push(audio[start : start + step])
        final = stream.finish(timeout=60)
    assert final.text.strip() == "emma quickly closed the early bottle and sang"
