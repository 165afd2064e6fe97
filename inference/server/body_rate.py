"""A minimum rate for request bodies: at least ``min_bytes_per_s`` over every ``window_s`` seconds spent waiting
for the client. "Any byte within N s" is kept alive by a trickle (2 bytes every 20 s held a model slot for
ten minutes); a rate over a window is not. Only the time the server waits in ``receive`` counts: while a
handler does not read (a live stream waiting for the model), the client cannot send, and that is not its
fault. A body that falls below the rate ends with a 408 in OpenAI's shape (for ``/live``: its error event)."""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from inference.server.errors import ApiError


@dataclass(frozen=True)
class BodyRateLimit:
    min_bytes_per_s: float = 1024.0
    window_s: float = 20.0


class BodyRate:
    """The bytes of one body against the time spent waiting for them (a clock that runs only while waiting)."""

    def __init__(self, limit: BodyRateLimit) -> None:
        self.limit = limit
        self.waited_s = 0.0
        self._arrivals: deque[tuple[float, int]] = deque()  # (waited_s when it arrived, bytes)

    def record(self, size: int) -> None:
        if size:
            self._arrivals.append((self.waited_s, size))
        while self._arrivals and self._arrivals[0][0] < self.waited_s - self.limit.window_s:
            self._arrivals.popleft()

    def allowance_s(self) -> float:
        """How much longer the server may wait for the next bytes before the body is too slow (<= 0: it is).
        The rate holds while the bytes of the last window reach ``min * window``; with nothing new arriving,
        that stops once the window has moved past the newest arrival that still makes up the sum."""
        need = self.limit.min_bytes_per_s * self.limit.window_s
        window = self.limit.window_s
        fails_at = window  # the first window is always granted in full
        total = 0
        for arrived_at, size in reversed(self._arrivals):
            total += size
            if total >= need:
                fails_at = max(window, arrived_at + window)
                break
        return fails_at - self.waited_s


def too_slow(limit: BodyRateLimit) -> ApiError:
    return ApiError(
        408,
        f"the request body arrived slower than this server's minimum of {limit.min_bytes_per_s:g} bytes/s "
        f"over {limit.window_s:g} s; the request was abandoned",
        "body_too_slow",
        headers={"Connection": "close"},  # the rest of the body is not read: the connection cannot be reused
    )


class BodyRateMiddleware:
    """Wraps ``receive`` of every HTTP request so that waiting for its body is bounded by ``BodyRate``."""

    def __init__(
        self, app: ASGIApp, limit: BodyRateLimit, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.app = app
        self.limit = limit
        self.clock = clock

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        rate = BodyRate(self.limit)
        body_done = False

        async def timed_receive() -> Message:
            nonlocal body_done
            if body_done:
                return await receive()  # only the disconnect is left to wait for: untimed
            allowance = rate.allowance_s()
            if allowance <= 0:
                raise too_slow(self.limit)
            started = self.clock()
            try:
                message = await asyncio.wait_for(receive(), allowance)
            except TimeoutError:
                raise too_slow(self.limit) from None
            finally:
                rate.waited_s += self.clock() - started
            if message["type"] == "http.request":
                rate.record(len(message.get("body", b"")))
                body_done = not message.get("more_body", False)
            else:
                body_done = True
            return message

        await self.app(scope, timed_receive, send)
