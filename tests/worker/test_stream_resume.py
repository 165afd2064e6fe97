"""A live stream replaced mid-way (as after a worker death) by one resumed from its last commit point gives the
undisturbed text: VAD segments and Parakeet buffered windows on the bundled demo model, in process."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest

from inference.audio.vad import SileroVad
from inference.contract import SAMPLE_RATE, Engine
from inference.engine import load_engine
from inference.streaming import SegmentedStream
from tests.conftest import REPO_ROOT
from tests.long_speech import Recording, espeak_available, recording
from tests.stream_handover import run_with_handovers
from tests.text_metrics import word_edits

DEMO = REPO_ROOT / "resources" / "demo_model"
STEP = 5120  # the app's 320 ms pushes

pytestmark = pytest.mark.skipif(not espeak_available(), reason="needs espeak-ng for speech")


@pytest.fixture(scope="module")
def demo() -> Iterator[Engine]:
    engine = load_engine(DEMO, threads=2)
    yield engine
    engine.close()  # type: ignore[attr-defined]


@pytest.fixture(scope="module")
def talk() -> Recording:
    return recording(45.0, seed=5)


def moments(talk: Recording) -> list[int]:
    """Inside sentences (early and late), right after a sentence ends, and in the middle of pauses."""
    cuts = []
    for index, (_, start, end) in enumerate(talk.sentences[:-1]):
        next_start = talk.sentences[index + 1][1]
        cuts.append(
            [start + 0.3 * (end - start), end + 0.05, (end + next_start) / 2, start + 0.8 * (end - start)][
                index % 4
            ]
        )
    return [int(c * SAMPLE_RATE) for c in cuts]


def test_vad_segments_resume_at_every_kind_of_moment(demo: Engine, talk: Recording) -> None:
    def make() -> SegmentedStream:
        return SegmentedStream(demo, SileroVad(), {})

    undisturbed = run_with_handovers(make, talk.audio, [], STEP)
    assert word_edits(undisturbed.final.text, talk.text) <= len(talk.text.split()) // 10  # the model works
    cuts = moments(talk)
    run = run_with_handovers(make, talk.audio, cuts, STEP)
    assert run.streams == len(cuts) + 1 >= 10
    assert run.final.text == undisturbed.final.text
    assert run.committed.split() == undisturbed.committed.split()
    assert [round(e.start_s, 2) for e in run.speech_ends] == [
        round(e.start_s, 2) for e in undisturbed.speech_ends
    ]


def test_vad_segments_of_talk_that_runs_on_resume_and_split_where_they_would_have(demo: Engine) -> None:
    """Sentences 0.1-0.25 s apart end no segment by the 0.5 s rule; past 8 s a short pause splits one. A
    replacement replays the open segment from its start, so it splits at the same pause."""
    talk = recording(45.0, seed=5, pause_s=(0.1, 0.25), trim=True)

    def make() -> SegmentedStream:
        return SegmentedStream(demo, SileroVad(), {})

    undisturbed = run_with_handovers(make, talk.audio, [], STEP)
    assert len(undisturbed.speech_ends) >= 4  # 45 s of talk in segments of at most ~8-15 s
    cuts = moments(talk)
    run = run_with_handovers(make, talk.audio, cuts, STEP)
    assert run.final.text == undisturbed.final.text
    assert [round(e.start_s, 2) for e in run.speech_ends] == [
        round(e.start_s, 2) for e in undisturbed.speech_ends
    ]


def test_buffered_windows_resume_on_the_same_window_schedule_and_give_the_same_text(
    demo: Engine, talk: Recording
) -> None:
    """The replacement continues the dead stream's window schedule with its decoder state and uncommitted tokens:
    the same windows, the same tokens, word for word."""
    undisturbed = run_with_handovers(demo.open_stream, talk.audio, [], STEP)  # type: ignore[arg-type]
    cuts = moments(talk)
    run = run_with_handovers(demo.open_stream, talk.audio, cuts, STEP)  # type: ignore[arg-type]
    assert run.streams == len(cuts) + 1
    assert run.committed == undisturbed.committed
    assert run.final.text == undisturbed.final.text
    # The last replacement's words (those before it lived in the dead workers) at the same times.
    words = [(w.text, round(w.start_s, 3), round(w.end_s, 3)) for w in run.final.words]
    assert words and words == [
        (w.text, round(w.start_s, 3), round(w.end_s, 3)) for w in undisturbed.final.words[-len(words) :]
    ]


def test_a_resume_point_never_lies_past_audio_that_still_lacks_committed_text(
    demo: Engine, talk: Recording
) -> None:
    stream = demo.open_stream()
    committed = ""
    for start in range(0, talk.audio.size, STEP):
        committed += "".join(
            e.text for e in stream.push(talk.audio[start : start + STEP]) if e.type == "delta"
        )
        point = stream.resume_point()  # type: ignore[attr-defined]
        assert 0 <= point.start_sample <= start + STEP
        assert point.context_samples <= 10 * SAMPLE_RATE  # at most the left context
    final = stream.finish()
    assert final.text.startswith(committed.strip())


def test_a_replay_buffer_holds_only_what_a_restart_needs(demo: Engine, talk: Recording) -> None:
    from inference.replay import ReplayBuffer

    buffer = ReplayBuffer(150 * SAMPLE_RATE)
    stream = SegmentedStream(demo, SileroVad(), {})
    held = []
    for start in range(0, talk.audio.size, STEP):
        chunk = talk.audio[start : start + STEP]
        buffer.sent(chunk)
        stream.push(chunk)
        buffer.answered(chunk.size, stream.resume_point().to_json())
        held.append(buffer.held_samples)
    # a pause closes the segment: the buffer shrinks to the pre-roll, never grows with the recording
    assert max(held) < 12 * SAMPLE_RATE and min(held[20:]) <= 0.6 * SAMPLE_RATE + STEP
    assert np.mean(held) < 4 * SAMPLE_RATE
