"""Where each message from the worker goes: a table from message type to handler, run on the reader thread."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from inference import protocol as p
from inference.client.failures import error_from_failure
from inference.client.health import WorkerHealth
from inference.client.interfaces import StreamDirectory
from inference.client.jobs import JobFeed
from inference.client.requests import PendingRequests
from inference.contract import Progress, event_from_json
from inference.logsetup import WORKER_PROCESS_NAME

log = logging.getLogger("captioneer.client")


class MessageRouter:
    """Pongs to the worker's health, stream messages to their stream, answers to the request that waits."""

    def __init__(
        self,
        pending: PendingRequests,
        streams: StreamDirectory,
        health: WorkerHealth,
        jobs: dict[int, JobFeed] | None = None,
    ) -> None:
        self._pending = pending
        self._streams = streams
        self._health = health
        self._jobs = jobs if jobs is not None else {}  # streamed offline jobs by request id (jobs.py)
        # Every other message (loaded, opened, result) answers a request.
        self._handlers: dict[type, Callable[[Any], None]] = {
            p.Pong: self._pong,
            p.Pushed: self._pushed,
            p.Decoding: self._decoding,
            p.EventMessage: self._event,
            p.Failed: self._failed,
            p.JobOpened: self._job,
            p.JobTook: self._job,
            p.LogLine: self._log_line,
        }

    def route(self, message: p.Message) -> None:
        self._handlers.get(type(message), self._answer)(message)

    @staticmethod
    def _log_line(message: p.LogLine) -> None:
        """A record the worker logged: into this process's log, with the worker's logger name, time and pid."""
        record = logging.makeLogRecord(
            {
                "name": message.logger,
                "levelno": message.level,
                "levelname": logging.getLevelName(message.level),
                "msg": message.message,
                "created": message.created,
                "msecs": (message.created % 1) * 1000,
                "process": message.pid,
                "processName": WORKER_PROCESS_NAME,
            }
        )
        logging.getLogger(message.logger).handle(record)

    def _pong(self, message: p.Pong) -> None:
        self._health.heard(message.busy_s, message.rss_bytes)

    def _pushed(self, message: p.Pushed) -> None:
        stream = self._streams.get(message.stream_id)
        if stream is not None:
            stream.on_pushed(message)

    def _job(self, message: p.JobOpened | p.JobTook) -> None:
        feed = self._jobs.get(message.job_id)
        if feed is not None:
            feed.on_message(message)

    def _decoding(self, message: p.Decoding) -> None:
        stream = self._streams.get(message.stream_id)
        if stream is not None:
            stream.on_decoding(message.seq)

    def _event(self, message: p.EventMessage) -> None:
        """Progress of a request, or a stream's events outside a push (its last segment's at finish)."""
        event = event_from_json(message.event)
        if message.request_id is not None:
            pending = self._pending.get(message.request_id)
            if pending is not None and pending.progress is not None and isinstance(event, Progress):
                pending.progress(event)
        elif message.stream_id is not None:
            stream = self._streams.get(message.stream_id)
            if stream is not None:
                stream.on_worker_events([event])

    def _failed(self, message: p.Failed) -> None:
        """A request failed, or (no request id) a push of a stream did: that stream is over."""
        if message.request_id is None:
            stream = self._streams.get(message.stream_id or "")
            if stream is not None:
                stream.on_failed(error_from_failure(message), message.kind)
                self._streams.forget(stream.stream_id)
            return
        pending = self._pending.pop(message.request_id)
        if pending is None:
            log.debug("a failure of an unknown request from the worker")
            return
        pending.future.set_exception(error_from_failure(message))

    def _answer(self, message: p.Message) -> None:
        request_id = getattr(message, "request_id", None)
        pending = self._pending.pop(request_id) if request_id is not None else None
        if pending is None:
            log.debug("unexpected %s message from the worker", message.type)
            return
        pending.future.set_result(message)
