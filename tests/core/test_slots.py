"""Connection slots (asyncapi_client/_slots.py): at most ``size`` holders, first come first
served, and no slot lost or made by a cancellation, whenever it comes."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable

import pytest

from asyncapi_client import Client
from asyncapi_client._slots import Slots
from tests._checks import settled
from tests._pages import serve_pools, serving


async def bounded(waiting: Awaitable[object]) -> None:
    """Await ``waiting``, or fail after 5 s: a lost slot fails the test instead of hanging it."""
    async with asyncio.timeout(5):
        await waiting


async def holder(slots: Slots, name: str, order: list[str], go: asyncio.Event) -> None:
    """Takes a slot, notes it, holds it until ``go``, gives it back."""
    await slots.take()
    order.append(name)
    try:
        await go.wait()
    finally:
        slots.give()


async def test_a_free_slot_is_taken_at_once_and_given_back() -> None:
    slots = Slots(2)
    await slots.take()
    await slots.take()
    assert (slots.free, len(slots.waiting)) == (0, 0)
    slots.give()
    slots.give()
    assert slots.free == 2


async def test_waiters_get_slots_in_the_order_they_came() -> None:
    slots = Slots(1)
    order: list[str] = []
    go = {name: asyncio.Event() for name in "abcd"}
    tasks = [asyncio.create_task(holder(slots, n, order, go[n])) for n in "abcd"]
    assert await settled(lambda: len(slots.waiting) == 3)
    assert order == ["a"]
    for done, name in enumerate("abcd", start=1):
        go[name].set()
        assert await settled(lambda n=done: len(order) == min(4, n + 1))  # type: ignore[misc]
    await bounded(asyncio.gather(*tasks))
    assert order == list("abcd")
    assert (slots.free, len(slots.waiting)) == (1, 0)


async def held_with_waiting(count: int) -> tuple[Slots, list[asyncio.Task[None]]]:
    """One slot, taken; ``count`` callers queued for it, oldest first."""
    slots = Slots(1)
    await slots.take()
    waiters = [asyncio.create_task(slots.take()) for _ in range(count)]
    assert await settled(lambda: len(slots.waiting) == count)
    return slots, waiters


async def test_a_newcomer_never_overtakes_a_waiter_handed_the_slot() -> None:
    slots, (waiter,) = await held_with_waiting(1)
    slots.give()  # handed to the waiter, which has not run yet
    assert slots.free == 0
    newcomer = asyncio.create_task(slots.take())
    await bounded(waiter)
    assert await settled(lambda: len(slots.waiting) == 1)
    assert not newcomer.done()  # it queues behind the waiter's slot
    slots.give()
    await bounded(newcomer)
    slots.give()
    assert (slots.free, len(slots.waiting)) == (1, 0)


async def test_a_waiter_cancelled_while_it_waits_leaves_the_queue() -> None:
    slots, (first, second) = await held_with_waiting(2)
    first.cancel()
    with pytest.raises(asyncio.CancelledError):
        await first
    assert len(slots.waiting) == 1
    slots.give()
    await bounded(second)  # the slot went to the one still waiting
    slots.give()
    assert (slots.free, len(slots.waiting)) == (1, 0)


async def test_a_waiter_cancelled_after_it_was_handed_the_slot_passes_it_on() -> None:
    slots, (first, second) = await held_with_waiting(2)
    slots.give()  # handed to ``first`` ...
    first.cancel()  # ... which is cancelled before it runs
    with pytest.raises(asyncio.CancelledError):
        await first
    await bounded(second)  # the slot was passed on, not lost
    slots.give()
    assert (slots.free, len(slots.waiting)) == (1, 0)


async def test_a_slot_given_while_the_only_waiter_was_cancelled_is_free_again() -> None:
    slots, (waiter,) = await held_with_waiting(1)
    waiter.cancel()
    slots.give()  # the cancelled waiter is passed by: the slot is free
    with pytest.raises(asyncio.CancelledError):
        await waiter
    assert (slots.free, len(slots.waiting)) == (1, 0)
    await slots.take()  # and taken at once
    assert slots.free == 0


async def test_calls_cancelled_while_they_wait_for_a_connection_lose_no_slot() -> None:
    """At the server: after 20 calls waiting for max_connections=2 were cancelled, with one
    of them handed a slot as it was cancelled, two calls still run at once."""
    async with (
        serving(pool=serve_pools()) as server,
        Client(base_url=server.base_url, max_connections=2) as client,
    ):
        async with server.gate("pool") as gate:
            holding = [asyncio.ensure_future(client.pool(f"p{i}")) for i in range(2)]
            await gate.arrived(2)
            waiting = [asyncio.ensure_future(client.pool(f"w{i}")) for i in range(20)]
            await settled(lambda: False, turns=20)
            gate.release()
            for task in waiting:
                task.cancel()
            await asyncio.gather(*holding)
            await asyncio.gather(*waiting, return_exceptions=True)
        async with server.gate("pool") as gate:
            again = asyncio.gather(*(client.pool(f"q{i}") for i in range(4)))
            await gate.arrived(2)
            await settled(lambda: False, turns=50)  # time for a third, if one could come
            assert (gate.arrivals, server.in_flight) == (2, 2)
            gate.release()
            await again
    assert server.max_in_flight == 2
