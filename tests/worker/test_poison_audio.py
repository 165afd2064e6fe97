"""Audio is given up as poison only when workers crash while decoding it, never for kills from outside.

Real worker processes and real signals: a worker SIGKILLed while it decodes a push (the user, the OOM killer,
a test) says nothing about that audio, however often it happens, and a restore slower than the ping limit
does not get the new worker killed for the silence nobody asked it to break.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

import numpy as np

from inference.client import BacklogPolicy, WorkerClient, WorkerPolicy
from inference.replay import POISON_DEATHS
from tests.worker.test_worker import CHUNK, FAULTY, Recorder, restarts, wait_until


def _lines(path: Path) -> int:
    return len(path.read_text().splitlines()) if path.exists() else 0


def test_a_worker_killed_from_outside_while_decoding_never_costs_audio(tmp_path: Path) -> None:
    policy = WorkerPolicy(ping_interval_s=0.2, ping_timeout_s=30.0, max_restarts=10, backoff_s=(0.0,))
    started_log = tmp_path / "started"
    with WorkerClient(policy) as client:
        recorder = Recorder()
        engine = client.load("unused", factory=FAULTY)
        stream = engine.open_stream(
            on_events=recorder,
            delay_s=0.5,
            started_log=str(started_log),
            backlog=BacklogPolicy(max_in_flight=1),
        )
        stream.push(np.full_like(CHUNK, 0.25))
        for kill in range(1, POISON_DEATHS + 2):  # one more than would give crashing audio up
            wait_until(lambda: _lines(started_log) == kill, what=f"decoding attempt {kill}")  # noqa: B023
            pid = client.pid
            assert pid is not None
            os.kill(pid, signal.SIGKILL)
            wait_until(lambda: len(restarts(recorder)) == kill, what=f"restart {kill}")  # noqa: B023
        final = stream.finish(timeout=60)
    assert "not transcribed" not in final.text
    assert final.text == stream.committed_text == "w1"  # decoded by the fourth worker, once
    assert not any("could not be transcribed" in e.message for e in restarts(recorder))


def test_a_restore_slower_than_the_ping_limit_keeps_its_new_worker(tmp_path: Path) -> None:
    # A 4 s load (20 steps of 0.2 s) against a 2 s ping limit: nobody pings a worker while it is restored.
    policy = WorkerPolicy(ping_interval_s=0.2, ping_timeout_s=2.0, backoff_s=(0.0,))
    statuses: list[str] = []
    with WorkerClient(policy, on_status=statuses.append) as client:
        recorder = Recorder()
        engine = client.load(
            "unused", factory=FAULTY, session_options={"load_steps": 20, "load_delay_s": 0.2}
        )
        stream = engine.open_stream(on_events=recorder, delay_s=1.0)  # each push spans 5 ping checks
        first = client.pid
        assert first is not None
        os.kill(first, signal.SIGKILL)
        wait_until(lambda: stream.ready and not client.restarting, timeout=60, what="the restored stream")
        stream.push(CHUNK)
        final = stream.finish(timeout=60)
    assert final.text == "w1"
    assert not any("stopped answering" in status for status in statuses), statuses
    assert len(restarts(recorder)) == 1 and client.generation == 2
