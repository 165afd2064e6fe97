"""Server-sent events: Captioneer stream events → the OpenAI transcription stream events.

* ``transcript.text.delta`` {"delta", "start", "end"}: committed text (times: where it lies in the audio,
  in seconds, when the model knows); the deltas concatenate to the committed text;
* ``transcript.text.partial`` {"text"}: the whole current hypothesis (committed text + the provisional
  tail), which replaces the previous one; only models with provisional text send it;
* ``transcript.text.done`` {"text", "timing"}: the final text (a tail never committed arrives here only);
* ``error`` {"error": {...}, "fatal"}: a fatal one ends the stream; a non-fatal one (a worker restart) not;
* then ``data: [DONE]``.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import anyio
from starlette.types import Receive, Scope, Send

from inference.contract import Delta, Done, ErrorEvent, Snapshot, StreamEvent, Transcript
from inference.errors import error_class
from inference.server.errors import ApiError, error_event, from_captioneer

DONE_LINE = b"data: [DONE]\n\n"

# Notes a stream carries without ending (why it ended early, what was dropped), by code: the status whose
# error type they take (a server shutting down is the server's doing, not a bad request).
NOTE_STATUS = {
    "server_shutting_down": 503,
    "worker_failed": 503,
    "partial_frame": 400,
    "stream_limit": 413,
    "stream_too_slow": 408,
    "damaged_input": 400,  # the upload was damaged or cut off: that part is silence, the rest was transcribed
}


def sse(data: dict[str, Any]) -> bytes:
    return b"data: " + json.dumps(data, ensure_ascii=False).encode("utf-8") + b"\n\n"


def _times(event: Delta | Snapshot) -> dict[str, float]:
    """Where the text lies in the audio (seconds from the start of the stream), when the model says."""
    out = {}
    if event.start_s is not None:
        out["start"] = round(event.start_s, 3)
    if event.end_s is not None:
        out["end"] = round(event.end_s, 3)
    return out


class EventTranslator:
    """Keeps what the translation needs: the committed text (for partials) and the time to first text."""

    def __init__(self) -> None:
        self.started = time.monotonic()
        self.committed = ""
        self.first_text_at: float | None = None

    def _saw_text(self) -> None:
        if self.first_text_at is None:
            self.first_text_at = time.monotonic()

    def translate(self, event: StreamEvent) -> dict[str, Any] | None:
        if isinstance(event, Delta):
            if not event.text:
                return None
            self._saw_text()
            self.committed += event.text
            return {"type": "transcript.text.delta", "delta": event.text, **_times(event)}
        if isinstance(event, Snapshot):
            if not event.text:
                return None
            self._saw_text()
            return {
                "type": "transcript.text.partial",
                "text": self.committed + event.text,
                **_times(event),
            }
        if isinstance(event, ErrorEvent):
            if event.kind == "worker_resumed":
                return None  # a notice, not an error: the stream simply goes on
            text = f"{event.message} ({event.fix})" if event.fix else event.message
            if event.kind in NOTE_STATUS:
                return error_event(ApiError(NOTE_STATUS[event.kind], text, event.kind), fatal=event.fatal)
            error = from_captioneer(error_class(event.kind)(event.message, event.fix))
            if event.kind == "worker_restarted":
                error = ApiError(
                    503, f"{event.message} ({event.fix})" if event.fix else event.message, "worker_restarted"
                )
            return error_event(error, fatal=event.fatal)
        if isinstance(event, Done):
            return self.done(event.transcript)
        return None  # speech ends, progress and stats are not part of the OpenAI stream

    def done(self, transcript: Transcript) -> dict[str, Any]:
        timing: dict[str, Any] = {"wall_ms": round((time.monotonic() - self.started) * 1000)}
        if self.first_text_at is not None:
            timing["ttft_ms"] = round((self.first_text_at - self.started) * 1000)
        done: dict[str, Any] = {
            "type": "transcript.text.done",
            "text": transcript.text.strip(),
            "timing": timing,
        }
        if transcript.timing is not None:
            timing["audio_duration_ms"] = round(transcript.timing.audio_s * 1000)
            done["usage"] = {"type": "duration", "seconds": math.ceil(transcript.timing.audio_s)}
        return done


class SSEResponse:
    """A ``text/event-stream`` response from an async iterator of ready frames.

    Starlette's StreamingResponse reads ``receive`` to notice a client that went away, which would take the
    body from a handler still reading it (the live route). Here ``watch_disconnect`` says whether the body is
    already read, so that ``receive`` can be watched: a client that leaves then stops the work at once.
    Without it (live), a client that leaves ends the body, which ends the work. ``on_close`` runs when the
    response ends for any reason.
    """

    media_type = "text/event-stream"

    def __init__(
        self,
        frames: AsyncIterator[bytes],
        headers: dict[str, str] | None = None,
        *,
        on_close: Callable[[], None] | None = None,
        watch_disconnect: bool = False,
    ) -> None:
        self.frames = frames
        self.on_close = on_close
        self.watch_disconnect = watch_disconnect
        self.headers = {"cache-control": "no-cache", "x-accel-buffering": "no", **(headers or {})}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        raw = [(b"content-type", b"text/event-stream; charset=utf-8")]
        raw += [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in self.headers.items()]
        try:
            async with anyio.create_task_group() as group:
                if self.watch_disconnect:
                    group.start_soon(self._watch, receive, group.cancel_scope)
                await self._send_all(send, raw)
                group.cancel_scope.cancel()
        finally:
            try:
                if self.on_close is not None:
                    self.on_close()  # first: a cancelled stream also unblocks a push waiting for the model
            finally:
                aclose = getattr(self.frames, "aclose", None)
                if aclose is not None:
                    with anyio.CancelScope(shield=True):
                        await aclose()

    async def _send_all(self, send: Send, raw: list[tuple[bytes, bytes]]) -> None:
        try:
            await send({"type": "http.response.start", "status": 200, "headers": raw})
            async for frame in self.frames:
                await send({"type": "http.response.body", "body": frame, "more_body": True})
            await send({"type": "http.response.body", "body": b"", "more_body": False})
        except OSError:
            pass  # the client went away

    @staticmethod
    async def _watch(receive: Receive, scope: anyio.CancelScope) -> None:
        while (await receive())["type"] != "http.disconnect":
            pass
        scope.cancel()
