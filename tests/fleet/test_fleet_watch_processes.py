"""Three worker processes watching the same addresses through one Redis, each with its own
Client and consumer (tests/_fleet_watch_worker.py), against the fake exchange this process serves
and edits: one of them polls for all, every one receives every change in order; the poller
killed with SIGKILL is replaced within two intervals and misses no final state; a consumer
started again goes on after its last handled change; Redis frozen or killed, each polls on
its own, says so, and rejoins.
"""

from __future__ import annotations

import asyncio
import os
import signal
import time
from collections.abc import AsyncIterator, Iterator
from typing import TYPE_CHECKING, Any

import pytest

from asyncapi_client.testing import FakeExchange, FakeServer, RecordedRequest
from tests._watchfleet import WatchWorker, add_order, expiries, move, sync_profiles

if TYPE_CHECKING:
    from tests._redis import RedisServer

pytest_plugins = ("tests._redis",)

#: Seconds between polls: long enough that a loaded machine does not lose a lease.
INTERVAL = 0.8
WORKERS = 3
ADDRESSES = 3
NAME = "fleet-watch"


@pytest.fixture
def exchange() -> FakeExchange:
    exchange = FakeExchange.generate(seed=21, users=ADDRESSES, orders_per_user=40)
    sync_profiles(exchange)
    return exchange


@pytest.fixture
async def server(exchange: FakeExchange) -> AsyncIterator[FakeServer]:
    async with FakeServer(exchange) as started:
        yield started


@pytest.fixture
def addresses(exchange: FakeExchange) -> list[str]:
    return list(exchange.orders)


class Fleet:
    """The workers of one test, stopped at its end."""

    def __init__(self, server: FakeServer, redis_url: str, addresses: list[str]) -> None:
        self.config = {
            "base_url": server.base_url,
            "redis": redis_url,
            "name": NAME,
            "addresses": addresses,
            "interval": INTERVAL,
        }
        self.redis_url = redis_url
        self.addresses = addresses
        self.workers: dict[str, WatchWorker] = {}

    def start(self, worker: str, consumer: str) -> WatchWorker:
        started = self.workers[worker] = WatchWorker(worker, {**self.config, "consumer": consumer})
        return started

    async def joined(self, consumers: int) -> None:
        """Until every consumer of every watch is kept and every watch has its baseline."""
        wanted = {"consumer": consumers * len(self.addresses), "state": len(self.addresses)}
        for _ in range(600):  # bounded: 30 s
            keys = expiries(self.redis_url)
            kinds = {
                kind: sum(1 for key in keys if f":{kind}" in key) for kind in ("consumer", "state")
            }
            if kinds == wanted:
                return
            await asyncio.sleep(0.05)  # a bounded look at Redis, not a stand-in for a sync
        raise AssertionError(f"the fleet did not start: {kinds}, wanted {wanted}")

    def live(self) -> list[WatchWorker]:
        return [w for w in self.workers.values() if w.proc.poll() is None]

    async def delivered(self, steps: dict[str, tuple[str, str]]) -> None:
        """Until every live worker has received, per address, the (tx, status) given."""
        wanted = [(address, *step) for address, step in steps.items()]
        await asyncio.gather(*(w.wait_for_states(wanted) for w in self.live()))

    def stop(self) -> None:
        codes = [w.stop() for w in self.workers.values()]
        assert all(code in (0, -signal.SIGKILL) for code in codes), codes


@pytest.fixture
def fleet_of(server: FakeServer, addresses: list[str]) -> Iterator[Any]:
    made: list[Fleet] = []

    def make(redis_url: str) -> Fleet:
        made.append(Fleet(server, redis_url, addresses))
        return made[-1]

    yield make
    for fleet in made:
        fleet.stop()


def polls(server: FakeServer, address: str, since: float = 0.0) -> list[RecordedRequest]:
    """The profile requests of ``address`` (one per poll of its watch) since ``since``."""
    return [
        r
        for r in server.requests
        if r.operation == "user" and r.path.endswith(address) and r.time >= since
    ]


def states(worker: WatchWorker, address: str) -> list[tuple[str, str]]:
    return [(e["tx"], e["status"]) for e in worker.changes(address)]


def in_order(received: list[tuple[str, str]], expected: list[tuple[str, str]]) -> bool:
    """Every expected state was received, and each order's first sight of its states comes
    in the order they happened (a state received again later is a duplicate)."""
    first: dict[tuple[str, str], int] = {}
    for index, state in enumerate(received):
        first.setdefault(state, index)
    if not set(expected) <= first.keys():
        return False
    by_order: dict[str, list[int]] = {}
    for state in expected:
        by_order.setdefault(state[0], []).append(first[state])
    return all(indexes == sorted(indexes) for indexes in by_order.values())


def assert_all_expire(redis_url: str) -> None:
    keys = expiries(redis_url)
    assert keys
    assert all(ttl > 0 for ttl in keys.values()), keys


async def test_three_processes_poll_as_one_and_each_receives_every_change(
    server: FakeServer, exchange: FakeExchange, addresses: list[str], redis_url: str, fleet_of: Any
) -> None:
    fleet: Fleet = fleet_of(redis_url)
    for n in range(WORKERS):
        fleet.start(f"w{n}", f"w{n}")
    await fleet.joined(WORKERS)
    start = time.monotonic()
    orders = {a: add_order(exchange, a, f"0xsteady{i}") for i, a in enumerate(addresses)}
    expected: dict[str, list[tuple[str, str]]] = {a: [] for a in addresses}
    for status in ("OPEN", "PARTIALLY_FILLED", "FILLED"):
        for address, order in orders.items():
            if status != "OPEN":
                move(exchange, order, status)
            expected[address].append((order["transactionId"], status))
        await fleet.delivered({a: expected[a][-1] for a in addresses})
    elapsed = time.monotonic() - start
    for address in addresses:
        seen = polls(server, address, start)
        # what one process alone sends: one poll an interval, by one process
        assert len(seen) <= elapsed / INTERVAL + 2, (len(seen), elapsed)
        assert len({r.headers["X-Worker"] for r in seen}) == 1
        for worker in fleet.workers.values():
            assert states(worker, address) == expected[address]  # each once, in order
    assert_all_expire(redis_url)


async def test_the_poller_killed_is_replaced_within_two_intervals_and_a_consumer_goes_on(
    server: FakeServer, exchange: FakeExchange, addresses: list[str], redis_url: str, fleet_of: Any
) -> None:
    fleet: Fleet = fleet_of(redis_url)
    for n in range(WORKERS):
        fleet.start(f"w{n}", f"w{n}")
    await fleet.joined(WORKERS)
    first = addresses[0]
    orders = {a: add_order(exchange, a, f"0xkill{i}") for i, a in enumerate(addresses)}
    await fleet.delivered({a: (o["transactionId"], "OPEN") for a, o in orders.items()})
    poller = fleet.workers[polls(server, first)[-1].headers["X-Worker"]]
    before_kill = {a: states(poller, a) for a in addresses}
    poller.kill()
    killed_at = time.monotonic()
    for order in orders.values():
        move(exchange, order, "CANCELLED")  # a final state while the poller is dead
    await fleet.delivered({a: (o["transactionId"], "CANCELLED") for a, o in orders.items()})
    taken_over = [
        r for r in polls(server, first, killed_at) if r.headers["X-Worker"] != poller.worker
    ]
    assert taken_over[0].time - killed_at <= 2 * INTERVAL

    again = fleet.start(f"{poller.worker}-again", poller.worker)  # the same consumer
    await fleet.delivered({a: (o["transactionId"], "CANCELLED") for a, o in orders.items()})
    for address, order in orders.items():
        # it goes on after its last handled change: the one in hand at the kill at most
        # once more, then the closure it missed
        tx = order["transactionId"]
        assert states(again, address) in ([(tx, "CANCELLED")], [(tx, "OPEN"), (tx, "CANCELLED")])
        assert before_kill[address][-1] == (tx, "OPEN")
    later = {a: add_order(exchange, a, f"0xlater{i}") for i, a in enumerate(addresses)}
    await fleet.delivered({a: (o["transactionId"], "OPEN") for a, o in later.items()})
    for worker in fleet.live():
        for address in addresses:
            tx, new = orders[address]["transactionId"], later[address]["transactionId"]
            if worker is not again:
                assert states(worker, address) == [(tx, "OPEN"), (tx, "CANCELLED"), (new, "OPEN")]
    assert_all_expire(redis_url)


async def rejoined(fleet: Fleet, times: int) -> None:
    """Until every live worker has said, for every watch, it is back ``times`` times."""

    def back(events: list[dict[str, Any]]) -> bool:
        said = [e for e in events if e["event"] == "log" and "back with the fleet" in e["message"]]
        return len(said) >= times * len(fleet.addresses)

    await asyncio.gather(*(w.wait_for(back, "rejoin") for w in fleet.live()))


async def test_redis_frozen_then_killed_every_process_goes_on_alone_and_rejoins(
    server: FakeServer,
    exchange: FakeExchange,
    addresses: list[str],
    own_redis: RedisServer,
    fleet_of: Any,
) -> None:
    fleet: Fleet = fleet_of(own_redis.url)
    for n in range(WORKERS):
        fleet.start(f"w{n}", f"w{n}")
    await fleet.joined(WORKERS)
    expected: dict[str, list[tuple[str, str]]] = {a: [] for a in addresses}
    assert own_redis.process is not None
    pid = own_redis.process.pid

    async def step(orders: dict[str, dict[str, Any]], status: str) -> None:
        for address, order in orders.items():
            if status != "OPEN":
                move(exchange, order, status)
            expected[address].append((order["transactionId"], status))
        await fleet.delivered({a: expected[a][-1] for a in addresses})

    first = {a: add_order(exchange, a, f"0xfreeze{i}") for i, a in enumerate(addresses)}
    await step(first, "OPEN")
    os.kill(pid, signal.SIGSTOP)
    try:
        frozen_at = time.monotonic()
        await step(first, "PARTIALLY_FILLED")  # each process on its own
        alone = {r.headers["X-Worker"] for a in addresses for r in polls(server, a, frozen_at)}
        assert alone == set(fleet.workers)
    finally:
        os.kill(pid, signal.SIGCONT)
    await rejoined(fleet, 1)
    await step(first, "FILLED")

    own_redis.kill()
    second = {a: add_order(exchange, a, f"0xkilled{i}") for i, a in enumerate(addresses)}
    await step(second, "OPEN")
    own_redis.restart()  # empty, on the same port
    await rejoined(fleet, 2)
    back_at = time.monotonic()
    await step(second, "EXPIRED")
    third = {a: add_order(exchange, a, f"0xafter{i}") for i, a in enumerate(addresses)}
    await step(third, "OPEN")

    for worker in fleet.workers.values():
        warned = [m for m in worker.logs("WARNING") if "polling on its own" in m]
        assert len(warned) == 2 * len(addresses), warned  # once per watch and outage
        for address in addresses:
            assert in_order(states(worker, address), expected[address])
    for address in addresses:  # one poller again
        settled = polls(server, address, back_at + 2 * INTERVAL)
        assert len({r.headers["X-Worker"] for r in settled}) <= 1
    assert_all_expire(own_redis.url)
