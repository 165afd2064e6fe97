"""A file fed in blocks (``ParakeetEngine.open_offline_job``) gives the whole-clip transcript, word for word and
time for time, in every plan: the demo's speech-gate windows, long-form windows, VAD chunks, full context, and
the gate's "words" margin; blocks cut anywhere; digital silence around speech."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from inference.audio.io import load_audio_file
from inference.contract import CancelToken, Progress, Transcript
from inference.engine import load_engine
from inference.errors import Cancelled
from inference.offline_jobs import open_offline_job
from tests.conftest import FIXTURES, REPO_ROOT
from tests.long_speech import espeak_available, recording

MODEL = REPO_ROOT / "resources" / "demo_model"


@pytest.fixture(scope="module")
def engine():  # type: ignore[no-untyped-def]
    with load_engine(MODEL, threads=2) as loaded:  # type: ignore[attr-defined]
        yield loaded


def blocks(audio: np.ndarray, seed: int) -> Iterator[np.ndarray]:
    """The audio in blocks of random sizes (some tiny, some empty, some many seconds); seed 0: 1 s blocks."""
    rng = np.random.default_rng(seed)
    start = 0
    while start < audio.size:
        size = int(rng.choice([0, 1, 511, 513, 4000, 16000, 160_000, 400_000])) if seed else 16000
        yield audio[start : start + size]
        start += size


def fed(engine: Any, audio: np.ndarray, seed: int = 0, **options: Any) -> Transcript:
    job = open_offline_job(engine, **options)
    for pass_no in range(job.passes):
        for block in blocks(audio, seed + pass_no):
            job.feed(block)
        job.end_pass()
    return job.finish()


def same(a: Transcript, b: Transcript) -> None:
    left, right = a.to_json(), b.to_json()
    left.pop("timing", None)
    right.pop("timing", None)
    assert left == right


def test_fixtures_in_blocks_give_the_whole_clip_transcript(engine) -> None:  # type: ignore[no-untyped-def]
    for wav in sorted((FIXTURES / "demo_model").glob("*.wav")):
        audio = load_audio_file(wav)
        same(fed(engine, audio, seed=len(wav.name)), engine.transcribe(audio))


@pytest.mark.skipif(not espeak_available(), reason="needs espeak-ng for speech")
@pytest.mark.parametrize(
    "options",
    [
        {},  # the demo's speech gate: VAD speech windows
        {"audio_chunk_mode": "fixed"},  # long-form windows, one decoder state across them
        {"audio_chunk_mode": "vad", "audio_chunk_duration_sec": 8.0},  # VAD chunks
        {"audio_chunk_mode": "none"},  # full context
        {"max_tokens": 40},  # the token budget runs out part way
    ],
)
def test_long_speech_in_blocks_gives_the_whole_clip_transcript(engine, options) -> None:  # type: ignore[no-untyped-def]
    talk = recording(75.0, seed=43)
    silence = np.zeros(16000 * 7 + 123, np.float32)
    audio = np.concatenate([silence, talk.audio, silence, talk.audio[: 16000 * 5]])
    whole = engine.transcribe(audio, **options)
    assert len(whole.text.split()) > (10 if "max_tokens" in options else 60)
    same(fed(engine, audio, seed=7, **options), whole)
    same(fed(engine, audio, seed=0, **options), whole)  # leading digital silence in blocks of its own


@pytest.mark.skipif(not espeak_available(), reason="needs espeak-ng for speech")
def test_the_words_gate_and_long_form_in_blocks(tmp_path: Path) -> None:
    model = Path(shutil.copytree(MODEL, tmp_path / "words_gate"))
    spec = json.loads((model / "captioneer_model.json").read_text())
    spec["speech_gate"] = {"method": "words", "margin_sec": 0.5}
    (model / "captioneer_model.json").write_text(json.dumps(spec))
    config = json.loads((model / "config.json").read_text())
    config["encoder_config"]["max_position_embeddings"] = (
        256  # about 20 s: longer clips use long-form windows
    )
    (model / "config.json").write_text(json.dumps(config))
    audio = recording(45.0, seed=44).audio
    with load_engine(model, threads=2) as words_gate:  # type: ignore[attr-defined]
        whole = words_gate.transcribe(audio)
        assert len(whole.text.split()) > 30
        same(fed(words_gate, audio, seed=3), whole)


def test_digital_silence_and_nothing(engine) -> None:  # type: ignore[no-untyped-def]
    for audio in (np.zeros(0, np.float32), np.zeros(16000 * 90, np.float32)):
        same(fed(engine, audio), engine.transcribe(audio))
        assert fed(engine, audio).text == ""


def test_progress_and_cancel(engine) -> None:  # type: ignore[no-untyped-def]
    audio = load_audio_file(REPO_ROOT / "resources" / "samples" / "demo_sample_2.wav")
    audio = np.concatenate([audio, np.zeros(16000 * 3, np.float32), audio])
    seen: list[Progress] = []
    job = open_offline_job(engine, progress=seen.append)
    for _ in range(job.passes):
        job.feed(audio)
        job.end_pass()
    job.finish()
    assert seen and seen[-1].done == seen[-1].total == audio.size / 16000
    cancel = CancelToken()
    job = open_offline_job(engine, cancel=cancel)
    job.feed(audio)
    cancel.cancel()
    with pytest.raises(Cancelled):
        job.feed(audio)
