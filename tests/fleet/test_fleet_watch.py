"""``fleet.RedisWatchState`` in one process: several watches, each with its own state
object and consumer as separate processes would have, on a real redis-server, against the
fake exchange edited by the test. What a consumer started again gets, what a new one gets,
``initial``, many watches under one name, the lease handed over on close, every key
expiring, Redis losing its data, a SyncClient, and the arguments."""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import AsyncIterator
from typing import Any

import pytest
import redis

from asyncapi_client import Client, OrderChange, SyncClient, Watch
from asyncapi_client.fleet import RedisWatchState
from asyncapi_client.testing import FakeExchange, FakeServer
from tests._watchfleet import OPEN, add_order, expiries, move, sync_profiles

pytest_plugins = ("tests._redis",)

INTERVAL = 0.05
NAME = "watch-test"


@pytest.fixture
def exchange() -> FakeExchange:
    exchange = FakeExchange.generate(seed=12, users=2, orders_per_user=60, pools=2)
    sync_profiles(exchange)
    return exchange


@pytest.fixture
async def server(exchange: FakeExchange) -> AsyncIterator[FakeServer]:
    async with FakeServer(exchange) as started:
        yield started


@pytest.fixture
def address(exchange: FakeExchange) -> str:
    return next(iter(exchange.orders))


async def next_change(watch: Watch[OrderChange]) -> OrderChange:
    async with asyncio.timeout(10):
        return await anext(watch)


class Follower:
    """A watch iterated by a task of its own, as another process of the fleet would."""

    def __init__(self, watch: Watch[OrderChange]) -> None:
        self.watch = watch
        self.seen: list[OrderChange] = []
        self._news = asyncio.Event()
        self.task = asyncio.create_task(self._follow())

    async def _follow(self) -> None:
        async for change in self.watch:
            self.seen.append(change)
            self._news.set()

    async def wait_for(self, tx: str, status: str) -> None:
        async with asyncio.timeout(10):
            while not any(
                (c.order.transaction_id, c.order.status.value) == (tx, status) for c in self.seen
            ):
                self._news.clear()
                await self._news.wait()

    def states(self) -> list[tuple[str, str]]:
        return [(c.order.transaction_id, c.order.status.value) for c in self.seen]

    async def stop(self) -> None:
        self.task.cancel()
        await asyncio.gather(self.task, return_exceptions=True)
        await self.watch.aclose()


def count_keys(redis_url: str, part: str) -> int:
    return sum(1 for key in expiries(redis_url) if part in key)


async def started(redis_url: str, consumers: int) -> None:
    """Until ``consumers`` consumers are kept and the watch has its baseline."""
    for _ in range(400):  # bounded: 20 s
        if count_keys(redis_url, ":consumer:") >= consumers and count_keys(redis_url, ":state"):
            return
        await asyncio.sleep(0.05)  # a bounded look at Redis, not a stand-in for a sync
    raise AssertionError("the watches did not start")


async def test_a_consumer_started_again_gets_its_change_in_hand_then_goes_on(
    server: FakeServer, exchange: FakeExchange, address: str, redis_url: str
) -> None:
    async with (
        Client(base_url=server.base_url) as client,
        RedisWatchState(redis_url, name=NAME, consumer="b") as state_b,
        RedisWatchState(redis_url, name=NAME, consumer="a") as state_a,
    ):
        other = Follower(client.watch_orders(address, interval=INTERVAL, state=state_b))
        watch = client.watch_orders(address, interval=INTERVAL, state=state_a)
        first = asyncio.ensure_future(next_change(watch))
        await started(redis_url, 2)
        add_order(exchange, address, "0xa")
        add_order(exchange, address, "0xb")
        a = await first
        b = await next_change(watch)  # a is handled now; b is in hand
        # the process stops here, b not handled: as a SIGKILL would leave it
        async with RedisWatchState(redis_url, name=NAME, consumer="a") as again_state:
            again = client.watch_orders(address, interval=INTERVAL, state=again_state)
            b_again = await next_change(again)
            async with RedisWatchState(redis_url, name=NAME, consumer="new") as new_state:
                new = client.watch_orders(address, interval=INTERVAL, state=new_state)
                new_first = asyncio.ensure_future(next_change(new))
                await started(redis_url, 3)
                add_order(exchange, address, "0xc")
                c = await next_change(again)
                assert (await new_first).order.transaction_id == "0xc"  # from the end
                await new.aclose()
            await again.aclose()  # c is handled
            third = client.watch_orders(address, interval=INTERVAL, state=again_state)
            third_first = asyncio.ensure_future(next_change(third))
            await other.wait_for("0xc", "OPEN")
            add_order(exchange, address, "0xd")
            d = await third_first
            await third.aclose()
        await other.stop()
    assert [x.order.transaction_id for x in (a, b, b_again, c, d)] == [
        "0xa",
        "0xb",
        "0xb",
        "0xc",
        "0xd",
    ]
    assert b_again.key == b.key
    assert [tx for tx, _ in other.states()] == ["0xa", "0xb", "0xc", "0xd"]


async def test_initial_gives_a_new_consumer_the_open_orders_and_one_poller_polls(
    server: FakeServer, exchange: FakeExchange, address: str, redis_url: str
) -> None:
    open_ids = {o["transactionId"] for o in exchange.orders[address] if o["status"] in OPEN}
    async with (
        Client(base_url=server.base_url, headers={"X-Worker": "1"}) as one,
        Client(base_url=server.base_url, headers={"X-Worker": "2"}) as two,
        RedisWatchState(redis_url, name=NAME, consumer="one") as state_one,
        RedisWatchState(redis_url, name=NAME, consumer="two") as state_two,
    ):
        first = Follower(one.watch_orders(address, interval=INTERVAL, state=state_one))
        await started(redis_url, 1)
        second = two.watch_orders(address, interval=INTERVAL, state=state_two, initial=True)
        seen = {(await next_change(second)).order.transaction_id for _ in open_ids}
        polled = len(server.requests)
        add_order(exchange, address, "0xfirst")
        await first.wait_for("0xfirst", "OPEN")
        assert (await next_change(second)).order.transaction_id == "0xfirst"
        await second.aclose()
        await first.stop()
    assert seen == open_ids
    assert first.states() == [("0xfirst", "OPEN")]  # initial is the new consumer's own
    pollers = {r.headers["X-Worker"] for r in server.requests[polled:] if r.operation == "user"}
    assert pollers == {"1"}


async def test_one_name_holds_many_watches(
    server: FakeServer, exchange: FakeExchange, address: str, redis_url: str
) -> None:
    pool_id = next(iter(exchange.pools))
    async with (
        Client(base_url=server.base_url) as client,
        RedisWatchState(redis_url, name=NAME, consumer="c") as state,
    ):
        orders = Follower(client.watch_orders(address, interval=INTERVAL, state=state))
        side = Follower(client.watch_orders(address, side="BUY", interval=INTERVAL, state=state))
        pool = client.watch_pool(pool_id, interval=INTERVAL, state=state)
        change = asyncio.ensure_future(anext(pool))
        for _ in range(400):  # bounded: 20 s
            if count_keys(redis_url, ":state") == 3:
                break
            await asyncio.sleep(0.05)  # a bounded look at Redis, not a stand-in for a sync
        exchange.pools[pool_id]["price"] = exchange.pools[pool_id]["price"] * 2 + 1
        order = add_order(exchange, address, "0xmany")
        order["side"] = "SELL"
        async with asyncio.timeout(10):
            pool_change = await change
        await orders.wait_for("0xmany", "OPEN")
        await pool.aclose()
        await orders.stop()
        await side.stop()
    assert "price" in pool_change.changed
    assert side.states() == []  # another watch, with its own stream
    assert count_keys(redis_url, ":stream") == 2


async def test_closing_the_poller_hands_the_lease_over(
    server: FakeServer, exchange: FakeExchange, address: str, redis_url: str
) -> None:
    async with (
        Client(base_url=server.base_url, headers={"X-Worker": "1"}) as one,
        Client(base_url=server.base_url, headers={"X-Worker": "2"}) as two,
        RedisWatchState(redis_url, name=NAME, consumer="one") as state_one,
        RedisWatchState(redis_url, name=NAME, consumer="two") as state_two,
    ):
        first = Follower(one.watch_orders(address, interval=INTERVAL, state=state_one))
        await started(redis_url, 1)
        second = Follower(two.watch_orders(address, interval=INTERVAL, state=state_two))
        await started(redis_url, 2)
        order = add_order(exchange, address, "0xhand")
        await second.wait_for("0xhand", "OPEN")
        await first.stop()
        closed_at = len(server.requests)
        move(exchange, order, "FILLED")
        await second.wait_for("0xhand", "FILLED")
        await second.stop()
    after = {r.headers["X-Worker"] for r in server.requests[closed_at:]}
    assert after == {"2"}
    assert second.states() == [("0xhand", "OPEN"), ("0xhand", "FILLED")]


async def test_every_key_expires_once_no_process_watches(
    server: FakeServer, exchange: FakeExchange, address: str, redis_url: str
) -> None:
    async with (
        Client(base_url=server.base_url) as client,
        RedisWatchState(redis_url, name=NAME, consumer="x", ttl=1.0) as state,
    ):
        follower = Follower(client.watch_orders(address, interval=INTERVAL, state=state))
        await started(redis_url, 1)
        add_order(exchange, address, "0xexpire")
        await follower.wait_for("0xexpire", "OPEN")
        keys = expiries(redis_url)
        await follower.stop()
    assert {key.rsplit(":", 1)[-1] for key in keys} >= {"lease", "state", "stream", "x"}
    assert all(0 < ttl <= 1000 for ttl in keys.values()), keys
    for _ in range(100):  # bounded: 5 s
        if not expiries(redis_url):
            break
        await asyncio.sleep(0.05)  # waiting for the expiry itself, bounded
    assert expiries(redis_url) == {}


async def test_redis_losing_its_data_misses_no_final_state(
    server: FakeServer,
    exchange: FakeExchange,
    address: str,
    redis_url: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    async with (
        Client(base_url=server.base_url) as client,
        RedisWatchState(redis_url, name=NAME, consumer="one") as state_one,
        RedisWatchState(redis_url, name=NAME, consumer="two") as state_two,
    ):
        first = Follower(client.watch_orders(address, interval=INTERVAL, state=state_one))
        second = Follower(client.watch_orders(address, interval=INTERVAL, state=state_two))
        await started(redis_url, 2)
        order = add_order(exchange, address, "0xlost")
        await first.wait_for("0xlost", "OPEN")
        await second.wait_for("0xlost", "OPEN")
        with caplog.at_level(logging.WARNING, logger="asyncapi_client"):
            plain = redis.Redis.from_url(redis_url)
            plain.flushall()  # as a Redis restarted empty between two calls
            plain.close()
            move(exchange, order, "CANCELLED")
            await first.wait_for("0xlost", "CANCELLED")
            await second.wait_for("0xlost", "CANCELLED")
        later = add_order(exchange, address, "0xlater")
        await first.wait_for("0xlater", "OPEN")
        await second.wait_for("0xlater", "OPEN")
        move(exchange, later, "FILLED")
        await first.wait_for("0xlater", "FILLED")
        await second.wait_for("0xlater", "FILLED")
        await first.stop()
        await second.stop()
    assert any("lost the fleet's state" in r.getMessage() for r in caplog.records)


def test_a_sync_client_watches_with_the_fleet(redis_url: str) -> None:
    exchange = FakeExchange.generate(seed=13, users=1, orders_per_user=30)
    sync_profiles(exchange)
    address = next(iter(exchange.orders))
    with FakeServer(exchange).in_thread() as server:
        state = RedisWatchState(redis_url, name=NAME, consumer="sync")
        with SyncClient(base_url=server.base_url) as client:
            watch = client.watch_orders(address, interval=INTERVAL, state=state)
            got: list[OrderChange] = []
            reader = threading.Thread(target=lambda: got.append(next(iter(watch))))
            reader.start()
            for _ in range(400):  # bounded: 20 s
                if count_keys(redis_url, ":state"):
                    break
                threading.Event().wait(0.05)  # a bounded look at Redis
            add_order(exchange, address, "0xsync")
            reader.join(timeout=10)
            watch.close()
    assert [c.order.transaction_id for c in got] == ["0xsync"]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"name": "", "consumer": "c"}, "name must be a non-empty string"),
        ({"name": "a b", "consumer": "c"}, "name must be at most 128 printable"),
        ({"name": "n", "consumer": ""}, "consumer must be a non-empty string"),
        ({"name": "n", "consumer": "{c}"}, "consumer must be at most 128 printable"),
        ({"name": "n", "consumer": "c", "ttl": 0}, "ttl must be finite and at least 1"),
        ({"name": "n", "consumer": "c", "ttl": float("inf")}, "ttl must be finite"),
        ({"name": "n", "consumer": "c", "ttl": "1"}, "ttl must be a number"),
    ],
)
def test_bad_arguments_are_refused_clearly(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        RedisWatchState("redis://127.0.0.1:6379/0", **kwargs)


def test_a_bad_url_is_refused_and_the_repr_hides_credentials() -> None:
    with pytest.raises(ValueError, match="starts with redis://"):
        RedisWatchState("http://127.0.0.1", name="n", consumer="c")
    shown = repr(RedisWatchState("redis://:secret@127.0.0.1:6379/2", name="n", consumer="c"))
    assert "secret" not in shown
    assert shown == "RedisWatchState('redis://127.0.0.1:6379/2', name='n', consumer='c')"
