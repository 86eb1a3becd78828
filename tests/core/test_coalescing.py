"""Request coalescing: identical GETs in flight at once share one request and one result.

The fake exchange holds every answer at a gate until the test releases it, so "in flight at
the same time" is a fact of the test, not a matter of timing.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest

from asyncapi_client import Client, DecodeError, NotFoundError, OrdersPage, Pool
from asyncapi_client.testing import FakeServer, Gate, Reply
from tests._oracle import DEEP_DECIMAL


@pytest.fixture
async def gate(server: FakeServer) -> AsyncIterator[Gate]:
    """Every request of the oracle server held until released (released at the end)."""
    async with server.gate() as held:
        yield held


async def answer(
    gate: Gate, calls: list[asyncio.Future[Any]], *, return_exceptions: bool = False
) -> list[Any]:
    """Once the first call has reached the server (all of them are in flight), answer them all."""
    await gate.arrived(1)
    gate.release()
    return await asyncio.gather(*calls, return_exceptions=return_exceptions)


def paths(server: FakeServer) -> list[str]:
    """The request targets the server saw, path and query as sent."""
    return [r.raw_path for r in server.requests]


def _fan_out(calls: int, make: Callable[[], Awaitable[Any]]) -> list[asyncio.Future[Any]]:
    return [asyncio.ensure_future(make()) for _ in range(calls)]


async def test_a_hundred_identical_calls_make_one_request_and_share_one_result(
    server: FakeServer, gate: Gate
) -> None:
    async with Client(base_url=server.base_url) as client:
        tasks = _fan_out(100, lambda: client.pool("0xpool"))
        pools: list[Pool] = await answer(gate, tasks)
    assert paths(server) == ["/api/clob/pools/0xpool"]
    assert server.max_in_flight == 1
    assert all(pool is pools[0] for pool in pools)  # one decoded, frozen result
    assert str(pools[0].base_token.total_supply) == DEEP_DECIMAL


async def test_calls_made_one_after_another_are_not_cached(server: FakeServer) -> None:
    async with Client(base_url=server.base_url) as client:
        first = await client.pool("0xpool")
        second = await client.pool("0xpool")
    assert first == second
    assert len(server.requests) == 2


async def test_only_identical_requests_are_shared(server: FakeServer, gate: Gate) -> None:
    base = server.base_url  # both networks on one host: the same URL, another network
    async with Client(base_url=base, testnet_base_url=base) as client:
        tasks: list[asyncio.Future[Any]] = [
            asyncio.ensure_future(client.pool("a")),
            asyncio.ensure_future(client.pool("a")),
            asyncio.ensure_future(client.pool("b")),
            asyncio.ensure_future(client.pool("a", network="testnet")),  # same URL, other network
            asyncio.ensure_future(client.orders("u", status="OPEN")),
            asyncio.ensure_future(client.orders("u", status="open")),  # same request once encoded
            asyncio.ensure_future(client.orders("u", status="FILLED")),
            asyncio.ensure_future(client.pool("a", deadline=30)),  # its own deadline
        ]
        results = await answer(gate, tasks)
    assert sorted(paths(server)) == sorted(
        [
            "/api/clob/pools/a",
            "/api/clob/pools/b",
            "/api/clob/pools/a",
            "/api/clob/users/u/orders?status=OPEN",
            "/api/clob/users/u/orders?status=FILLED",
            "/api/clob/pools/a",
        ]
    )
    assert results[0] is results[1]
    assert results[0] is not results[3]
    assert isinstance(results[4], OrdersPage)
    assert results[4] is results[5]


async def test_an_error_reaches_every_waiter(server: FakeServer, gate: Gate) -> None:
    server.script("pool", Reply(404, json={"error": "no such pool"}))
    async with Client(base_url=server.base_url) as client:
        tasks = _fan_out(20, lambda: client.pool("missing"))
        outcomes = await answer(gate, tasks, return_exceptions=True)
    assert len(server.requests) == 1
    assert all(isinstance(outcome, NotFoundError) for outcome in outcomes)
    assert {outcome.status for outcome in outcomes if isinstance(outcome, NotFoundError)} == {404}


async def test_a_decode_error_reaches_every_waiter_with_its_path(
    server: FakeServer, gate: Gate
) -> None:
    server.script("orders", Reply(body=b'{"orders": [{"transactionId": 1}], "cursor": null}'))
    async with Client(base_url=server.base_url) as client:
        tasks = _fan_out(10, lambda: client.orders("u"))
        outcomes = await answer(gate, tasks, return_exceptions=True)
    assert len(server.requests) == 1
    assert {o.path for o in outcomes if isinstance(o, DecodeError)} == {"orders[0].transactionId"}
    assert len([o for o in outcomes if isinstance(o, DecodeError)]) == 10


async def test_cancelling_one_waiter_does_not_cancel_the_others_request(
    server: FakeServer, gate: Gate
) -> None:
    async with Client(base_url=server.base_url) as client:
        tasks = _fan_out(5, lambda: client.pool("0xpool"))
        await gate.arrived(1)
        tasks[2].cancel()  # a follower
        await asyncio.wait([tasks[2]])
        assert gate.held == 1  # the shared request is still waiting for its answer
        gate.release()
        pools = await asyncio.gather(*(tasks[:2] + tasks[3:]))
    assert tasks[2].cancelled()
    assert {pool.pool_id for pool in pools} == {"0xpool"}
    assert len(server.requests) == 1


async def test_when_every_waiter_is_cancelled_nothing_is_left_running(
    server: FakeServer, gate: Gate
) -> None:
    async with Client(base_url=server.base_url) as client:
        tasks = _fan_out(3, lambda: client.pool("0xpool"))
        await gate.arrived(1)
        for task in reversed(tasks):  # followers first, then the leader
            task.cancel()
        await asyncio.wait(tasks)
        assert all(task.cancelled() for task in tasks)
        gate.release()
        again = await client.pool("0xpool")  # a fresh request, not a stale shared one
    assert again.pool_id == "0xpool"
    assert len(server.requests) == 2
    ours = [
        task
        for task in asyncio.all_tasks()
        if getattr(task.get_coro(), "__qualname__", "").startswith(("Client.", "Transport."))
    ]
    assert ours == []
