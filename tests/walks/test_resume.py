"""Resuming walks against the fake exchange: anywhere, in a fresh Client, and under faults.

The property: for random page sizes, filters, concurrency and stop points, a walk stopped
there and resumed from its checkpoint (through its JSON text, in a fresh Client) yields
exactly the rest of the uninterrupted walk; on the leaderboard, with ties placed on page
boundaries too. Then: walks that fail under malformed, truncated and 5xx answers, resumed
from their checkpoint after each failure until done, yield every item exactly once.
"""

from __future__ import annotations

import asyncio
import collections
from collections.abc import AsyncIterator
from typing import Any

import attrs
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from asyncapi_client import (
    Checkpoint,
    Client,
    DecodeError,
    LeaderboardEntry,
    Order,
    ServerError,
    TransportError,
    Walk,
)
from asyncapi_client.testing import FakeExchange, FakeServer, Fault, WireDict
from tests._checks import settled, stray_tasks

BASE = FakeExchange.generate(seed=5, users=2, orders_per_user=70, leaderboard_size=45)
PROPERTY = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def client_of(server: FakeServer, **kwargs: Any) -> Client:
    return Client(base_url=server.base_url, testnet_base_url=server.testnet_base_url, **kwargs)


async def head_of(walk: Walk[Any], count: int) -> list[Any]:
    """The first ``count`` things ``walk`` hands out, then ``break`` (no aclose)."""
    got: list[Any] = []
    if count:
        async for thing in walk:
            got.append(thing)
            if len(got) == count:
                break
    return got


def with_ties(board: list[WireDict], ties: set[int]) -> list[WireDict]:
    """The board with entry ``i`` sharing the rank of entry ``i - 1`` for each ``i`` in ties."""
    out: list[WireDict] = []
    for i, entry in enumerate(board):
        rank = out[-1]["rank"] if i in ties else i + 1
        out.append({**entry, "rank": rank})
    return out


async def no_task_left() -> None:
    assert await settled(lambda: not stray_tasks()), stray_tasks()


# --- the property -----------------------------------------------------------------------------


@PROPERTY
@given(data=st.data())
def test_an_order_walk_resumed_anywhere_in_a_fresh_client_yields_exactly_the_rest(
    data: st.DataObject,
) -> None:
    user = data.draw(st.sampled_from(sorted(BASE.orders)), "user")
    pools = sorted({o["poolId"] for o in BASE.orders[user]})
    kwargs: dict[str, Any] = {
        "page_size": data.draw(st.none() | st.integers(1, 25), "page_size"),
        "status": data.draw(st.none() | st.sampled_from(["FILLED", "open", "Cancelled"]), "status"),
        "side": data.draw(st.none() | st.sampled_from(["BUY", "sell"]), "side"),
        "market": data.draw(st.none() | st.sampled_from(pools), "market"),
    }
    first_by = data.draw(st.sampled_from(["items", "max_items", "pages"]), "first walk")
    then_by = data.draw(st.sampled_from(["items", "pages"]), "resumed walk")

    async def scenario() -> None:
        async with FakeServer(BASE) as server:
            async with client_of(server) as client:
                pages = [p async for p in client.iter_order_pages(user, **kwargs)]
                every = [o for p in pages for o in p.orders]
                walk: Walk[Any]
                if first_by == "pages":
                    stop = data.draw(st.integers(0, len(pages)), "stop after pages")
                    walk = client.iter_order_pages(user, **kwargs)
                    head = [o for p in await head_of(walk, stop) for o in p.orders]
                elif first_by == "max_items" and every:
                    stop = data.draw(st.integers(1, len(every)), "max_items")
                    walk = client.iter_orders(user, max_items=stop, **kwargs)
                    head = [o async for o in walk]
                else:
                    stop = data.draw(st.integers(0, len(every)), "stop after items")
                    walk = client.iter_orders(user, **kwargs)
                    head = await head_of(walk, stop)
                text = walk.checkpoint.to_json()
                del walk
            point = Checkpoint.from_json(text)
            async with client_of(server) as fresh:
                if then_by == "items":
                    rest = [o async for o in fresh.iter_orders(user, resume=text, **kwargs)]
                else:
                    resumed = fresh.iter_order_pages(user, resume=point, **kwargs)
                    rest = [o async for p in resumed for o in p.orders]
        assert [o.transaction_id for o in head + rest] == [o.transaction_id for o in every]
        assert head + rest == every
        await no_task_left()

    asyncio.run(scenario())


@PROPERTY
@given(data=st.data())
def test_a_leaderboard_walk_with_ties_resumed_anywhere_yields_exactly_the_rest(
    data: st.DataObject,
) -> None:
    size = len(BASE.leaderboard)
    page_size = data.draw(st.none() | st.integers(1, 12), "page_size")
    per_page = page_size or 50  # the fake's default
    ties = data.draw(st.sets(st.integers(1, size - 1), max_size=12), "ties")
    if data.draw(st.booleans(), "ties on every page boundary"):
        ties |= set(range(per_page, size, per_page))
    exchange = attrs.evolve(BASE, leaderboard=with_ties(BASE.leaderboard, ties))
    concurrency = data.draw(st.integers(1, 4), "concurrency")
    kwargs: dict[str, Any] = {"page_size": page_size, "concurrency": concurrency}
    first_by = data.draw(st.sampled_from(["items", "max_items", "pages"]), "first walk")
    then_by = data.draw(st.sampled_from(["items", "pages"]), "resumed walk")

    async def scenario() -> None:
        async with FakeServer(exchange) as server:
            async with client_of(server) as client:
                every = [e async for e in client.iter_leaderboard(**kwargs)]
                walk: Walk[Any]
                if first_by == "pages":
                    stop = data.draw(st.integers(0, -(-size // per_page)), "stop after pages")
                    walk = client.iter_leaderboard_pages(**kwargs)
                    head = [e for p in await head_of(walk, stop) for e in p.leaderboard]
                elif first_by == "max_items":
                    stop = data.draw(st.integers(1, size), "max_items")
                    walk = client.iter_leaderboard(max_items=stop, **kwargs)
                    head = [e async for e in walk]
                else:
                    stop = data.draw(st.integers(0, size), "stop after entries")
                    walk = client.iter_leaderboard(**kwargs)
                    head = await head_of(walk, stop)
                text = walk.checkpoint.to_json()
                del walk
            async with client_of(server) as fresh:
                rest: list[LeaderboardEntry]
                if then_by == "items":
                    rest = [e async for e in fresh.iter_leaderboard(resume=text, **kwargs)]
                else:
                    resumed = fresh.iter_leaderboard_pages(resume=text, **kwargs)
                    rest = [e async for p in resumed for e in p.leaderboard]
        wire = [(e["rank"], e["address"]) for e in exchange.leaderboard]
        assert [(e.rank, e.address) for e in every] == wire  # ties kept, split or not
        assert head + rest == every
        await no_task_left()

    asyncio.run(scenario())


# --- faults: resume after each failure until done ---------------------------------------------

FAULTS = Fault(malformed_rate=0.1, truncate_rate=0.08, error_rate=0.1, error_status=503)


@pytest.fixture
async def faulty() -> AsyncIterator[FakeServer]:
    exchange = FakeExchange.generate(seed=23, users=1, orders_per_user=400, leaderboard_size=300)
    async with FakeServer(exchange, seed=4) as server:
        server.set_fault("*", FAULTS)
        yield server


async def test_an_order_walk_under_faults_resumed_until_done_yields_every_order_once(
    faulty: FakeServer,
) -> None:
    user = next(iter(faulty.exchange.orders))
    got: list[Order] = []
    failures: collections.Counter[str] = collections.Counter()
    text: str | None = None
    for _ in range(300):
        async with client_of(faulty, max_retries=0) as client:  # a fresh process, as it were
            walk = client.iter_orders(user, page_size=9, resume=text)
            try:
                async for order in walk:
                    got.append(order)
            except (DecodeError, TransportError, ServerError) as exc:
                failures[type(exc).__name__] += 1
                text = walk.checkpoint.to_json()
                continue
        break
    else:  # pragma: no cover - the walk never finished
        pytest.fail(f"not done after 300 attempts: {failures}")
    assert [o.transaction_id for o in got] == [
        o["transactionId"] for o in faulty.exchange.orders[user]
    ]
    assert {"DecodeError", "TransportError", "ServerError"} <= set(failures), failures
    assert sum(failures.values()) >= 10
    await no_task_left()


async def test_a_leaderboard_walk_under_faults_resumed_until_done_yields_every_entry_once(
    faulty: FakeServer,
) -> None:
    got: list[LeaderboardEntry] = []
    failures: collections.Counter[str] = collections.Counter()
    point: Checkpoint | None = None
    for _ in range(300):
        async with client_of(faulty, max_retries=0) as client:
            walk = client.iter_leaderboard(page_size=7, concurrency=3, resume=point)
            try:
                async for entry in walk:
                    got.append(entry)
            except (DecodeError, TransportError, ServerError) as exc:
                failures[type(exc).__name__] += 1
                point = walk.checkpoint
                continue
        break
    else:  # pragma: no cover
        pytest.fail(f"not done after 300 attempts: {failures}")
    assert [e.address for e in got] == [e["address"] for e in faulty.exchange.leaderboard]
    assert {"DecodeError", "TransportError", "ServerError"} <= set(failures), failures
    await no_task_left()
