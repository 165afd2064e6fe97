"""The inference worker through the client: real spawned processes, real crashes, no fixed sleeps.

The faulty test engine (``tests/worker/faulty_engine.py``) fails on command with a real SIGSEGV, a hang,
an out-of-memory or an exit; the bundled demo model (a real Parakeet-TDT) checks that results through the
worker equal results in-process.
"""

from __future__ import annotations

import logging
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pytest

from inference.client import BacklogFull, BacklogPolicy, RemoteStream, WorkerClient, WorkerPolicy
from inference.contract import SAMPLE_RATE, CancelToken, Delta, ErrorEvent, Progress, Snapshot, StreamEvent
from inference.errors import BackendError, Cancelled, UsageError, WorkerError
from inference.logsetup import WORKER_PROCESS_NAME
from tests.conftest import REPO_ROOT

FAULTY = "tests.worker.faulty_engine:create_engine"
FAST = WorkerPolicy(ping_interval_s=0.2, ping_timeout_s=10.0, hang_timeout_s=2.0, backoff_s=(0.0, 0.2, 0.4))
CHUNK = np.zeros(int(0.32 * SAMPLE_RATE), dtype=np.float32)


def wait_until(condition: Callable[[], bool], timeout: float = 30.0, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")
        time.sleep(0.01)


@pytest.fixture
def client() -> Iterator[WorkerClient]:
    with WorkerClient(FAST) as started:
        yield started


class Recorder:
    """Collects stream events from the client's reader thread."""

    def __init__(self) -> None:
        self.events: list[StreamEvent] = []
        self.lock = threading.Lock()

    def __call__(self, events: list[StreamEvent]) -> None:
        with self.lock:
            self.events.extend(events)

    def of(self, kind: type) -> list[StreamEvent]:
        with self.lock:
            return [e for e in self.events if isinstance(e, kind)]


def restarts(recorder: Recorder) -> list[ErrorEvent]:
    return [e for e in recorder.of(ErrorEvent) if e.kind == "worker_restarted"]  # type: ignore[misc]


def open_faulty(client: WorkerClient, recorder: Recorder | None = None, **options: object) -> RemoteStream:
    engine = client.load("unused", factory=FAULTY)
    return engine.open_stream(on_events=recorder, **options)


# ------------------------------------------------------------------------------------------ basics


def worker_environment(pid: int) -> dict[str, str]:
    entries = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    return dict(entry.decode().split("=", 1) for entry in entries if b"=" in entry)


@pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="reads /proc/PID/environ (Linux)")
@pytest.mark.parametrize("users_own", [None, "12"])
def test_the_worker_starts_with_sleeping_openblas_threads_unless_the_user_says(
    users_own: str | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """numpy's OpenBLAS threads would spin ~0.1 s after every threaded call on cores ggml needs; OpenBLAS reads
    its timeout when it loads, so the worker must start with it."""
    if users_own is None:
        monkeypatch.delenv("OPENBLAS_THREAD_TIMEOUT", raising=False)
    else:
        monkeypatch.setenv("OPENBLAS_THREAD_TIMEOUT", users_own)
    with WorkerClient(FAST) as started:
        started.load("unused", factory=FAULTY)  # the worker is up and answering
        assert started.pid is not None
        environment = worker_environment(started.pid)
    assert environment.get("OPENBLAS_THREAD_TIMEOUT") == (users_own or "4")


def test_what_the_worker_logs_reaches_the_client_s_log(
    client: WorkerClient, caplog: pytest.LogCaptureFixture
) -> None:
    """The worker has no log file and, in the app, no terminal: a warning it logs travels to the client and is
    handled there, so it lands in the user's captioneer.log with the worker's logger name, level and pid."""
    caplog.set_level(logging.INFO)
    text = "a warning the worker logged (50% of it, %s left as is)"
    open_faulty(client, log_warning=text)

    def logged() -> list[logging.LogRecord]:
        return [record for record in caplog.records if record.getMessage() == text]

    wait_until(lambda: bool(logged()), what="the worker's warning in the client's log")
    (record,) = logged()
    assert record.levelno == logging.WARNING and record.name == "tests.worker.faulty_engine"
    assert record.process == client.pid != os.getpid() and record.processName == WORKER_PROCESS_NAME


def test_stream_events_arrive_in_order_and_finish_drains(client: WorkerClient) -> None:
    recorder = Recorder()
    stream = open_faulty(
        client, recorder, snapshots=True, delay_s=0.01, backlog=BacklogPolicy(max_in_flight=10)
    )
    assert stream.kind == "native"
    for _ in range(10):
        stream.push(CHUNK)
    final = stream.finish(timeout=30)
    expected = " ".join(f"w{i}" for i in range(1, 11))
    assert final.text == expected
    assert stream.committed_text == expected  # every push was processed before finish: nothing dropped
    deltas = recorder.of(Delta)
    assert [d.segment_id for d in deltas] == list(range(1, 11))
    assert deltas[3].start_s == pytest.approx(3 * 0.32) and deltas[3].end_s == pytest.approx(4 * 0.32)
    assert isinstance(recorder.of(Snapshot)[0], Snapshot)
    stats = stream.stats()
    assert stats.audio_s == pytest.approx(3.2) and stats.backlog_s == 0
    assert stats.latency_s is not None and stats.latency_s > 0


def test_offline_job_reports_progress_and_can_be_cancelled(client: WorkerClient) -> None:
    engine = client.load("unused", factory=FAULTY)
    audio = np.random.default_rng(0).uniform(-0.5, 0.5, 3 * SAMPLE_RATE).astype(np.float32)
    seen: list[Progress] = []
    result = engine.transcribe(audio, progress=seen.append)
    assert (
        result.text == f"{audio.size} samples, sum {float(np.sum(audio, dtype=np.float64)):.6f}"
    )  # exact bytes
    assert [e.done for e in seen] == [0, 1, 2, 3] and all(e.total == 3 for e in seen)

    token = CancelToken()
    steps: list[Progress] = []

    def cancel_after_two(event: Progress) -> None:
        steps.append(event)
        if len(steps) == 2:
            token.cancel()

    with pytest.raises(Cancelled):
        engine.transcribe(
            np.zeros(60 * SAMPLE_RATE, np.float32), progress=cancel_after_two, cancel=token, delay_s=0.05
        )
    assert len(steps) < 60  # stopped between steps, long before the end
    assert engine.transcribe(np.zeros(SAMPLE_RATE, np.float32)).text.startswith(
        "16000 samples"
    )  # still usable


def test_a_load_reports_progress_and_can_be_cancelled(client: WorkerClient) -> None:
    seen: list[Progress] = []
    engine = client.load("unused", session_options={"load_steps": 3}, factory=FAULTY, progress=seen.append)
    assert engine.capabilities.streaming and engine.capabilities.snapshots
    assert [(e.stage, e.done) for e in seen] == [
        ("load", 0),
        ("load", 0),
        ("load", 1),
        ("load", 2),
        ("load", 1),
    ]
    token = CancelToken()

    def cancel_at_second_step(event: Progress) -> None:
        if event.done == 1 and event.total == 100:
            token.cancel()

    with pytest.raises(Cancelled):
        client.load(
            "unused",
            session_options={"load_steps": 100, "load_delay_s": 0.05},
            factory=FAULTY,
            progress=cancel_at_second_step,
            cancel=token,
        )
    assert client.generation == 1


def test_errors_cross_the_boundary_with_their_kind(client: WorkerClient) -> None:
    with pytest.raises(BackendError, match="cannot be loaded.*no_such_module"):
        client.load("unused", factory="tests.worker.no_such_module:create_engine")
    recorder = Recorder()
    stream = open_faulty(client, recorder, fault="error", fault_at=2)
    stream.push(CHUNK)
    stream.push(CHUNK)
    wait_until(lambda: recorder.of(ErrorEvent), what="the error event")
    error = recorder.of(ErrorEvent)[0]
    assert (error.kind, error.message, error.fatal) == ("usage", "the faulty engine refused this push", True)
    with pytest.raises(UsageError, match="refused"):
        stream.push(CHUNK)
    assert client.generation == 1  # an ordinary error does not restart the worker


def test_misuse_is_refused_before_it_reaches_the_worker(client: WorkerClient) -> None:
    stream = open_faulty(client)
    with pytest.raises(UsageError, match="1-D"):
        stream.push(np.zeros((2, 100), np.float32))
    with pytest.raises(UsageError, match="float32"):
        stream.push(np.zeros(100, np.int16))
    with pytest.raises(UsageError, match="NaN"):
        stream.push(np.array([0.0, np.nan], np.float32))
    stream.finish(timeout=10)
    with pytest.raises(UsageError, match="unknown stream mode 'bogus'"):
        client.load("unused", factory=FAULTY).open_stream(mode="bogus")
    with pytest.raises(UsageError, match="finished or cancelled"):
        stream.push(CHUNK)


def test_a_cancelled_stream_drops_its_audio_and_frees_its_slot(client: WorkerClient) -> None:
    engine = client.load("unused", factory=FAULTY)
    streams = [engine.open_stream(delay_s=0.05) for _ in range(4)]
    with pytest.raises(UsageError, match="already open"):
        engine.open_stream()  # the engine's limit is 4
    for _ in range(5):
        streams[0].push(CHUNK)
    streams[0].cancel()
    fresh = engine.open_stream()
    fresh.push(CHUNK)
    assert fresh.finish(timeout=10).text == "w1"


# ------------------------------------------------------------------------------------------ faults


@pytest.mark.parametrize("how", ["sigkill", "segv"])
def test_restart_after_a_dead_worker_keeps_committed_text(
    client: WorkerClient, tmp_path: Path, how: str
) -> None:
    recorder = Recorder()
    options = {"fault": "segv", "fault_at": 4, "fault_once": str(tmp_path / "fired")} if how == "segv" else {}
    stream = open_faulty(client, recorder, **options)
    for _ in range(3):
        stream.push(CHUNK)
    wait_until(lambda: len(recorder.of(Delta)) == 3, what="three deltas")
    first_pid = client.pid
    assert first_pid is not None
    if how == "sigkill":
        os.kill(first_pid, signal.SIGKILL)
    else:
        stream.push(CHUNK)  # the 4th push segfaults inside native code
    wait_until(lambda: recorder.of(ErrorEvent), what="the restart notice")
    notice = recorder.of(ErrorEvent)[0]
    assert notice.kind == "worker_restarted" and not notice.fatal
    assert ("SIGKILL" if how == "sigkill" else "SIGSEGV") in notice.message
    wait_until(
        lambda: client.generation == 2 and client.pid != first_pid and stream.ready, what="a new worker"
    )
    for _ in range(2):
        stream.push(CHUNK)
        wait_until(lambda: not stream.stats().backlog_s, what="the push to be processed")
    final = stream.finish(timeout=30)
    # Committed before the crash and kept; the push the worker died on is replayed once to the new worker
    # (a SIGKILL while idle loses nothing in flight), then new audio continues the same text.
    expected = "w1 w2 w3 w1 w2 w3" if how == "segv" else "w1 w2 w3 w1 w2"
    assert final.text == stream.committed_text == expected
    deltas = recorder.of(Delta)
    assert "".join(d.text for d in deltas) == stream.committed_text
    assert [d.segment_id for d in deltas][:4] == [1, 2, 3, 5]  # new ids: views never mix the two workers' ids
    assert deltas[3].start_s == pytest.approx(3 * 0.32)  # stream time goes on where the first worker stopped


def test_audio_that_crashes_the_worker_three_times_is_given_up_with_a_visible_gap(
    client: WorkerClient,
) -> None:
    recorder = Recorder()
    stream = open_faulty(client, recorder, fault="segv", poison=0.25, backlog=BacklogPolicy(max_in_flight=1))
    stream.push(CHUNK)
    wait_until(lambda: len(recorder.of(Delta)) == 1, what="the first delta")
    stream.push(
        np.full_like(CHUNK, 0.25)
    )  # crashes the worker; replayed twice (it may be chance), crashes again
    wait_until(lambda: len(restarts(recorder)) == 3 and stream.ready, what="three restarts")
    stream.push(CHUNK)
    final = stream.finish(timeout=30)
    # The poisoned 0.32 s is skipped, nothing else, and the transcript says so where it happened.
    assert final.text == stream.committed_text == "w1 [… 0.3–0.6 s not transcribed …] w1"
    first, _, third = restarts(recorder)
    assert "could not be transcribed" not in first.message
    assert "audio from 0.3 s to 0.6 s could not be transcribed" in third.message and not third.fatal
    gap = recorder.of(Delta)[1]
    assert (gap.start_s, gap.end_s) == (pytest.approx(0.32), pytest.approx(0.64))
    assert recorder.of(Delta)[-1].start_s == pytest.approx(0.64)
    assert client.generation == 4


def test_a_request_made_while_the_worker_is_restored_waits_for_its_model() -> None:
    policy = WorkerPolicy(ping_interval_s=0.2, backoff_s=(0.5,))  # a restart that takes a moment
    with WorkerClient(policy) as client:
        engine = client.load(
            "unused", session_options={"load_steps": 10, "load_delay_s": 0.1}, factory=FAULTY
        )
        first = client.pid
        assert first is not None
        os.kill(first, signal.SIGKILL)
        wait_until(lambda: client.generation == 2 and client.restarting, what="a new worker still loading")
        # Sent while the new worker has no model yet: it must wait for the reload, not fail.
        assert engine.transcribe(np.zeros(SAMPLE_RATE, np.float32)).text.startswith("16000 samples")
        assert client.generation == 2


def test_a_hung_worker_is_killed_and_replaced(client: WorkerClient, tmp_path: Path) -> None:
    recorder = Recorder()
    stream = open_faulty(client, recorder, fault="hang", fault_at=2, fault_once=str(tmp_path / "fired"))
    stream.push(CHUNK)
    stream.push(CHUNK)  # hangs in the worker; hang_timeout_s is 2 s in this policy
    wait_until(lambda: recorder.of(ErrorEvent), timeout=30, what="the hang to be noticed")
    assert "stuck" in recorder.of(ErrorEvent)[0].message
    wait_until(lambda: stream.ready, what="the stream to be reopened")
    stream.push(CHUNK)
    assert stream.finish(timeout=30).text == stream.committed_text == "w1 w1 w2"  # the hung push, replayed


def test_out_of_memory_is_a_clear_error(client: WorkerClient) -> None:
    engine = client.load("unused", factory=FAULTY)
    with pytest.raises(WorkerError, match="out of memory.*"):
        engine.transcribe(np.zeros(SAMPLE_RATE, np.float32), fault="oom")
    assert client.generation == 1


def test_an_offline_job_lost_in_a_crash_fails_with_the_reason(client: WorkerClient) -> None:
    engine = client.load("unused", factory=FAULTY)
    with pytest.raises(WorkerError, match="SIGSEGV.*native"):
        engine.transcribe(np.zeros(2 * SAMPLE_RATE, np.float32), fault="segv", fault_at=2)
    wait_until(lambda: client.generation == 2, what="the restart")
    assert engine.transcribe(np.zeros(SAMPLE_RATE, np.float32)).text.startswith("16000 samples")  # reloaded


def test_repeated_crashes_back_off_then_stop_with_a_message(tmp_path: Path) -> None:
    """One push whose audio kills every worker it reaches: it is replayed into each new worker (it might have been
    chance), the restarts back off, and the third failure stops the client with a message; the audio no worker
    transcribed is marked in the transcript where it was said. The stream stays open (a revival may come); ended
    before one, it raises the message and what it holds is marked too."""
    policy = WorkerPolicy(ping_interval_s=0.2, max_restarts=2, backoff_s=(0.0, 0.3), revive_after_s=(3600.0,))
    statuses: list[str] = []
    with WorkerClient(policy, on_status=statuses.append) as client:
        recorder = Recorder()
        engine = client.load("unused", factory=FAULTY)
        stream = engine.open_stream(on_events=recorder, fault="exit", fault_at=1)
        started = time.monotonic()

        def failed() -> list[ErrorEvent]:
            return [e for e in recorder.of(ErrorEvent) if e.kind == "worker_failed"]  # type: ignore[misc]

        stream.push(CHUNK)  # every new worker's stream exits on its first push: the replay of this one
        wait_until(lambda: bool(failed()), what="the client to give up")
        assert stream.push(CHUNK) is not None  # held, not refused
        message = failed()[0].message
        history = [e.message for e in recorder.of(ErrorEvent)]
        assert "stopped restarting" in message and "exited with code 3" in message, history
        assert "stays open" in message and "3600 s" in message
        assert not [e for e in recorder.of(ErrorEvent) if e.fatal]  # type: ignore[attr-defined]
        assert len(restarts(recorder)) == 3 and client.generation == 3  # the first worker and two restarts
        assert time.monotonic() - started >= 0.3  # the second restart waited for its backoff
        with pytest.raises(WorkerError, match="stopped restarting"):
            client.load("unused", factory=FAULTY)
        assert any("restarted" in s for s in statuses)
        with pytest.raises(WorkerError, match="stopped restarting"):
            stream.finish()
        gaps = [d for d in recorder.of(Delta) if "not transcribed" in d.text]
        assert (
            stream.committed_text
            == "".join(d.text for d in gaps)
            == " ".join(["[… 0.0–0.3 s not transcribed …]", "[… 0.3–0.6 s not transcribed …]"])
        )
        assert gaps[0].start_s == 0.0 and gaps[-1].end_s == pytest.approx(2 * CHUNK.size / SAMPLE_RATE)
        assert stream.heard().text == stream.committed_text.strip()


# ------------------------------------------------------------------------------------------ backpressure


def test_backlog_is_bounded_coalesced_and_refused_explicitly(client: WorkerClient) -> None:
    recorder = Recorder()
    engine = client.load("unused", factory=FAULTY)
    policy = BacklogPolicy("coalesce", max_in_flight=1, max_backlog_s=3.0)
    stream = engine.open_stream(on_events=recorder, backlog=policy, delay_s=0.3)
    refused = 0
    for _ in range(30):  # 9.6 s of audio offered at once; the engine takes 0.3 s per push
        try:
            stream.push(CHUNK)
        except BacklogFull as exc:
            refused += 1
            assert "not taken" in str(exc)
        assert stream.stats().backlog_s <= 3.0
    assert refused > 0
    final = stream.finish(timeout=30)
    accepted = 30 - refused
    assert stream.stats().audio_s == pytest.approx(accepted * 0.32)  # all accepted audio was transcribed
    assert len(final.text.split()) < accepted  # queued chunks went to the worker coalesced


def test_block_policy_waits_instead_of_refusing(client: WorkerClient) -> None:
    engine = client.load("unused", factory=FAULTY)
    stream = engine.open_stream(
        backlog=BacklogPolicy("block", max_in_flight=1, max_backlog_s=1.0), delay_s=0.02
    )
    for _ in range(20):
        stream.push(CHUNK)
        assert stream.stats().backlog_s <= 1.0 + 0.32
    stream.finish(timeout=30)
    assert stream.stats().audio_s == pytest.approx(20 * 0.32)


@pytest.mark.slow
def test_ten_minutes_fed_faster_than_real_time_keep_memory_bounded(client: WorkerClient) -> None:
    engine = client.load("unused", factory=FAULTY)
    stream = engine.open_stream(backlog=BacklogPolicy("block", max_in_flight=2, max_backlog_s=5.0))
    chunk = np.full(int(0.32 * SAMPLE_RATE), 0.01, np.float32)
    pushes = int(600 / 0.32)
    rss: list[int] = []
    started = time.monotonic()
    for i in range(pushes):
        stream.push(chunk)
        assert stream.stats().backlog_s <= 5.0 + 0.32
        if i % 400 == 0:
            rss.append(client.worker_rss)
    final = stream.finish(timeout=60)
    assert time.monotonic() - started < 600  # faster than real time
    assert stream.stats().audio_s == pytest.approx(pushes * 0.32)
    assert len(final.text.split()) <= pushes
    measured = [r for r in rss if r]
    assert (
        measured and max(measured) - min(measured) < 64 << 20
    )  # the worker's memory did not grow with the stream


# ------------------------------------------------------------------------------------------ real model


DEMO = REPO_ROOT / "resources" / "demo_model"


def test_demo_model_through_the_worker_equals_in_process(client: WorkerClient) -> None:
    from inference.audio.io import load_audio_file
    from inference.engine import load_engine

    audio = load_audio_file(REPO_ROOT / "resources" / "samples" / "demo_sample_1.wav")
    remote = client.load(DEMO)
    assert remote.family == "parakeet_tdt" and remote.capabilities.word_timestamps
    through_worker = remote.transcribe(audio)
    with load_engine(DEMO) as local:  # type: ignore[attr-defined]
        in_process = local.transcribe(audio)
    assert through_worker.text == in_process.text and through_worker.token_ids == in_process.token_ids
    assert [w.to_json() for w in through_worker.words] == [
        w.to_json() for w in in_process.words
    ]  # ms on the wire


def test_demo_model_streams_segment_by_segment(client: WorkerClient) -> None:
    from inference.audio.io import load_audio_file

    one = load_audio_file(REPO_ROOT / "resources" / "samples" / "demo_sample_1.wav")
    two = load_audio_file(REPO_ROOT / "resources" / "samples" / "demo_sample_2.wav")
    gap = np.zeros(SAMPLE_RATE, np.float32)
    audio = np.concatenate([gap, one, gap, two, gap])
    remote = client.load(DEMO)
    expected = [remote.transcribe(one).text, remote.transcribe(two).text]
    recorder = Recorder()
    stream = remote.open_stream(
        on_events=recorder, mode="segmented"
    )  # VAD segments, even for a streaming family
    assert stream.kind == "segmented"
    step = int(0.32 * SAMPLE_RATE)
    for start in range(0, audio.size, step):
        stream.push(audio[start : start + step])
    final = stream.finish(timeout=60)
    deltas = recorder.of(Delta)
    assert [d.text.strip() for d in deltas] == expected
    assert final.text == " ".join(expected) == stream.committed_text
    assert deltas[0].start_s < 1.0 < deltas[0].end_s < deltas[1].start_s
    assert [s.text for s in final.segments] == expected


def test_a_first_r2t2_load_reports_its_conversion(client: WorkerClient, tmp_path: Path) -> None:
    import shutil

    model = tmp_path / "r2t2"
    shutil.copytree(
        REPO_ROOT / "tests" / "fixtures" / "confucius4_r2t2" / "checkpoint_hf",
        model,
        ignore=shutil.ignore_patterns(".captioneer"),
    )  # a conversion cache left by other runs
    seen: list[Progress] = []
    engine = client.load(model, backend="cpu", progress=seen.append)
    assert engine.family == "confucius4_r2t2" and engine.capabilities.language_detection
    converting = [e for e in seen if "converting the thinker" in e.message]
    assert converting and converting[-1].done == 1.0
    assert [e.done for e in converting] == sorted(e.done for e in converting)
    seen.clear()
    client.load(model, backend="cpu", progress=seen.append)  # converted once: the second load only loads
    assert not [e for e in seen if "converting" in e.message]


def test_cancelling_a_stream_while_its_worker_restarts_returns_at_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Starting and greeting a new worker happens outside the client's lock: a window closing meanwhile (which
    cancels its stream) must not wait for the handshake."""
    slow_start = threading.Event()
    original = WorkerClient._spawn

    def slow_spawn(self: WorkerClient):  # type: ignore[no-untyped-def]
        if slow_start.is_set():
            time.sleep(3.0)  # a slow machine importing the native libraries
        return original(self)

    monkeypatch.setattr(WorkerClient, "_spawn", slow_spawn)
    with WorkerClient(FAST) as client:
        stream = open_faulty(client)
        stream.push(CHUNK)
        slow_start.set()
        pid = client.pid
        assert pid is not None
        os.kill(pid, signal.SIGKILL)
        wait_until(lambda: client.restarting, what="the restart to begin")
        started = time.monotonic()
        stream.cancel()
        assert time.monotonic() - started < 1.0
        assert client.restarting  # it really was still starting
        started = time.monotonic()
        client.close()
        assert time.monotonic() - started < 1.0


def test_a_frozen_worker_behind_a_full_pipe_is_found_and_replaced() -> None:
    """SIGSTOP the worker, then send requests bigger than the pipe's buffer: the writes block, but only the
    writer thread waits; the supervisor's pings go unanswered, so the worker is killed and replaced, and the
    requests fail with the reason instead of hanging."""
    policy = WorkerPolicy(ping_interval_s=0.2, ping_timeout_s=2.0, backoff_s=(0.0,))
    with WorkerClient(policy) as client:
        engine = client.load("unused", factory=FAULTY)
        frozen = client.pid
        assert frozen is not None
        os.kill(frozen, signal.SIGSTOP)
        outcomes: list[BaseException | str] = []

        def big_request() -> None:
            try:
                outcomes.append(engine.transcribe(np.zeros(4 * SAMPLE_RATE, np.float32), timeout=60).text)
            except WorkerError as exc:
                outcomes.append(exc)

        threads = [
            threading.Thread(target=big_request) for _ in range(2)
        ]  # 256 KB each: more than a pipe holds
        for thread in threads:
            thread.start()
        wait_until(lambda: len(outcomes) == 2, timeout=20, what="both requests to be answered")
        # "stopped answering" is the supervisor's verdict, not the requests' own 60 s timeout: nothing hung.
        assert all(isinstance(o, WorkerError) and "stopped answering" in str(o) for o in outcomes), outcomes
        wait_until(lambda: client.generation == 2 and not client.restarting, what="a new worker")
        assert engine.transcribe(np.zeros(SAMPLE_RATE, np.float32), timeout=30).text.startswith(
            "16000 samples"
        )


def test_the_client_logs_the_native_build_a_model_runs_on(caplog: pytest.LogCaptureFixture) -> None:
    import logging

    with caplog.at_level(logging.INFO, logger="captioneer.client"), WorkerClient(FAST) as client:
        client.load(str(REPO_ROOT / "resources" / "demo_model"))
    loaded = [r.getMessage() for r in caplog.records if r.getMessage().startswith("loaded ")]
    assert loaded and "(parakeet_tdt)" in loaded[0] and "CPU backend" in loaded[0], loaded
