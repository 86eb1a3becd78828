"""Request coalescing: identical GETs in flight at once share one request and one result.

The server here holds every answer until the test opens its gate, so "in flight at the
same time" is a fact of the test, not a matter of timing.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest
from aiohttp import web

from asyncapi_client import Client, DecodeError, NotFoundError, OrdersPage, Pool
from tests._loopback import serve

TOKEN = {
    "address": "0xt",
    "name": "T",
    "symbol": "T",
    "decimals": 18,
    "totalSupply": "1000.000000000000000001",
}


class GatedServer:
    """Counts requests and answers none of them until ``gate`` is set."""

    def __init__(self) -> None:
        self.gate = asyncio.Event()
        self.arrived = asyncio.Event()
        self.paths: list[str] = []
        self.status = 200
        self.body: bytes | None = None

    async def answer(
        self, calls: list[asyncio.Future[Any]], *, return_exceptions: bool = False
    ) -> list[Any]:
        """Once the first call has reached us (all of them are in flight), answer them all."""
        await self.arrived.wait()
        self.gate.set()
        return await asyncio.gather(*calls, return_exceptions=return_exceptions)

    async def handle(self, request: web.Request) -> web.StreamResponse:
        self.paths.append(request.path_qs)
        self.arrived.set()
        await self.gate.wait()
        if self.body is not None:
            return web.Response(body=self.body, status=self.status)
        if request.path.endswith("/orders"):
            return web.json_response({"orders": [], "cursor": None})
        pool_id = request.match_info["pool_id"]
        if pool_id == "missing":
            return web.json_response({"error": "no such pool"}, status=404)
        return web.json_response(
            {
                "poolId": pool_id,
                "baseToken": TOKEN,
                "quoteToken": TOKEN,
                "price": 1.5,
                "priceChange24h": 0.1,
                "volume24h": 10,
                "tvl": 20,
            }
        )


@pytest.fixture
async def gated() -> AsyncIterator[tuple[GatedServer, str]]:
    server = GatedServer()
    app = web.Application()
    app.router.add_get("/api/clob/pools/{pool_id}", server.handle)
    app.router.add_get("/api/clob/users/{address}/orders", server.handle)
    async with serve(app) as base:
        try:
            yield server, base
        finally:
            server.gate.set()


def _fan_out(calls: int, make: Callable[[], Awaitable[Any]]) -> list[asyncio.Future[Any]]:
    return [asyncio.ensure_future(make()) for _ in range(calls)]


async def test_a_hundred_identical_calls_make_one_request_and_share_one_result(
    gated: tuple[GatedServer, str],
) -> None:
    server, base = gated
    async with Client(base_url=base) as client:
        tasks = _fan_out(100, lambda: client.pool("0xpool"))
        pools: list[Pool] = await server.answer(tasks)
    assert server.paths == ["/api/clob/pools/0xpool"]
    assert all(pool is pools[0] for pool in pools)  # one decoded, frozen result
    assert str(pools[0].base_token.total_supply) == "1000.000000000000000001"


async def test_calls_made_one_after_another_are_not_cached(gated: tuple[GatedServer, str]) -> None:
    server, base = gated
    server.gate.set()
    async with Client(base_url=base) as client:
        first = await client.pool("0xpool")
        second = await client.pool("0xpool")
    assert first == second
    assert len(server.paths) == 2


async def test_only_identical_requests_are_shared(gated: tuple[GatedServer, str]) -> None:
    server, base = gated
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
        results = await server.answer(tasks)
    assert sorted(server.paths) == sorted(
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


async def test_an_error_reaches_every_waiter(gated: tuple[GatedServer, str]) -> None:
    server, base = gated
    async with Client(base_url=base) as client:
        tasks = _fan_out(20, lambda: client.pool("missing"))
        outcomes = await server.answer(tasks, return_exceptions=True)
    assert len(server.paths) == 1
    assert all(isinstance(outcome, NotFoundError) for outcome in outcomes)
    assert {outcome.status for outcome in outcomes if isinstance(outcome, NotFoundError)} == {404}


async def test_a_decode_error_reaches_every_waiter_with_its_path(
    gated: tuple[GatedServer, str],
) -> None:
    server, base = gated
    server.body = b'{"orders": [{"transactionId": 1}], "cursor": null}'
    async with Client(base_url=base) as client:
        tasks = _fan_out(10, lambda: client.orders("u"))
        outcomes = await server.answer(tasks, return_exceptions=True)
    assert len(server.paths) == 1
    assert {o.path for o in outcomes if isinstance(o, DecodeError)} == {"orders[0].transactionId"}
    assert len([o for o in outcomes if isinstance(o, DecodeError)]) == 10


async def test_cancelling_one_waiter_does_not_cancel_the_others_request(
    gated: tuple[GatedServer, str],
) -> None:
    server, base = gated
    async with Client(base_url=base) as client:
        tasks = _fan_out(5, lambda: client.pool("0xpool"))
        await server.arrived.wait()
        tasks[2].cancel()  # a follower
        await asyncio.wait([tasks[2]])
        server.gate.set()
        pools = await asyncio.gather(*(tasks[:2] + tasks[3:]))
    assert tasks[2].cancelled()
    assert {pool.pool_id for pool in pools} == {"0xpool"}
    assert len(server.paths) == 1


async def test_when_every_waiter_is_cancelled_nothing_is_left_running(
    gated: tuple[GatedServer, str],
) -> None:
    server, base = gated
    async with Client(base_url=base) as client:
        tasks = _fan_out(3, lambda: client.pool("0xpool"))
        await server.arrived.wait()
        for task in reversed(tasks):  # followers first, then the leader
            task.cancel()
        await asyncio.wait(tasks)
        assert all(task.cancelled() for task in tasks)
        server.gate.set()
        again = await client.pool("0xpool")  # a fresh request, not a stale shared one
    assert again.pool_id == "0xpool"
    assert len(server.paths) == 2
    ours = [
        task
        for task in asyncio.all_tasks()
        if getattr(task.get_coro(), "__qualname__", "").startswith(("Client.", "Transport."))
    ]
    assert ours == []
