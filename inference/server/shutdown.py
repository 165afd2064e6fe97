"""Graceful shutdown of ``captioneer serve``: once SIGTERM or Ctrl-C arrives, new requests get a 503, requests in
flight have ``grace_s`` to finish (a live upload ends where it is and gets its transcript), and what is still
running then ends with an OpenAI-shaped error (a JSON body, or an SSE ``error`` event and ``[DONE]``)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable
from typing import TypeVar

from inference.server.disconnect import unless
from inference.server.errors import ApiError

T = TypeVar("T")
POLL_S = 0.05


class ShutdownState:
    def __init__(self, grace_s: float = 10.0) -> None:
        self.grace_s = grace_s
        self._began: float | None = None

    def begin(self) -> None:
        """Called once the server was told to stop (from its signal handler)."""
        if self._began is None:
            self._began = time.monotonic()

    @property
    def draining(self) -> bool:
        return self._began is not None

    def grace_left(self) -> float:
        return (
            self.grace_s if self._began is None else max(0.0, self._began + self.grace_s - time.monotonic())
        )

    def refusal(self) -> ApiError:
        return ApiError(
            503,
            "the server is shutting down and takes no new requests; send it to another instance "
            "or again once the server is back",
            "server_shutting_down",
            headers={"Retry-After": "5"},
        )

    def cut_off(self) -> ApiError:
        return ApiError(
            503,
            f"the server shut down before this request finished (it waited {self.grace_s:g} s); "
            "send it again",
            "server_shutting_down",
            headers={"Retry-After": "5"},
        )

    async def wait_draining(self) -> None:
        while not self.draining:
            await asyncio.sleep(POLL_S)

    async def wait_grace_over(self) -> None:
        await self.wait_draining()
        while self.grace_left() > 0:
            await asyncio.sleep(min(POLL_S, self.grace_left()))

    async def bounded(self, work: Awaitable[T]) -> T:
        """``work``, unless the server stops and its grace runs out first: then a 503 (``cut_off``)."""
        result = await unless(work, self.wait_grace_over())
        if result is None:
            raise self.cut_off()
        return result[0]
