"""The slots of one served model: at most ``limit`` requests run on it at once.

Slots are handed out in arrival order: a freed slot goes to the request that has waited longest, not to
whichever polls first. A request waiting for a slot may take one back from a holder that says it is not
delivering work (a ``/live`` upload that fell far behind real time, docs/server_limits.md §2): that holder is
asked to end in good order, and its slot passes to the waiting request once the holder has let it go. Used from
the event loop only (every ``take`` and ``release`` runs there).
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable
from typing import Protocol

from inference.server.errors import ApiError

POLL_S = 0.05  # how often a waiting request looks for a holder that has fallen behind
RECLAIM_WAIT_S = 30.0  # a request waits this long for a slot it took back, even with busy_timeout_ms 0


class Yielding(Protocol):
    """A slot holder that may be asked to give its slot back."""

    def behind(self) -> bool:
        """Whether it is failing to deliver work now (so another request should have the slot)."""
        ...

    def give_back(self) -> None:
        """End soon in good order; its slot is released when it has (asked once)."""
        ...


class Slot:
    """One taken slot: released once, by the block that took it or by whoever it was handed over to."""

    def __init__(self, release: Callable[[Slot], None], holder: Yielding | None) -> None:
        self._release: Callable[[Slot], None] | None = release
        self.holder = holder
        self.handed_over = False

    def release(self) -> None:
        release, self._release = self._release, None
        if release is not None:
            release(self)

    def hand_over(self) -> Callable[[], None]:
        """The slot outlives the block (a streamed answer): the returned function frees it, once."""
        self.handed_over = True
        return self.release


class SlotPool:
    def __init__(self, refuse: Callable[[int], ApiError]) -> None:
        self._refuse = refuse  # the 429 for a request that found (and could take back) no slot
        self._active = 0
        self._waiters: deque[asyncio.Future[None]] = deque()
        self._yielding: set[Slot] = set()  # held slots whose holder may give them back
        self._giving_back: set[Slot] = set()  # asked to; not released yet

    @property
    def active(self) -> int:
        return self._active

    async def take(self, limit: int, wait_s: float, holder: Yielding | None = None) -> Slot:
        """A slot, waiting up to ``wait_s`` for one; a slot taken back from a holder that fell behind is
        waited for up to ``RECLAIM_WAIT_S`` whatever ``wait_s`` is. Past that, the 429 of ``refuse``."""
        if self._active < limit and not self._waiters:
            self._active += 1
            return self._held(holder)
        loop = asyncio.get_running_loop()
        waiter: asyncio.Future[None] = loop.create_future()
        self._waiters.append(waiter)
        started = loop.time()
        deadline = started + wait_s
        got = False
        try:
            while not waiter.done():
                self._take_back_for_waiters()
                if len(self._giving_back) > self._waiters.index(waiter):  # a slot is coming for this one
                    deadline = max(deadline, started + RECLAIM_WAIT_S)
                remaining = deadline - loop.time()
                if remaining <= 0:
                    break
                await asyncio.wait({waiter}, timeout=min(POLL_S, remaining))
            got = waiter.done() and not waiter.cancelled()
        finally:
            if waiter in self._waiters:
                self._waiters.remove(waiter)
            if not got:
                if waiter.done() and not waiter.cancelled():
                    self._pass_on()  # handed over just as this request gave up or was cancelled
                waiter.cancel()
        if not got:
            raise self._refuse(self._active)
        return self._held(holder)

    def _held(self, holder: Yielding | None) -> Slot:
        slot = Slot(self._release, holder)
        if holder is not None:
            self._yielding.add(slot)
        return slot

    def _take_back_for_waiters(self) -> None:
        """Ask holders that fell behind for their slots, one for each waiting request not yet served."""
        wanted = len(self._waiters) - len(self._giving_back)
        for slot in list(self._yielding - self._giving_back):
            if wanted <= 0:
                return
            assert slot.holder is not None
            if slot.holder.behind():
                self._giving_back.add(slot)
                wanted -= 1
                slot.holder.give_back()

    def _release(self, slot: Slot) -> None:
        self._yielding.discard(slot)
        self._giving_back.discard(slot)
        self._pass_on()

    def _pass_on(self) -> None:
        """A slot is free: the longest-waiting request gets it, else it is counted free."""
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return
        self._active = max(0, self._active - 1)
