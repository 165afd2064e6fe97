"""Streamed offline jobs through the real worker (``RemoteEngine.transcribe_blocks``, protocol ``OpenJob``): the
transcript of a file sent in blocks is the one ``transcribe`` gives for its whole clip, for a planning engine
(the demo model: two passes) and any other (the faulty test engine: the clip gathered once); progress arrives;
a cancellation or a dead worker ends the job with a clear error and the client stays usable."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from inference.audio.decoding import FileBlocks
from inference.audio.io import load_audio_file
from inference.audio.limits import AudioLimits
from inference.client import WorkerClient
from inference.contract import CancelToken, Progress
from inference.errors import Cancelled, WorkerError
from tests.conftest import FIXTURES, REPO_ROOT
from tests.worker.test_worker import FAST, FAULTY

DEMO = REPO_ROOT / "resources" / "demo_model"


@pytest.fixture
def client() -> Iterator[WorkerClient]:
    with WorkerClient(FAST) as started:
        yield started


def test_a_file_in_blocks_gives_the_whole_clip_transcript(client: WorkerClient, tmp_path: Path) -> None:
    engine = client.load(str(DEMO))
    wavs = sorted((FIXTURES / "demo_model").glob("*.wav"))[:3]
    silence = np.zeros(16000 * 4, np.float32)
    audio = np.concatenate([x for wav in wavs for x in (load_audio_file(wav), silence)])
    path = tmp_path / "talk.wav"
    import soundfile

    soundfile.write(path, audio, 16000, subtype="FLOAT")
    seen: list[Progress] = []
    source = FileBlocks(path, AudioLimits(3600))
    assert source.expected_samples == audio.size
    streamed = engine.transcribe_blocks(source, progress=seen.append)
    whole = engine.transcribe(audio)
    assert streamed.text == whole.text and len(whole.text.split()) > 10
    assert streamed.to_json()["words"] == whole.to_json()["words"]
    assert streamed.to_json()["segments"] == whole.to_json()["segments"]
    assert seen and seen[-1].done == seen[-1].total == pytest.approx(audio.size / 16000, abs=1e-3)


def test_any_engine_gets_every_block_in_order(client: WorkerClient) -> None:
    engine = client.load("unused", factory=FAULTY)
    audio = np.random.default_rng(1).uniform(-1, 1, 16000 * 7 + 5).astype(np.float32)

    def blocks() -> Iterator[np.ndarray]:
        for start in range(0, audio.size, 3001):
            yield audio[start : start + 3001]

    assert engine.transcribe_blocks(blocks).text == engine.transcribe(audio).text


def test_a_cancelled_job_ends_and_the_client_goes_on(client: WorkerClient) -> None:
    engine = client.load("unused", factory=FAULTY)
    cancel = CancelToken()

    def blocks() -> Iterator[np.ndarray]:
        for index in range(1000):
            if index == 5:
                cancel.cancel()  # the rest of the file is never sent
            yield np.zeros(1600, np.float32)

    with pytest.raises(Cancelled):
        engine.transcribe_blocks(blocks, cancel=cancel)
    assert engine.transcribe(np.zeros(1600, np.float32)).text.startswith("1600 samples")


def test_a_worker_that_dies_in_a_job_fails_it(client: WorkerClient) -> None:
    engine = client.load("unused", factory=FAULTY)
    with pytest.raises(WorkerError) as lost:
        engine.transcribe_blocks(lambda: iter([np.zeros(32000, np.float32)]), fault="segv")
    assert "lost" in lost.value.message
    assert engine.transcribe(np.zeros(1600, np.float32)).text.startswith("1600 samples")
