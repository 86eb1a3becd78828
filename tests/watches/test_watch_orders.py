"""watch_orders against the fake exchange edited by the test: each kind of change, orders
far back in the list, orders created and closed between two polls, and a state file that
carries a watch across a restart (the change in hand again, nothing handled again)."""

from __future__ import annotations

import asyncio
import copy
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from asyncapi_client import Client, FileWatchState, NotFoundError, OrderChange
from asyncapi_client.testing import FakeExchange, FakeServer

INTERVAL = 0.02
OPEN = ("OPEN", "PARTIALLY_FILLED")


@pytest.fixture
def exchange() -> FakeExchange:
    return FakeExchange.generate(seed=11, users=2, orders_per_user=120)


@pytest.fixture
async def server(exchange: FakeExchange) -> AsyncIterator[FakeServer]:
    sync_profiles(exchange)
    async with FakeServer(exchange) as started:
        yield started


def sync_profiles(exchange: FakeExchange) -> None:
    """Every profile lists exactly its user's open and partly filled orders, newest first."""
    for address, orders in exchange.orders.items():
        exchange.users[address]["orders"] = [o for o in orders if o["status"] in OPEN]


def user(exchange: FakeExchange) -> str:
    return next(iter(exchange.orders))


def add_order(
    exchange: FakeExchange, address: str, tx: str, status: str = "OPEN"
) -> dict[str, Any]:
    order = copy.deepcopy(exchange.orders[address][0])
    order.update(transactionId=tx, status=status, filledSize="0")
    if status == "FILLED":
        order["filledSize"] = order["size"]
    exchange.orders[address].insert(0, order)
    sync_profiles(exchange)
    return order


def find(exchange: FakeExchange, address: str, tx: str) -> dict[str, Any]:
    return next(o for o in exchange.orders[address] if o["transactionId"] == tx)


async def next_change(watch: Any) -> OrderChange:
    async with asyncio.timeout(10):
        change: OrderChange = await anext(watch)
    return change


async def test_new_updated_and_closed_in_order(server: FakeServer, exchange: FakeExchange) -> None:
    address = user(exchange)
    async with Client(base_url=server.base_url) as client:
        watch = client.watch_orders(address, interval=INTERVAL)
        async with watch:
            first = asyncio.ensure_future(next_change(watch))
            await server.wait_until(lambda: len(server.requests) >= 2)  # the baseline is taken
            order = add_order(exchange, address, "0xnew")
            new = await first
            order["status"], order["filledSize"] = "PARTIALLY_FILLED", "1"
            sync_profiles(exchange)
            updated = await next_change(watch)
            order["status"], order["filledSize"] = "FILLED", order["size"]
            sync_profiles(exchange)
            closed = await next_change(watch)
    assert (new.kind, new.previous) == ("new", None)
    assert (updated.kind, str(updated.order.filled_size)) == ("updated", "1")
    assert updated.previous is not None
    assert updated.previous.status.value == "OPEN"
    assert (closed.kind, closed.order.status.value) == ("closed", "FILLED")
    assert closed.previous == updated.order
    assert len({new.key, updated.key, closed.key}) == 3


async def test_a_baseline_order_far_back_that_closes_is_delivered_closed(
    server: FakeServer, exchange: FakeExchange
) -> None:
    address = user(exchange)
    oldest_open = [o for o in exchange.orders[address] if o["status"] == "OPEN"][-1]
    async with (
        Client(base_url=server.base_url) as client,
        client.watch_orders(address, interval=INTERVAL) as watch,
    ):
        change = asyncio.ensure_future(next_change(watch))
        await server.wait_until(lambda: len(server.requests) >= 2)
        oldest_open["status"] = "CANCELLED"
        sync_profiles(exchange)
        closed = await change
    assert closed.kind == "closed"
    assert closed.order.transaction_id == oldest_open["transactionId"]
    assert closed.order.status.value == "CANCELLED"
    assert closed.previous is not None
    assert closed.previous.status.value == "OPEN"


async def test_an_order_made_and_filled_between_two_polls_is_delivered_closed(
    server: FakeServer, exchange: FakeExchange
) -> None:
    address = user(exchange)
    async with (
        Client(base_url=server.base_url) as client,
        client.watch_orders(address, interval=INTERVAL) as watch,
    ):
        change = asyncio.ensure_future(next_change(watch))
        await server.wait_until(lambda: len(server.requests) >= 2)
        add_order(exchange, address, "0xquick", status="FILLED")
        closed = await change
    assert (closed.kind, closed.previous, closed.order.transaction_id) == (
        "closed",
        None,
        "0xquick",
    )


async def test_a_quiet_watch_asks_two_conditional_requests_an_interval(
    server: FakeServer, exchange: FakeExchange
) -> None:
    address = user(exchange)
    async with Client(base_url=server.base_url) as client:
        watch = client.watch_orders(address, interval=INTERVAL)
        waiting = asyncio.ensure_future(anext(watch))
        await server.wait_until(lambda: len(server.requests) >= 8)
        waiting.cancel()
        await asyncio.gather(waiting, return_exceptions=True)
        await watch.aclose()
    polls = server.requests[2:8]
    assert {r.operation for r in polls} == {"user", "orders"}


async def test_initial_delivers_the_open_baseline_orders_as_new(
    server: FakeServer, exchange: FakeExchange
) -> None:
    address = user(exchange)
    open_ids = {o["transactionId"] for o in exchange.orders[address] if o["status"] in OPEN}
    seen = set()
    async with (
        Client(base_url=server.base_url) as client,
        client.watch_orders(address, interval=INTERVAL, initial=True) as watch,
    ):
        for _ in open_ids:
            change = await next_change(watch)
            assert change.kind == "new"
            seen.add(change.order.transaction_id)
    assert seen == open_ids


async def test_a_state_file_carries_the_watch_across_a_restart(
    server: FakeServer, exchange: FakeExchange, tmp_path: Path
) -> None:
    address = user(exchange)
    state = FileWatchState(tmp_path / "orders.json")
    async with Client(base_url=server.base_url) as client:
        watch = client.watch_orders(address, interval=INTERVAL, state=state)
        first = asyncio.ensure_future(next_change(watch))
        await server.wait_until(lambda: len(server.requests) >= 2)
        add_order(exchange, address, "0xa")
        add_order(exchange, address, "0xb")
        a = await first
        b = await next_change(watch)  # a is handled now; b is in hand
        # the state as a process killed now leaves it (b in hand, not handled)
        crashed = tmp_path / "crashed.json"
        crashed.write_bytes(state.path.read_bytes())
        await watch.aclose()
        again = client.watch_orders(address, interval=INTERVAL, state=FileWatchState(crashed))
        b_again = await next_change(again)
        find(exchange, address, "0xa")["status"] = "CANCELLED"
        sync_profiles(exchange)
        closed = await next_change(again)
        await again.aclose()
    assert [a.order.transaction_id, b.order.transaction_id] == ["0xa", "0xb"]
    assert b_again.key == b.key  # the change in hand at the exit, once more
    assert (closed.kind, closed.order.transaction_id) == ("closed", "0xa")


async def test_another_watch_on_the_same_state_is_refused(
    server: FakeServer, exchange: FakeExchange, tmp_path: Path
) -> None:
    address = user(exchange)
    state = FileWatchState(tmp_path / "orders.json")
    async with Client(base_url=server.base_url) as client:
        watch = client.watch_orders(address, interval=INTERVAL, state=state)
        waiting = asyncio.ensure_future(anext(watch))
        await server.wait_until(lambda: (tmp_path / "orders.json").exists())
        waiting.cancel()
        await asyncio.gather(waiting, return_exceptions=True)
        other = client.watch_orders(address, side="BUY", interval=INTERVAL, state=state)
        with pytest.raises(ValueError, match="another watch"):
            await anext(other)


async def test_an_unknown_address_ends_the_watch_with_its_error(server: FakeServer) -> None:
    async with Client(base_url=server.base_url) as client:
        client.set_testing(True, max_retries=0)
        watch = client.watch_orders("0xnobody", interval=INTERVAL)
        with pytest.raises(NotFoundError):
            await anext(watch)


async def test_wait_for_order_returns_it_once_filled(
    server: FakeServer, exchange: FakeExchange
) -> None:
    address = user(exchange)
    order = add_order(exchange, address, "0xwait")
    async with Client(base_url=server.base_url) as client:
        waiting = asyncio.ensure_future(client.wait_for_order(address, "0xwait", interval=INTERVAL))
        await server.wait_until(lambda: len(server.requests) >= 2)
        order["status"], order["filledSize"] = "FILLED", order["size"]
        sync_profiles(exchange)
        filled = await asyncio.wait_for(waiting, 10)
        with pytest.raises(NotFoundError):
            await client.wait_for_order(address, "0xnone", interval=INTERVAL)
    assert filled.status.value == "FILLED"


async def test_an_order_made_between_a_polls_two_requests_and_closed_is_not_missed(
    server: FakeServer, exchange: FakeExchange
) -> None:
    """The profile is read, then the order is made (the page shows it open), then it closes:
    the profile is back as it was (same ETag, a 304) and must not hide the closure."""
    address = user(exchange)
    async with Client(base_url=server.base_url) as client:
        watch = client.watch_orders(address, interval=INTERVAL)
        first = asyncio.ensure_future(next_change(watch))
        await server.wait_until(lambda: len(server.requests) >= 2)  # the baseline
        with server.gate("orders") as gate:
            await gate.arrived(1)  # a poll read the profile and waits for its page
            order = add_order(exchange, address, "0xbetween")
            gate.release()
        new = await first
        order["status"], order["filledSize"] = "FILLED", order["size"]
        sync_profiles(exchange)
        closed = await next_change(watch)
        await watch.aclose()
    assert (new.kind, new.order.transaction_id) == ("new", "0xbetween")
    assert (closed.kind, closed.order.transaction_id) == ("closed", "0xbetween")
