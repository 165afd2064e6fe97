"""A bound on how long one write to a client may wait: a client that stops reading its answer (and stops
sending) would otherwise hold a streamed answer, and the model slot behind it, forever, since the write waits
for room in a buffer that never drains. Past ``send_timeout_s`` the write fails as a lost connection does:
a stream ends there (its slot is freed), and uvicorn closes the connection."""

from __future__ import annotations

import asyncio

from starlette.types import ASGIApp, Message, Receive, Scope, Send


class ClientStoppedReading(ConnectionAbortedError):
    pass


class SendTimeoutMiddleware:
    def __init__(self, app: ASGIApp, send_timeout_s: float) -> None:
        self.app = app
        self.send_timeout_s = send_timeout_s

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def timed_send(message: Message) -> None:
            try:
                await asyncio.wait_for(send(message), self.send_timeout_s)
            except TimeoutError:
                raise ClientStoppedReading(
                    f"the client read nothing of its answer for {self.send_timeout_s:g} s"
                ) from None

        await self.app(scope, receive, timed_send)
