"""A fake that lives: what the journal says is what the server then serves, the activity
moves the data at about its rate on the server's loop (also in the threaded mode) and stops
with the server, and a walk begun before orders are added sees each order once."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import orjson
import pytest

from asyncapi_client import Client, OrderStatusName
from asyncapi_client.testing import Change, FakeExchange, FakeServer, WireDict

WORKING = ("OPEN", "PARTIALLY_FILLED")


def small(seed: int = 5, **sizes: int) -> FakeExchange:
    options = {"users": 3, "orders_per_user": 40, "leaderboard_size": 30, "pools": 4}
    options.update(sizes)
    return FakeExchange.generate(seed=seed, tokens=10, **options)


@pytest.fixture
async def session() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession() as opened:
        yield opened


async def get(session: aiohttp.ClientSession, server: FakeServer, path: str) -> Any:
    async with session.get(f"{server.base_url}{path}") as response:
        assert response.status == 200, await response.text()
        return orjson.loads(await response.read())


async def served(session: aiohttp.ClientSession, server: FakeServer, change: Change) -> WireDict:
    """What the server serves now of what ``change`` changed."""
    if change.kind == "pool.update":
        found: WireDict = await get(session, server, f"/api/clob/pools/{change.key}")
        return found
    if change.kind == "leaderboard.update":
        body = await get(session, server, "/api/dash/leaderboard?limit=500")
        return next(e for e in body["leaderboard"] if e["address"] == change.key)
    body = await get(session, server, f"/api/clob/users/{change.address}/orders?limit=500")
    order: WireDict = next(o for o in body["orders"] if o["transactionId"] == change.key)
    profile = await get(session, server, f"/api/clob/users/{change.address}")
    listed = [o for o in profile["orders"] if o["transactionId"] == change.key]
    assert listed == ([order] if order["status"] in WORKING else [])
    return order


async def test_what_each_change_says_is_what_the_server_then_serves(
    session: aiohttp.ClientSession,
) -> None:
    exchange = small()
    async with FakeServer(exchange) as server:
        kinds = set()
        for _ in range(120):
            (change,) = exchange.advance()
            kinds.add(change.kind)
            assert await served(session, server, change) == change.after
        assert kinds == {"order.new", "order.update", "pool.update", "leaderboard.update"}
        assert server.journal is exchange.journal


async def test_the_profile_lists_the_working_orders_newest_first(
    session: aiohttp.ClientSession,
) -> None:
    exchange = small()
    exchange.advance(400)
    async with FakeServer(exchange) as server:
        for address, orders in exchange.orders.items():
            profile = await get(session, server, f"/api/clob/users/{address}")
            working = [o for o in orders if o["status"] in WORKING]
            assert profile["orders"] == working
            stamps = [o["timestamp"] for o in profile["orders"]]
            assert stamps == sorted(stamps, reverse=True)


async def test_activity_moves_the_data_at_about_its_rate() -> None:
    rate = 200.0
    exchange = small()
    began = time.monotonic()
    async with FakeServer(exchange, activity=rate) as server:
        assert server.activity == rate
        await server.wait_until(lambda: len(server.journal) >= 60)
        elapsed = time.monotonic() - began
        seen = len(server.journal)
    # never ahead of its rate (one change at the start), and not far behind it
    assert seen <= elapsed * rate + 1
    assert elapsed < 60 / rate * 20
    assert [c.seq for c in exchange.journal] == list(range(1, len(exchange.journal) + 1))


async def test_activity_runs_on_the_servers_loop_and_stops_with_it() -> None:
    stopped = small()
    async with FakeServer(stopped, activity=500.0) as server:
        await server.wait_until(lambda: len(server.journal) >= 5)
    after_close = len(stopped.journal)
    # another fake at the same rate applies 50 changes meanwhile: the closed one none
    async with FakeServer(small(seed=9), activity=500.0) as other:
        await other.wait_until(lambda: len(other.journal) >= 50)
    assert len(stopped.journal) == after_close


def test_activity_runs_in_the_threaded_mode() -> None:
    exchange = small()
    with FakeServer(exchange, activity=300.0).in_thread() as server:
        asyncio.run(server.wait_until(lambda: len(server.journal) >= 30))
    after_close = len(exchange.journal)
    assert after_close >= 30
    with FakeServer(small(seed=9), activity=300.0).in_thread() as other:
        asyncio.run(other.wait_until(lambda: len(other.journal) >= 30))
    assert len(exchange.journal) == after_close


@pytest.mark.parametrize("rate", [None, 0, 0.0])
async def test_no_activity_leaves_the_data_still(rate: float | None) -> None:
    exchange = small()
    async with FakeServer(exchange, activity=rate) as server:
        async with FakeServer(small(seed=9), activity=500.0) as other:
            await other.wait_until(lambda: len(other.journal) >= 30)
        assert server.journal == []
        assert server.activity is None


@pytest.mark.parametrize("rate", [-1, float("inf"), float("nan"), True, "5", 1e6])
def test_activity_is_a_rate(rate: object) -> None:
    with pytest.raises(ValueError, match="activity must be changes a second"):
        FakeServer(small(), activity=rate)  # type: ignore[arg-type]


def client_for(server: FakeServer) -> Client:
    return Client(base_url=server.base_url, testnet_base_url=server.testnet_base_url)


@pytest.mark.parametrize("status", [None, "OPEN"])
async def test_a_walk_while_orders_are_added_sees_each_order_once(
    status: OrderStatusName | None,
) -> None:
    exchange = small(users=1, orders_per_user=120)
    (address,) = exchange.orders
    at_start = {
        o["transactionId"]: o["status"]
        for o in exchange.orders[address]
        if status is None or o["status"] == status
    }
    seen: list[str] = []
    async with FakeServer(exchange) as server, client_for(server) as client:
        async for order in client.iter_orders(address, page_size=3, status=status):
            seen.append(order.transaction_id)
            assert status is None or order.status == status
            if len(seen) % 3 == 0:
                exchange.advance(10)  # new orders at the front, and some close
    added = [c for c in exchange.journal if c.kind == "order.new"]
    assert len(added) >= 10
    assert len(seen) == len(set(seen)), "no order twice"
    kept = {
        key
        for key in at_start
        if status is None
        or next(o for o in exchange.orders[address] if o["transactionId"] == key)["status"]
        == status
    }
    assert kept <= set(seen), "every order that existed (and kept matching) seen"
    assert not {c.key for c in added} & set(seen), "orders added behind the walk come later"


async def test_a_walk_under_activity_sees_each_order_once() -> None:
    exchange = small(users=1, orders_per_user=300)
    (address,) = exchange.orders
    at_start = {o["transactionId"] for o in exchange.orders[address]}
    async with FakeServer(exchange, activity=400.0) as server, client_for(server) as client:
        seen: list[str] = []
        async for page in client.iter_order_pages(address, page_size=5):
            seen += [o.transaction_id for o in page.orders]
            if len(seen) == 100:  # the data moves for a while in mid-walk
                wanted = len(server.journal) + 40
                await server.wait_until(lambda: len(server.journal) >= wanted)  # noqa: B023
    assert any(c.kind == "order.new" for c in exchange.journal)
    assert len(seen) == len(set(seen))
    assert at_start <= set(seen)
