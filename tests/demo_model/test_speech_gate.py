"""The demo model invents words in noise; its folder asks for a speech gate (captioneer_model.json), so only the
Silero VAD's speech reaches its transcripts, offline and live, and one VAD pass per live segment does it. The
10-minute figure: tests/bench/bench_false_words.py; WER on the held-out splits: tests/bench/bench_speech_gate.py."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from inference.audio.io import load_audio_file
from inference.engine import load_engine
from inference.errors import ModelError
from inference.streaming import SegmentedStream
from tests.conftest import REPO_ROOT
from tests.demo_model.test_fixtures_and_wer import wer
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
    # Explicit 2 s VAD spans (the option's default) cut "garden" and add a stray "gl"; the gate's windows do not.
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


def fixture_clips() -> list[tuple[str, str, np.ndarray]]:
    """(split, text, audio) of the committed held-out fixtures (3 clips per split)."""
    fixtures = REPO_ROOT / "tests" / "fixtures" / "demo_model"
    manifest = json.loads((fixtures / "manifest.json").read_text())
    return [(e["split"], e["text"], load_audio_file(fixtures / e["wav"])) for e in manifest["clips"]]


def test_a_long_recording_is_decoded_window_by_window(engine) -> None:  # type: ignore[no-untyped-def]
    # The nine clips one after another, 1.5 s apart, in steady noise: the model, trained on clips of a few seconds,
    # loses many words when it hears the whole 33 s at once; decoding each speech window in context does not.
    clips = fixture_clips()
    gap = np.zeros(24000, np.float32)
    audio = np.concatenate([part for _, _, clip in clips for part in (clip, gap)])
    audio = audio + nonspeech("white_1e-3", audio.size / 16000, seed=5)
    reference = " ".join(text for _, text, _ in clips)
    gated = wer.word_errors(reference, engine.transcribe(audio).text)
    full = wer.word_errors(reference, engine.transcribe(audio, audio_chunk_mode="none").text)
    assert gated < full


def missing_vad_engine(tmp_path: Path):  # type: ignore[no-untyped-def]
    """The demo with a VAD model path that does not exist: any VAD pass of the engine's own fails loudly."""
    return load_engine(MODEL, session_options={"vad_model_path": str(tmp_path / "none.onnx")}, threads=2)


def test_speech_checked_audio_runs_no_vad_pass(tmp_path: Path) -> None:
    speech = load_audio_file(REPO_ROOT / "resources" / "samples" / "demo_sample_1.wav")
    with missing_vad_engine(tmp_path) as engine:  # type: ignore[attr-defined]
        with pytest.raises(ModelError, match="Silero VAD model not found"):
            engine.transcribe(speech)  # the gate's own pass needs the VAD
        checked = engine.transcribe(speech, speech_checked=True)
        assert checked.text == engine.transcribe(speech, audio_chunk_mode="none").text
        assert checked.text == "emma quickly closed the early bottle and sang"


def test_a_vad_segmented_stream_tells_the_engine_its_audio_is_speech(tmp_path: Path) -> None:
    from inference.audio.vad import SileroVad
    from inference.contract import SAMPLE_RATE

    speech = load_audio_file(REPO_ROOT / "resources" / "samples" / "demo_sample_1.wav")
    audio = np.concatenate([np.zeros(SAMPLE_RATE, np.float32), speech, np.zeros(SAMPLE_RATE, np.float32)])
    with missing_vad_engine(tmp_path) as engine:  # type: ignore[attr-defined]
        stream = SegmentedStream(engine, SileroVad())  # the segmenter's own VAD is the only one that runs
        for start in range(0, audio.size, 5120):
            stream.push(audio[start : start + 5120])
        assert stream.finish().text == "emma quickly closed the early bottle and sang"
