"""Live captions of the demo model (a speech gate that decodes windows) are its offline transcript of the same
audio, word for word: undisturbed, pushed in odd pieces, and across replacements of the stream."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest

from inference.contract import SAMPLE_RATE, Delta, Engine, Snapshot, SpeechEnd
from inference.engine import load_engine
from inference.streaming import SegmentedStream, open_vad_stream
from inference.streaming_windows import SpeechWindowStream
from tests.conftest import REPO_ROOT
from tests.long_speech import Recording, espeak_available, recording
from tests.stream_handover import run_with_handovers

DEMO = REPO_ROOT / "resources" / "demo_model"

pytestmark = pytest.mark.skipif(not espeak_available(), reason="needs espeak-ng for speech")


@pytest.fixture(scope="module")
def demo() -> Iterator[Engine]:
    engine = load_engine(DEMO, threads=2)
    yield engine
    engine.close()  # type: ignore[attr-defined]


@pytest.fixture(scope="module")
def talk() -> Recording:
    return recording(40.0, seed=3)


@pytest.fixture(scope="module")
def offline_text(demo: Engine, talk: Recording) -> str:
    return demo.transcribe(talk.audio).text


def make(demo: Engine) -> SpeechWindowStream:
    stream = open_vad_stream(demo, True, {}, {})
    assert isinstance(stream, SpeechWindowStream)
    return stream


def test_the_live_text_is_the_offline_text(demo: Engine, talk: Recording, offline_text: str) -> None:
    stream = make(demo)
    rng = np.random.default_rng(0)
    events, position = [], 0
    while position < talk.audio.size:  # odd pieces: the VAD's frames stay aligned to the start of the stream
        size = int(rng.integers(100, 9000))
        events += stream.push(talk.audio[position : position + size])
        position += size
    events += stream.flush()
    final = stream.finish()
    assert len(offline_text.split()) > 50
    assert final.text == offline_text
    assert "".join(e.text for e in events if isinstance(e, Delta)) == final.text
    assert any(isinstance(e, Snapshot) for e in events)  # the open group is shown before it commits
    ends = [e for e in events if isinstance(e, SpeechEnd)]
    assert [e.start_s for e in ends] == sorted(e.start_s for e in ends)
    assert all(e.speech_start_s is not None and e.start_s <= e.speech_start_s < e.end_s for e in ends)


def test_a_replaced_stream_still_gives_the_offline_text(
    demo: Engine, talk: Recording, offline_text: str
) -> None:
    rng = np.random.default_rng(1)
    cuts = sorted(int(c) for c in rng.uniform(1, 39, 12) * SAMPLE_RATE)
    run = run_with_handovers(lambda: make(demo), talk.audio, cuts, 5120)
    assert run.streams == len(cuts) + 1
    assert run.final.text == offline_text
    assert offline_text.startswith(run.committed.strip())


def test_a_replay_buffer_holds_the_open_group_and_its_padding(demo: Engine, talk: Recording) -> None:
    from inference.replay import ReplayBuffer

    buffer = ReplayBuffer(150 * SAMPLE_RATE)
    stream = make(demo)
    held = []
    for start in range(0, talk.audio.size, 5120):
        chunk = talk.audio[start : start + 5120]
        buffer.sent(chunk)
        stream.push(chunk)
        buffer.answered(chunk.size, stream.resume_point().to_json())
        held.append(buffer.held_samples)
    # at most a group (20 s) and what follows it until it is final; it shrinks again after each commit
    assert max(held) < 25 * SAMPLE_RATE and min(held[20:]) < 3 * SAMPLE_RATE


def test_other_vad_streams_stay_segment_by_segment(demo: Engine) -> None:
    assert isinstance(open_vad_stream(demo, False, {}, {}), SegmentedStream)  # mode "segmented"
    assert isinstance(open_vad_stream(demo, True, {}, {"end_silence_s": 0.8}), SegmentedStream)
    assert isinstance(open_vad_stream(demo, True, {}, {"snapshot_every_s": 0}), SpeechWindowStream)
