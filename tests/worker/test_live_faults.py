"""Fault injection on the live path: real worker processes killed with SIGKILL at many moments of a stream (inside
a sentence, at its end, in a pause, during the replay, twice in a row); the committed text must equal the
undisturbed run's. No mock of the client: the real supervisor notices the death, restarts the worker, reloads
the model and replays the audio since the stream's last commit point."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import pytest

from inference.client import BacklogPolicy, RemoteEngine, WorkerClient, WorkerPolicy
from inference.contract import SAMPLE_RATE, Delta, ErrorEvent, Transcript
from tests.conftest import REPO_ROOT
from tests.long_speech import Recording, espeak_available, recording
from tests.worker.test_worker import Recorder, wait_until

DEMO = REPO_ROOT / "resources" / "demo_model"
STEP = 5120  # 320 ms, as the app pushes
# Many restarts in a short test: the circuit breaker must not trip, and restarts should not wait.
KILLABLE = WorkerPolicy(ping_interval_s=0.1, ping_timeout_s=20.0, max_restarts=50, backoff_s=(0.0,))

pytestmark = pytest.mark.skipif(not espeak_available(), reason="needs espeak-ng for speech")


@dataclass
class Kill:
    at_s: float  # kill once the worker has answered for this much audio
    then_again: bool = False  # kill the restarted worker again as soon as it is up (during its replay)


@dataclass
class Outcome:
    final: Transcript
    committed: str
    restarts: list[ErrorEvent]


def stream_with_kills(
    client: WorkerClient, engine: RemoteEngine, audio: np.ndarray, kills: list[Kill], **open_options: object
) -> Outcome:
    recorder = Recorder()
    stream = engine.open_stream(
        on_events=recorder, backlog=BacklogPolicy("block", max_in_flight=2, max_backlog_s=2.0), **open_options
    )  # type: ignore[arg-type]
    pending = sorted(kills, key=lambda k: k.at_s)
    for start in range(0, audio.size, STEP):
        stream.push(audio[start : start + STEP])
        while pending and stream.stats().audio_s >= pending[0].at_s:
            kill = pending.pop(0)
            murder(client)
            if kill.then_again:
                wait_until(lambda: not client.restarting and stream.ready, 60, "the restarted worker")
                murder(client)
    final = stream.finish(timeout=300)
    restarts = [e for e in recorder.of(ErrorEvent) if e.kind == "worker_restarted"]
    committed = "".join(e.text for e in recorder.of(Delta))
    assert committed == stream.committed_text
    return Outcome(final, committed, restarts)  # type: ignore[arg-type]


def murder(client: WorkerClient) -> None:
    generation, pid = client.generation, client.pid
    assert pid is not None
    os.kill(pid, signal.SIGKILL)
    wait_until(lambda: client.generation > generation, 60, "a new worker")


def kill_plan(talk: Recording, count: int) -> list[Kill]:
    """``count`` kills spread over the recording at varied moments; two of them kill the replacement too."""
    kills = []
    sentences = talk.sentences[1:-1]
    for index in range(count):
        _, start, end = sentences[index * len(sentences) // count]
        moment = [start + 0.4 * (end - start), end + 0.02, end + 0.4, start + 0.9 * (end - start)][index % 4]
        kills.append(Kill(moment, then_again=index in (2, count - 2)))
    return kills


@pytest.fixture(scope="module")
def talk() -> Recording:
    return recording(180.0, seed=11)


@pytest.fixture
def client() -> Iterator[WorkerClient]:
    with WorkerClient(KILLABLE) as started:
        yield started


def test_the_app_s_segmented_demo_stream_loses_nothing_to_a_dozen_kills(
    client: WorkerClient, talk: Recording
) -> None:
    engine = client.load(DEMO)
    undisturbed = stream_with_kills(client, engine, talk.audio, [], mode="segmented")
    kills = kill_plan(talk, 12)
    killed = stream_with_kills(client, engine, talk.audio, kills, mode="segmented")
    assert len(killed.restarts) == 12 + 2  # every death reported, the doubles included
    assert all("SIGKILL" in e.message and not e.fatal for e in killed.restarts)
    assert killed.final.text == undisturbed.final.text  # word for word
    assert killed.committed.split() == undisturbed.committed.split()


def test_a_parakeet_buffered_stream_loses_nothing_to_kills(client: WorkerClient, talk: Recording) -> None:
    engine = client.load(DEMO)
    audio = talk.audio[: 60 * SAMPLE_RATE]
    undisturbed = stream_with_kills(client, engine, audio, [], mode="native")
    kills = [Kill(t) for t in (5.3, 12.0, 19.7, 27.1, 33.3, 40.9)] + [Kill(47.5, then_again=True)]
    killed = stream_with_kills(client, engine, audio, kills, mode="native")
    assert len(killed.restarts) == 8
    # The replacement continues the window schedule with the decoder's state: word for word.
    assert killed.final.text == undisturbed.final.text
    assert killed.committed == undisturbed.committed


def test_an_r2t2_stream_on_the_tiny_model_loses_nothing_to_kills(client: WorkerClient, tmp_path) -> None:
    from tests.confucius4_r2t2.r2t2_fixtures import HF_CHECKPOINT, stream_variant

    model = stream_variant(HF_CHECKPOINT, tmp_path / "w800", 800)  # a fixture whose random weights emit text
    # One unendpointed segment: the LSP's own state is what must carry over character for character.
    engine = client.load(model, session_options={"endpointing": False}, threads=2)
    audio = recording(40.0, seed=12).audio
    options = {"language": "English", "chunk_size_ms": 1000, "max_tokens": 16}
    undisturbed = stream_with_kills(client, engine, audio, [], **options)
    kills = [Kill(t) for t in (4.2, 11.0, 17.5, 24.0)] + [Kill(30.0, then_again=True)]
    killed = stream_with_kills(client, engine, audio, kills, **options)
    assert len(killed.restarts) == 6
    assert len(undisturbed.committed.split()) >= 10  # the random model does commit (degenerate) text
    assert killed.committed == undisturbed.committed  # the LSP prefix carries over: character for character
    assert killed.final.text == undisturbed.final.text


def test_an_endpointed_r2t2_stream_on_the_tiny_model_ends_every_segment_where_it_would_have(
    client: WorkerClient, tmp_path
) -> None:
    """The replacement picks up the dead worker's Silero state on the same 32 ms frame grid (1000 ms chunks do
    not fall on it), so not only the committed text but every segment's span and final text are the same."""
    from tests.confucius4_r2t2.r2t2_fixtures import HF_CHECKPOINT, stream_variant

    model = stream_variant(HF_CHECKPOINT, tmp_path / "w800", 800)
    engine = client.load(model, threads=2)  # endpointing is the live default
    talk = recording(40.0, seed=12)
    options = {"language": "English", "chunk_size_ms": 1000, "max_tokens": 16}
    undisturbed = stream_with_kills(client, engine, talk.audio, [], **options)
    assert len(undisturbed.final.segments) >= 3
    # Inside a sentence, just after one ends, in a pause, and the replacement killed during its replay.
    kills = kill_plan(talk, 4)
    killed = stream_with_kills(client, engine, talk.audio, kills, **options)
    assert len(killed.restarts) == 4 + 1
    assert killed.committed == undisturbed.committed
    assert killed.final.text == undisturbed.final.text
    spans = [(s.text, round(s.start_s, 6), round(s.end_s, 6)) for s in killed.final.segments]
    assert spans == [(s.text, round(s.start_s, 6), round(s.end_s, 6)) for s in undisturbed.final.segments]
