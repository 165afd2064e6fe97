"""A model's slots: handed out in arrival order, and taken back from a live upload that fell behind real time
only when another request waits for one. A live upload's pace counts only the time spent waiting for it."""

from __future__ import annotations

import asyncio

import pytest

from inference.server.errors import ApiError
from inference.server.live_pace import LivePace, LivePaceLimit
from inference.server.slots import SlotPool


class Holder:
    def __init__(self) -> None:
        self.is_behind = False
        self.asked = 0

    def behind(self) -> bool:
        return self.is_behind

    def give_back(self) -> None:
        self.asked += 1


def _pool() -> SlotPool:
    return SlotPool(lambda active: ApiError(429, f"{active} running", "too_many_requests"))


async def _until(condition: object) -> None:
    while not condition():  # type: ignore[operator]
        await asyncio.sleep(0.01)


def test_slots_go_to_waiting_requests_in_the_order_they_asked() -> None:
    async def scenario() -> None:
        pool = _pool()
        held = await pool.take(1, 0.0)
        with pytest.raises(ApiError) as refused:
            await pool.take(1, 0.0)  # busy, and nothing to take back
        assert refused.value.status == 429 and pool.active == 1
        first = asyncio.ensure_future(pool.take(1, 60.0))
        await asyncio.sleep(0.05)
        second = asyncio.ensure_future(pool.take(1, 60.0))
        await asyncio.sleep(0.05)
        held.release()
        got = await asyncio.wait_for(first, 10)
        assert not second.done() and pool.active == 1
        got.release()
        (await asyncio.wait_for(second, 10)).release()
        assert pool.active == 0

    asyncio.run(scenario())


def test_a_request_that_gives_up_waiting_passes_its_place_on() -> None:
    async def scenario() -> None:
        pool = _pool()
        held = await pool.take(1, 0.0)
        leaving = asyncio.ensure_future(pool.take(1, 60.0))
        staying = asyncio.ensure_future(pool.take(1, 60.0))
        await asyncio.sleep(0.05)
        leaving.cancel()  # its client went away
        with pytest.raises(asyncio.CancelledError):
            await leaving
        held.release()
        (await asyncio.wait_for(staying, 10)).release()
        assert pool.active == 0

    asyncio.run(scenario())


def test_a_holder_that_fell_behind_gives_its_slot_to_a_waiting_request() -> None:
    async def scenario() -> None:
        pool = _pool()
        holder = Holder()
        held = await pool.take(1, 0.0, holder)
        with pytest.raises(ApiError):
            await pool.take(1, 0.0)  # keeping up: it keeps its slot
        assert holder.asked == 0
        holder.is_behind = True
        # busy_timeout 0, yet the request waits: a slot is coming back for it.
        waiting = asyncio.ensure_future(pool.take(1, 0.0))
        await asyncio.wait_for(_until(lambda: holder.asked == 1), 10)
        await asyncio.sleep(0.2)  # still asked once, and the request still waits for the holder to let go
        assert holder.asked == 1 and not waiting.done()
        held.release()  # the stream ended in good order
        (await asyncio.wait_for(waiting, 10)).release()
        assert pool.active == 0

    asyncio.run(scenario())


def test_no_holder_is_asked_without_a_waiting_request() -> None:
    async def scenario() -> None:
        pool = _pool()
        holder = Holder()
        holder.is_behind = True
        held = await pool.take(2, 0.0, holder)
        (await pool.take(2, 0.0)).release()  # a free slot: nobody has to give one back
        assert holder.asked == 0
        held.release()

    asyncio.run(scenario())


def test_the_pace_counts_audio_against_the_time_spent_waiting_for_it() -> None:
    now = [0.0]
    pace = LivePace(LivePaceLimit(min_realtime=0.5, window_s=10.0), clock=lambda: now[0])
    assert not pace.behind()  # nothing waited for yet
    pace.start_waiting()
    now[0] = 0.5
    pace.stop_waiting()
    pace.record(0.5)  # real time
    pace.start_waiting()
    now[0] = 1.0
    assert not pace.behind()  # 0.5 s of audio in 1.0 s waited: exactly half
    now[0] = 1.2
    assert pace.behind()  # the wait in progress counts
    pace.stop_waiting()
    pace.record(5.0)
    now[0] = 100.0  # not waiting (the model was busy): this time does not count
    assert not pace.behind() and pace.in_window() == (5.5, 1.2)
    pace.start_waiting()
    now[0] = 109.0
    assert not pace.behind()  # 5.5 s of audio over the 10 s window
    now[0] = 111.0
    assert pace.behind()  # the window has moved past that audio
