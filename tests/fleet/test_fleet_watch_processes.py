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
from collections import defaultdict
from collections.abc import AsyncIterator, Iterator
from typing import TYPE_CHECKING, Any

import pytest

from asyncapi_client.testing import Change, FakeExchange, FakeServer, RecordedRequest
from tests._watchfleet import WatchWorker, add_order, expiries, move, sync_profiles

pytestmark = pytest.mark.waits  # seconds of windows and processes: see tests/_schedule.py

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


#: The living fake's changes: this many steps of ``advance(CHANGES_A_STEP)``, a step every
#: STEP seconds (the pace of the market, not a synchronisation).
STEPS = 60
CHANGES_A_STEP = 3
STEP = 0.1
FINAL = frozenset({"FILLED", "CANCELLED", "EXPIRED"})
RANK = {"OPEN": 0, "PARTIALLY_FILLED": 1, "FILLED": 2, "CANCELLED": 2, "EXPIRED": 2}


def seen(worker: WatchWorker) -> set[tuple[str, str, str, str]]:
    """The states a worker received: (address, transaction id, status, filled size)."""
    return {(e["address"], e["tx"], e["status"], e["filled"]) for e in worker.changes()}


async def until_seen(
    worker: WatchWorker,
    wanted: set[tuple[str, str, str, str]],
    before: frozenset[tuple[str, str, str, str]] = frozenset(),
) -> None:
    """Until ``worker`` (with what its consumer got ``before`` a restart) got ``wanted``."""
    await worker.wait_for(lambda _: wanted <= before | seen(worker), "every change")


def keys_of(events: list[dict[str, Any]], address: str) -> list[str]:
    return [e["key"] for e in events if e["address"] == address]


def check_moves_forward(events: list[dict[str, Any]], journal: list[Change]) -> None:
    """Every state delivered is one the order had, and each order's states only move
    forward (a change delivered again is the same change)."""
    had: dict[str, set[tuple[str, str]]] = defaultdict(set)
    for change in journal:
        if change.before is not None:
            had[change.key].add((change.before["status"], change.before["filledSize"]))
        had[change.key].add((change.after["status"], change.after["filledSize"]))
    ranks: dict[str, list[int]] = defaultdict(list)
    for e in events:
        assert (e["status"], e["filled"]) in had[e["tx"]], e  # nothing made up
        assert (e["kind"] == "closed") == (e["status"] in FINAL), e
        ranks[e["tx"]].append(RANK[e["status"]])
    assert all(r == sorted(r) for r in ranks.values())


async def test_the_poller_killed_is_replaced_and_a_consumer_started_again_goes_on(
    server: FakeServer, exchange: FakeExchange, addresses: list[str], redis_url: str, fleet_of: Any
) -> None:
    """The living fake's own changes (``advance``), the poller of the first address killed
    with SIGKILL half way and its consumer started again later: every consumer gets every
    change, in the same order, and the one started again goes on where it was handled."""
    fleet: Fleet = fleet_of(redis_url)
    for n in range(WORKERS):
        fleet.start(f"w{n}", f"w{n}")
    await fleet.joined(WORKERS)
    first = addresses[0]
    start = len(exchange.journal)
    killed: WatchWorker | None = None
    killed_at = 0.0
    for step in range(STEPS):
        exchange.advance(CHANGES_A_STEP)
        await asyncio.sleep(STEP)  # the pace of the market, not a synchronisation
        if step == STEPS // 3:
            killed = fleet.workers[polls(server, first)[-1].headers["X-Worker"]]
            killed.kill()
            killed_at = time.monotonic()
    assert killed is not None
    again = fleet.start(f"{killed.worker}-again", killed.worker)  # the same consumer
    journal = [c for c in exchange.journal[start:] if c.kind.startswith("order.")]
    finals = {
        (str(c.address), c.key, c.after["status"], c.after["filledSize"])
        for c in journal
        if c.after["status"] in FINAL
    }
    # every order's state now: the last change of each, which every consumer gets in the end
    now = {o["transactionId"]: o for a in addresses for o in exchange.orders[a]}
    latest = {
        (str(c.address), c.key, now[c.key]["status"], now[c.key]["filledSize"]) for c in journal
    }
    before_kill = frozenset(seen(killed))
    await asyncio.gather(
        *(until_seen(w, latest) for w in fleet.live() if w is not again),
        until_seen(again, latest, before_kill),  # the rest, after its last handled change
    )

    taken_over = [
        r for r in polls(server, first, killed_at) if r.headers["X-Worker"] != killed.worker
    ]
    assert taken_over[0].time - killed_at <= 2 * INTERVAL
    survivors = [w for w in fleet.live() if w is not again]
    for address in addresses:
        stream = keys_of(survivors[0].changes(), address)
        for worker in survivors[1:]:
            assert keys_of(worker.changes(), address) == stream  # the same, in the same order
        before, after = keys_of(killed.changes(), address), keys_of(again.changes(), address)
        if before and after and after[0] == before[-1]:
            after = after[1:]  # the change in hand at the kill, once more
        assert before + after == stream  # it went on after its last handled change
    delivered = {
        (e["address"], e["tx"], e["status"], e["filled"])
        for e in survivors[0].changes()
        if e["kind"] == "closed"
    }
    assert finals <= delivered  # no final state missed
    for worker in fleet.workers.values():
        check_moves_forward(worker.changes(), journal)
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
