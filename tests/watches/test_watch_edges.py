"""The edges of a watch a bot meets: polls that fail and are tried again (counted), a server
that asks for a longer interval, state files that are not a watch's, pool and leaderboard
watches carried across a restart, wait_for_order's refusals, and a closed watch."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from asyncapi_client import Client, FileWatchState, RequestTimeoutError
from asyncapi_client.testing import FakeExchange, FakeServer, Reply

INTERVAL = 0.02


@pytest.fixture
async def server() -> AsyncIterator[FakeServer]:
    exchange = FakeExchange.generate(seed=12, users=1, orders_per_user=40, pools=2)
    async with FakeServer(exchange, poll_interval=None) as started:
        yield started


async def test_a_failed_poll_is_counted_and_tried_again_at_the_next_interval(
    server: FakeServer,
) -> None:
    exchange = server.exchange
    address = next(iter(exchange.orders))
    async with Client(base_url=server.base_url, max_retries=0) as client:
        watch = client.watch_orders(address, interval=INTERVAL)
        first = asyncio.ensure_future(anext(watch))
        await server.wait_until(lambda: len(server.requests) >= 2)  # the baseline
        server.script("user", Reply(503), Reply(503))
        await server.wait_until(lambda: server.pending_replies("user") == 0)
        new = exchange.advance(1)
        while not any(c.kind == "order.new" for c in new):
            new = exchange.advance(1)
        change = await asyncio.wait_for(first, 10)
        assert watch.failures == 2
        await watch.aclose()
    assert change.kind in ("new", "closed", "updated")


async def test_a_watch_never_polls_faster_than_the_server_asks() -> None:
    exchange = FakeExchange.generate(seed=12, users=1, orders_per_user=20, pools=2)
    async with (
        FakeServer(exchange, poll_interval=0.3) as server,
        Client(base_url=server.base_url) as client,
    ):
        watch = client.watch_pool(next(iter(exchange.pools)), interval=INTERVAL)
        waiting = asyncio.ensure_future(anext(watch))
        await server.wait_until(lambda: len(server.requests) >= 3, timeout=10)
        waiting.cancel()
        await asyncio.gather(waiting, return_exceptions=True)
        await watch.aclose()
        times = [r.time for r in server.requests[:3]]
    assert times[2] - times[1] >= 0.25  # X-Poll-Interval: 0.3, not the 0.02 asked


@pytest.mark.parametrize(
    ("content", "why"),
    [("{not json", "not a watch state"), ('{"version": 99, "watch": {}, "data": {}}', "version")],
)
async def test_a_file_that_is_not_a_watch_state_is_refused(
    server: FakeServer, tmp_path: Path, content: str, why: str
) -> None:
    path = tmp_path / "state.json"
    path.write_text(content)
    async with Client(base_url=server.base_url) as client:
        watch = client.watch_pool(next(iter(server.exchange.pools)), state=FileWatchState(path))
        with pytest.raises(ValueError, match=why):
            await anext(watch)
    with pytest.raises(ValueError, match="non-empty"):
        FileWatchState("")
    assert repr(FileWatchState(path)) == f"FileWatchState({str(path)!r})"


async def test_pool_and_leaderboard_watches_go_on_from_their_state(
    server: FakeServer, tmp_path: Path
) -> None:
    exchange = server.exchange
    pool_id = next(iter(exchange.pools))
    pool_state = FileWatchState(tmp_path / "pool.json")
    board_state = FileWatchState(tmp_path / "board.json")
    async with Client(base_url=server.base_url) as client:
        for state, make in (
            (pool_state, lambda s: client.watch_pool(pool_id, interval=INTERVAL, state=s)),
            (board_state, lambda s: client.watch_leaderboard(top=5, interval=INTERVAL, state=s)),
        ):
            first = make(state)
            waiting = asyncio.ensure_future(anext(first))
            await server.wait_until(lambda: state.path.exists())  # noqa: B023
            waiting.cancel()
            await asyncio.gather(waiting, return_exceptions=True)
            await first.aclose()
            saved = json.loads(state.path.read_text())["data"]["source"]
            again = make(state)  # restored from the file, not a new baseline
            moved = asyncio.ensure_future(anext(again))
            for _ in range(400):
                exchange.advance(5)
                await asyncio.sleep(0.005)  # the pace of the market
                if moved.done():
                    break
            change = await asyncio.wait_for(moved, 10)
            await again.aclose()
            assert saved
            assert change is not None


async def test_wait_for_order_refuses_what_can_never_come_and_bounds_its_wait(
    server: FakeServer,
) -> None:
    exchange = server.exchange
    address = next(iter(exchange.orders))
    closed = next(o for o in exchange.orders[address] if o["status"] == "CANCELLED")
    working = next(o for o in exchange.orders[address] if o["status"] == "OPEN")
    async with Client(base_url=server.base_url) as client:
        with pytest.raises(ValueError, match="final state"):
            await client.wait_for_order(address, closed["transactionId"], statuses=["FILLED"])
        started = time.monotonic()
        with pytest.raises(RequestTimeoutError, match=r"within 0\.3s"):
            await client.wait_for_order(
                address, working["transactionId"], interval=INTERVAL, timeout=0.3
            )
        assert time.monotonic() - started < 2.0
        with pytest.raises(ValueError, match="at least one"):
            await client.wait_for_order(address, working["transactionId"], statuses=[])
        with pytest.raises(ValueError, match="transaction_id"):
            await client.wait_for_order(address, "")


async def test_a_closed_watch_hands_out_nothing(server: FakeServer) -> None:
    async with Client(base_url=server.base_url) as client:
        watch = client.watch_pool(next(iter(server.exchange.pools)), interval=INTERVAL)
        await watch.aclose()
        await watch.aclose()  # twice is fine
        assert "closed" in repr(watch)
        assert watch.failures == 0
        with pytest.raises(StopAsyncIteration):
            await anext(watch)
        with pytest.raises(TypeError, match="state"):
            client.watch_pool("p", state="file.json")  # type: ignore[arg-type]
