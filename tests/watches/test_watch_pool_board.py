"""watch_pool and watch_leaderboard against the living fake's journal, and what a quiet
watch costs the server: conditional requests answered 304."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncIterator

import pytest

from asyncapi_client import Client, LeaderboardChange, PoolChange
from asyncapi_client.testing import FakeExchange, FakeServer

INTERVAL = 0.02


@pytest.fixture
async def server() -> AsyncIterator[FakeServer]:
    exchange = FakeExchange.generate(seed=8, users=2, orders_per_user=40, pools=3)
    async with FakeServer(exchange) as started:
        yield started


async def test_every_pool_change_is_one_the_journal_made_and_the_last_is_delivered(
    server: FakeServer,
) -> None:
    exchange = server.exchange
    pool_id = next(iter(exchange.pools))
    seen: list[PoolChange] = []
    async with Client(base_url=server.base_url) as client:
        watch = client.watch_pool(pool_id, interval=INTERVAL)

        async def consume() -> None:
            async for change in watch:
                seen.append(change)

        task = asyncio.ensure_future(consume())
        await server.wait_until(lambda: len(server.requests) >= 1)
        for _ in range(60):
            exchange.advance(5)
            await asyncio.sleep(0.01)  # the pace of the market
        last = exchange.pools[pool_id]
        await server.wait_until(lambda: bool(seen) and seen[-1].pool.price == last["price"])
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await watch.aclose()
    states = {
        c.after["price"] for c in exchange.journal if c.kind == "pool.update" and c.key == pool_id
    }
    assert seen
    assert all(change.pool.price in states for change in seen)  # nothing made up
    assert all(change.changed for change in seen)
    for before, after in itertools.pairwise(seen):
        assert after.previous == before.pool  # each change starts where the last ended


async def test_the_leaderboard_watch_ends_on_the_board_the_journal_left(
    server: FakeServer,
) -> None:
    exchange = server.exchange
    seen: list[LeaderboardChange] = []
    async with Client(base_url=server.base_url) as client:
        watch = client.watch_leaderboard(top=20, interval=INTERVAL)

        async def consume() -> None:
            async for change in watch:
                seen.append(change)

        task = asyncio.ensure_future(consume())
        await server.wait_until(lambda: len(server.requests) >= 1)
        for _ in range(40):
            exchange.advance(10)
            await asyncio.sleep(0.01)
        top = [(e["address"], e["rank"]) for e in exchange.leaderboard[:20]]
        await server.wait_until(
            lambda: bool(seen) and [(e.address, e.rank) for e in seen[-1].entries] == top
        )
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await watch.aclose()
    for change in seen:
        assert change.entered or change.left or change.moved
        before = {e.address for e in change.previous}
        after = {e.address for e in change.entries}
        assert change.entered == after - before
        assert change.left == before - after


async def test_a_quiet_watch_is_two_conditional_requests_an_interval_answered_304(
    server: FakeServer,
) -> None:
    exchange = server.exchange
    address = next(iter(exchange.orders))
    async with Client(base_url=server.base_url) as client:
        watch = client.watch_orders(address, interval=INTERVAL)
        waiting = asyncio.ensure_future(anext(watch))
        await server.wait_until(lambda: len(server.requests) >= 12)
        waiting.cancel()
        await asyncio.gather(waiting, return_exceptions=True)
        await watch.aclose()
    polls = server.requests[2:12]  # after the baseline
    assert [r.operation for r in polls] == ["user", "orders"] * 5
    assert all(r.status == 304 for r in polls)
