"""A client that stops reading its answer: one write may wait ``send_timeout_s``, then fails as a lost
connection does, so a streamed answer ends and frees what it holds (its model slot)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
from starlette.types import Message, Receive, Scope, Send

from inference.server.events import SSEResponse
from inference.server.slow_readers import ClientStoppedReading, SendTimeoutMiddleware

SCOPE: Scope = {"type": "http", "method": "GET", "path": "/", "headers": []}


async def _never_read() -> None:
    await asyncio.Event().wait()  # the transport's buffer never drains


def _stuck_send(sent: list[Message], room: int) -> Send:
    """A send that takes ``room`` messages, then waits forever, as a full socket buffer does."""

    async def send(message: Message) -> None:
        if len(sent) >= room:
            await _never_read()
        sent.append(message)

    return send


async def _receive() -> Message:
    await _never_read()
    raise AssertionError("unreachable")


def test_a_write_the_client_never_takes_fails_after_the_send_timeout() -> None:
    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"x" * 100, "more_body": False})

    sent: list[Message] = []
    guarded = SendTimeoutMiddleware(app, send_timeout_s=0.05)
    with pytest.raises(ClientStoppedReading, match="read nothing of its answer for 0.05 s"):
        asyncio.run(guarded(SCOPE, _receive, _stuck_send(sent, room=1)))
    assert [m["type"] for m in sent] == ["http.response.start"]


def test_a_stream_to_a_client_that_stopped_reading_ends_and_frees_its_slot() -> None:
    closed: list[str] = []

    async def frames() -> AsyncIterator[bytes]:
        while True:  # a live stream: events keep coming
            yield b"data: {}\n\n"
            await asyncio.sleep(0)

    response = SSEResponse(frames(), on_close=lambda: closed.append("slot freed"))
    guarded = SendTimeoutMiddleware(response, send_timeout_s=0.05)
    sent: list[Message] = []
    asyncio.run(asyncio.wait_for(guarded(SCOPE, _receive, _stuck_send(sent, room=5)), 60))
    assert closed == ["slot freed"] and len(sent) == 5
