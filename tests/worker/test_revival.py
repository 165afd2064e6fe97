"""Past the restart limit the client is down, not dead: its streams stay open and hold their newest audio, and a
revived worker (the supervisor's try after ``revive_after_s``, or ``WorkerClient.revive()``) takes them over with
their committed text intact. Real worker processes, killed with SIGKILL."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import numpy as np
import pytest

from inference.client import BacklogPolicy, RemoteStream, WorkerClient, WorkerPolicy
from inference.contract import SAMPLE_RATE, Delta, ErrorEvent
from inference.errors import WorkerError
from tests.worker.test_worker import CHUNK, FAULTY, Recorder, wait_until


def _kill_until_down(client: WorkerClient, recorder: Recorder) -> None:
    pid = client.pid
    assert pid is not None
    os.kill(pid, signal.SIGKILL)
    wait_until(lambda: client.gave_up is not None, 60, "the client to give up")
    wait_until(lambda: any(e.kind == "worker_failed" for e in recorder.of(ErrorEvent)), 10, "the note")  # type: ignore[attr-defined]


def _push_answered(stream: RemoteStream, text: str) -> None:
    stream.push(CHUNK)
    wait_until(lambda: stream.committed_text.endswith(text), 30, f"{text!r} committed")


def test_a_stream_holds_its_newest_audio_while_down_and_resumes_on_a_revived_worker() -> None:
    # The first death trips the limit; no revival comes by itself in this test: revive() brings it.
    policy = WorkerPolicy(ping_interval_s=0.2, max_restarts=0, backoff_s=(0.0,), revive_after_s=(3600.0,))
    recorder = Recorder()
    with WorkerClient(policy) as client:
        engine = client.load("unused", factory=FAULTY)
        stream = engine.open_stream(on_events=recorder, backlog=BacklogPolicy("coalesce", max_backlog_s=1.0))
        for word in ("w1", "w2", "w3"):
            _push_answered(stream, word)
        _kill_until_down(client, recorder)
        note = next(e for e in recorder.of(ErrorEvent) if e.kind == "worker_failed")
        assert not note.fatal and "stays open" in note.message and "newest 1 s" in note.message  # type: ignore[attr-defined]
        for value in range(5):  # 1.6 s while down: the newest 1.0 s is held, the first 0.6 s dropped
            assert stream.push(np.full(CHUNK.size, 0.01 * value, np.float32)) is not None
        assert not stream.ready and stream.committed_text == "w1 w2 w3"  # all three were answered
        with pytest.raises(WorkerError, match="stopped restarting"):
            engine.transcribe(CHUNK)  # requests fail at once while down

        client.revive()
        assert client.gave_up is None and client.generation == 2
        wait_until(lambda: stream.ready and not client.restarting, 30, "the stream reopened")
        wait_until(lambda: stream.committed_text.endswith(" w1"), 30, "the held audio transcribed")
        _push_answered(stream, "w2")
        final = stream.finish()

    gap = "[… 1.0–1.6 s not transcribed …]"  # from the trip (0.96 s) to the held audio (2.56 - 1.0 s)
    assert final.text == f"w1 w2 w3 {gap} w1 w2"
    deltas = recorder.of(Delta)
    assert "".join(d.text for d in deltas).strip() == final.text  # type: ignore[attr-defined]
    held = next(d for d in deltas if d.text == " w1")  # type: ignore[attr-defined]
    assert held.start_s == pytest.approx(1.56) and held.end_s == pytest.approx(2.56)  # type: ignore[attr-defined]
    resumed = [e for e in recorder.of(ErrorEvent) if e.kind == "worker_resumed"]
    assert len(resumed) == 1 and "1.0 s of audio held" in resumed[0].message  # type: ignore[attr-defined]
    assert stream.stats().audio_s == pytest.approx(2.88)  # answered to the end: 0.96 + 1.6 + 0.32 s pushed


def test_the_supervisor_revives_the_worker_after_its_back_off() -> None:
    statuses: list[str] = []
    policy = WorkerPolicy(ping_interval_s=0.2, max_restarts=0, backoff_s=(0.0,), revive_after_s=(0.5,))
    recorder = Recorder()
    with WorkerClient(policy, on_status=statuses.append) as client:
        engine = client.load("unused", factory=FAULTY)
        stream = engine.open_stream(on_events=recorder)
        _push_answered(stream, "w1")
        _kill_until_down(client, recorder)
        wait_until(lambda: client.gave_up is None and not client.restarting, 60, "the revival")
        wait_until(lambda: stream.ready, 30, "the stream reopened")
        _push_answered(stream, "w1 w1")
        assert engine.transcribe(np.zeros(SAMPLE_RATE, np.float32)).text.startswith("16000 samples")
        final = stream.finish()
    assert final.text == "w1 w1" and client.generation == 2
    assert any("revived after" in s for s in statuses), statuses
    assert not [e for e in recorder.of(ErrorEvent) if e.fatal]  # type: ignore[attr-defined]


def test_a_revival_that_fails_leaves_the_client_down_and_the_next_one_resumes(tmp_path: Path) -> None:
    """The fresh worker of the first revival dies loading the model: the client stays down and says why, the
    stream keeps holding; the next revival works and the stream goes on."""
    marker = tmp_path / "fired"
    marker.write_text("not yet")  # while it exists the load fault does not fire
    policy = WorkerPolicy(ping_interval_s=0.2, max_restarts=0, backoff_s=(0.0,), revive_after_s=(3600.0,))
    recorder = Recorder()
    with WorkerClient(policy) as client:
        options = {"load_fault": "exit", "fault_once": str(marker)}
        engine = client.load("unused", session_options=options, factory=FAULTY)
        stream = engine.open_stream(on_events=recorder)
        _push_answered(stream, "w1")
        _kill_until_down(client, recorder)
        marker.unlink()  # the next load (the revived worker's) exits, once
        stream.push(CHUNK)
        with pytest.raises(WorkerError, match="a fresh worker failed as well"):
            client.revive()
        assert client.gave_up is not None and marker.exists() and not stream.ready
        stream.push(CHUNK)
        client.revive()
        wait_until(lambda: stream.ready and not client.restarting, 30, "the stream reopened")
        wait_until(lambda: stream.committed_text.endswith(" w1"), 30, "the held audio transcribed")
        final = stream.finish()
    assert final.text == "w1 w1"  # both chunks held across the failed attempt, sent as one push
    assert stream.stats().audio_s == pytest.approx(0.96)


def test_a_stream_ended_while_down_gives_what_it_heard_with_the_held_audio_marked() -> None:
    policy = WorkerPolicy(ping_interval_s=0.2, max_restarts=0, backoff_s=(0.0,), revive_after_s=())
    recorder = Recorder()
    with WorkerClient(policy) as client:
        engine = client.load("unused", factory=FAULTY)
        stream = engine.open_stream(on_events=recorder)
        _push_answered(stream, "w1")
        _kill_until_down(client, recorder)
        note = next(e for e in recorder.of(ErrorEvent) if e.kind == "worker_failed")
        assert "no fresh one is tried" in note.message  # type: ignore[attr-defined]
        stream.push(CHUNK)
        stream.push(CHUNK)
        with pytest.raises(WorkerError, match="stopped restarting"):
            stream.finish()
    assert stream.heard().text == "w1 [… 0.3–1.0 s not transcribed …]"
    assert "".join(d.text for d in recorder.of(Delta)) == stream.committed_text  # type: ignore[attr-defined]


def test_four_deaths_in_the_window_trip_the_limit_and_the_revived_worker_takes_the_stream_over() -> None:
    """The issue's case: a worker killed four times within the restart window (limit 3)."""
    policy = WorkerPolicy(ping_interval_s=0.2, max_restarts=3, backoff_s=(0.0,), revive_after_s=(0.5,))
    recorder = Recorder()
    with WorkerClient(policy) as client:
        engine = client.load("unused", factory=FAULTY)
        stream = engine.open_stream(on_events=recorder)
        for death in range(1, 4):
            stream.push(CHUNK)
            text = " ".join(["w1"] * death)  # each new worker's stream numbers its words afresh
            wait_until(lambda: stream.committed_text == text, 30, f"{text!r} committed")  # noqa: B023
            os.kill(client.pid or 0, signal.SIGKILL)
            wait_until(lambda: client.generation == death + 1, 60, "a restart")  # noqa: B023
            wait_until(lambda: stream.ready and not client.restarting, 60, "the stream reopened")
        stream.push(CHUNK)
        wait_until(lambda: stream.committed_text == "w1 w1 w1 w1", 30, "the fourth word")
        before = stream.committed_text
        _kill_until_down(client, recorder)
        stream.push(CHUNK)  # held
        wait_until(
            lambda: client.gave_up is None and not client.restarting and stream.ready, 60, "the revival"
        )
        wait_until(lambda: stream.committed_text == "w1 w1 w1 w1 w1", 30, "the held audio transcribed")
        _push_answered(stream, "w2")
        final = stream.finish()
    assert before == "w1 w1 w1 w1" and final.text == "w1 w1 w1 w1 w1 w2"  # nothing lost: all pushes answered
    kinds = [e.kind for e in recorder.of(ErrorEvent)]  # type: ignore[attr-defined]
    restarts = ["worker_restarted", "worker_resumed"] * 3
    assert kinds == [*restarts, "worker_restarted", "worker_failed", "worker_resumed"], kinds
    assert client.generation == 5 and stream.stats().audio_s == pytest.approx(6 * CHUNK.size / SAMPLE_RATE)
