"""The client's parts alone, without a worker process: the message router's table and the request table."""

from __future__ import annotations

from concurrent.futures import Future

import pytest

from inference import protocol as p
from inference.client.dispatch import MessageRouter
from inference.client.health import WorkerHealth
from inference.client.requests import PendingRequest, PendingRequests
from inference.client.streams import StreamTable
from inference.contract import Delta, ErrorEvent, Progress, StreamEvent, event_to_json
from inference.errors import CaptioneerError, UsageError


class RecordingStream:
    """Records what the router calls on a stream (the SupervisedStream calls it uses)."""

    def __init__(self, stream_id: str) -> None:
        self.stream_id = stream_id
        self.engine_id = "e1"
        self.calls: list[tuple[str, object]] = []

    def on_pushed(self, message: p.Pushed) -> None:
        self.calls.append(("pushed", message.seq))

    def on_decoding(self, seq: int) -> None:
        self.calls.append(("decoding", seq))

    def on_worker_events(self, events: list[StreamEvent]) -> None:
        self.calls.append(("events", events))

    def on_failed(self, error: CaptioneerError, kind: str) -> None:
        self.calls.append(("failed", (type(error), kind)))


def _router() -> tuple[MessageRouter, PendingRequests, StreamTable, WorkerHealth, RecordingStream]:
    pending, streams, health = PendingRequests(), StreamTable(), WorkerHealth()
    stream = RecordingStream("s1")
    streams.add(stream)  # type: ignore[arg-type]
    return MessageRouter(pending, streams, health), pending, streams, health, stream


def test_stream_messages_reach_their_stream_and_a_stream_failure_forgets_it() -> None:
    router, _pending, streams, _health, stream = _router()
    router.route(p.Decoding("s1", 3))
    router.route(p.Pushed("s1", 3, 160, 0.01))
    router.route(p.EventMessage.of(Delta("hi", 0), stream_id="s1"))
    router.route(p.Pushed("s9", 1, 160, 0.01))  # a stream already forgotten: ignored
    router.route(p.Failed("usage", "refused", None, None, "s1"))
    assert [c[0] for c in stream.calls] == ["decoding", "pushed", "events", "failed"]
    assert stream.calls[2][1] == [Delta("hi", 0)] and stream.calls[3][1] == (UsageError, "usage")
    assert streams.get("s1") is None


def test_answers_settle_their_request_and_progress_reaches_its_callback() -> None:
    router, pending, _streams, health, _stream = _router()
    seen: list[Progress] = []
    answered: Future[p.Message] = Future()
    failed: Future[p.Message] = Future()
    pending.add(7, PendingRequest(answered, p.FinishStream(7, "s1"), seen.append))
    pending.add(8, PendingRequest(failed, p.FinishStream(8, "s1")))
    router.route(p.EventMessage(event_to_json(Progress("load", 0.5, 1.0)), request_id=7))
    router.route(p.Result(7))
    router.route(p.Failed("model", "broken", "reinstall", 8))
    router.route(p.Result(99))  # nobody waits for it: ignored
    router.route(p.Pong(1, busy_s=2.5, rss_bytes=1234))
    assert seen == [Progress("load", 0.5, 1.0)] and answered.result() == p.Result(7)
    with pytest.raises(CaptioneerError, match="broken"):
        failed.result()
    assert pending.values() == [] and health.busy_s == 2.5 and health.rss_bytes == 1234


def test_a_stream_error_event_outside_a_push_is_the_streams() -> None:
    router, _pending, _streams, _health, stream = _router()
    event = ErrorEvent("usage", "bad", None, fatal=False)
    router.route(p.EventMessage.of(event, stream_id="s1"))
    assert stream.calls == [("events", [event])]
