"""Work that stops when something else happens first: its client goes away (a request whose client closed the
connection must not keep a model slot until decoding ends: six abandoned requests held theirs for ~29 s),
or the server's shutdown grace runs out (``ShutdownState.bounded``)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable
from typing import TypeVar

from starlette.types import Receive

from inference.server.errors import ApiError

T = TypeVar("T")


async def _disconnected(receive: Receive) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass


async def unless(work: Awaitable[T], stop: Awaitable[None]) -> tuple[T] | None:
    """``work``'s result (in a 1-tuple), or None when ``stop`` finished first: then ``work`` is cancelled and
    awaited, so that what it holds (a model slot) is freed before this returns."""
    task = asyncio.ensure_future(work)
    stopper = asyncio.ensure_future(stop)
    try:
        await asyncio.wait({task, stopper}, return_when=asyncio.FIRST_COMPLETED)
    except BaseException:
        task.cancel()
        raise
    finally:
        stopper.cancel()
    if task.done():
        return (task.result(),)
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError, Exception):
        await task
    return None


async def unless_disconnected(receive: Receive, work: Awaitable[T]) -> T:
    """``work``'s result; if the client disconnects first, ``work`` is cancelled and the answer is a 499 nobody
    reads. Call once the request body has been read."""
    result = await unless(work, _disconnected(receive))
    if result is None:
        raise ApiError(499, "the client closed the connection; its request was cancelled", "client_closed")
    return result[0]
