"""The client's side of a streamed offline job (``protocol.OpenJob``): a file's audio sent in bounded blocks.

At most ``MAX_BLOCKS_IN_FLIGHT`` blocks are sent and not yet taken by the worker, so a file that decodes faster
than the model transcribes waits in the file, not in the client's memory or the pipe.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import Future
from typing import Any, Protocol

import numpy as np

from inference import protocol as p
from inference.contract import CancelToken, ProgressCallback, Transcript
from inference.errors import WorkerError

MAX_BLOCKS_IN_FLIGHT = 4
_POLL_S = 0.1


class Submitted(Protocol):
    future: Future[p.Message]


class JobClient(Protocol):
    """What a job needs of its client (``WorkerClient``)."""

    def next_id(self) -> int: ...

    def submit(self, message: p.Message, progress: ProgressCallback | None = None) -> Any: ...

    def send_quietly(self, message: p.Message) -> bool: ...

    def open_job_feed(self, job_id: int) -> JobFeed: ...

    def close_job_feed(self, job_id: int) -> None: ...

    def forget_request(self, request_id: int) -> None: ...


class JobFeed:
    """What the worker said about one job: how many passes it needs, how many blocks it has taken."""

    def __init__(self, job_id: int) -> None:
        self.job_id = job_id
        self.passes: int | None = None
        self.taken = 0
        self._changed = threading.Condition()

    def on_message(self, message: p.JobOpened | p.JobTook) -> None:  # the client's reader thread
        with self._changed:
            if isinstance(message, p.JobOpened):
                self.passes = message.passes
            else:
                self.taken = message.seq + 1
            self._changed.notify_all()

    def wait(self, ready: Callable[[], bool], stop: Callable[[], bool]) -> bool:
        """Wait until ``ready()`` (True) or ``stop()`` (False), checking ``stop`` between waits."""
        with self._changed:
            while not ready():
                if stop():
                    return False
                self._changed.wait(_POLL_S)
        return True


def run_job(
    client: JobClient,
    engine_id: str,
    blocks: Callable[[], Iterable[np.ndarray]],
    expected_samples: int | None,
    options: dict[str, Any],
    progress: ProgressCallback | None,
    cancel: CancelToken | None,
    timeout: float | None,
) -> Transcript:
    request_id = client.next_id()
    feed = client.open_job_feed(request_id)
    deadline = None if timeout is None else time.monotonic() + timeout
    cancel_sent = False

    def stop() -> bool:
        nonlocal cancel_sent
        if cancel is not None and cancel.cancelled and not cancel_sent:
            client.send_quietly(p.CancelJob(request_id))
            cancel_sent = True
        if deadline is not None and time.monotonic() > deadline:
            raise WorkerError(f"the worker did not finish a transcription within {timeout:g} s")
        return pending.future.done() or cancel_sent

    try:
        pending: Submitted = client.submit(
            p.OpenJob(request_id, engine_id, options, expected_samples), progress
        )
        sent = 0

        def room() -> bool:
            return sent - feed.taken < MAX_BLOCKS_IN_FLIGHT

        try:
            if feed.wait(lambda: feed.passes is not None, stop):
                for _ in range(feed.passes or 0):
                    for block in blocks():
                        if not feed.wait(room, stop):
                            break
                        if block.size:
                            client.send_quietly(p.JobAudio(request_id, sent, p.audio_payload(block)))
                            sent += 1
                    else:
                        client.send_quietly(p.JobPassEnd(request_id))
                        continue
                    break
        except BaseException:  # the source failed (a file longer than its header said, damaged): drop the job
            client.forget_request(request_id)
            client.send_quietly(p.CancelJob(request_id))
            raise
        while True:  # the answer (or the failure, or the cancellation's Cancelled)
            try:
                result = pending.future.result(timeout=_POLL_S)
            except TimeoutError:
                stop()
                continue
            assert isinstance(result, p.Result)
            return result.as_transcript()
    finally:
        client.close_job_feed(request_id)
        client.forget_request(request_id)  # answered, failed or given up on: nothing waits for it any more
