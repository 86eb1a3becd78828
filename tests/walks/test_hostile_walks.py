"""Walks against servers that repeat themselves: any cursor or any page seen before in the
walk ends it with PaginationError before anything is yielded twice, and what the walk
keeps for that is 16 bytes a page.

Every server here is bounded (past ``BUDGET`` requests it answers 410), so a walk that would
loop fails its test instead of hanging it.
"""

from __future__ import annotations

import asyncio
import gc
import tracemalloc
from collections.abc import AsyncIterator, Callable, Sequence
from decimal import Decimal
from typing import Any

import pytest

from asyncapi_client import Client, Order, OrdersPage, OrderStatus, PaginationError, Side
from asyncapi_client import _walks as walks_module
from asyncapi_client._checkpoint import Checkpoint
from asyncapi_client._network import Network
from asyncapi_client._walks import CursorPager, _Digests, item_walk
from asyncapi_client.testing import RecordedRequest, Reply, Responder
from tests._checks import settled, stray_tasks
from tests._pages import ADDRESS, PagesBoard, make_orders, serve_board, serving

BUDGET = 40


@pytest.fixture(autouse=True)
async def _no_stray_tasks() -> AsyncIterator[None]:
    yield
    assert await settled(lambda: not stray_tasks()), stray_tasks()


def repeating(pages: Sequence[Sequence[dict[str, Any]]], cursor: Callable[[int], str]) -> Responder:
    """Serves ``pages`` in turn for ever (A, B, A, B, ...), the n-th answer (from 0) with the
    cursor ``cursor(n)``; past BUDGET requests, 410."""
    served = 0

    def respond(request: RecordedRequest) -> Reply:
        nonlocal served
        n, served = served, served + 1
        if n >= BUDGET:
            return Reply(410, json={"error": "request budget exhausted"})
        return Reply(json={"orders": list(pages[n % len(pages)]), "cursor": cursor(n)})

    return respond


async def walk_ids(client: Client, into: list[str], **kwargs: Any) -> None:
    async with asyncio.timeout(20):
        async for order in client.iter_orders(ADDRESS, **kwargs):
            into.append(order.transaction_id)


ORDERS = make_orders(6)
A, B, C = ORDERS[0:2], ORDERS[2:4], ORDERS[4:6]


@pytest.mark.parametrize(
    ("pages", "reordered"),
    [([A, B], False), ([A, B, C], False), ([A, B], True)],
    ids=["A,B,A,B", "A,B,C,A", "A,B,A-reordered"],
)
async def test_pages_repeated_under_fresh_cursors_end_the_walk_before_a_repeat(
    pages: list[list[dict[str, Any]]], reordered: bool
) -> None:
    """The server hands a fresh cursor every time but serves the same pages over again:
    the walk stops with PaginationError when a page it yielded comes back (not only the
    page just before), before yielding any order twice."""
    served = [*pages, list(reversed(pages[0])) if reordered else pages[0]]
    async with (
        serving(orders=repeating(served, lambda n: f"fresh-{n}")) as server,
        Client(base_url=server.base_url) as client,
    ):
        got: list[str] = []
        with pytest.raises(PaginationError, match="exactly the orders of a page") as caught:
            await walk_ids(client, got, page_size=2)
    assert got == [order["transactionId"] for page in pages for order in page]
    assert len(got) == len(set(got))
    assert len(server.requests) == len(pages) + 1  # the repeat was fetched, never yielded
    assert repr(f"fresh-{len(pages) - 1}") in str(caught.value)  # the cursor that brought it


async def test_a_page_walk_stops_before_the_repeated_page_too() -> None:
    async with (
        serving(orders=repeating([A, B], lambda n: f"fresh-{n}")) as server,
        Client(base_url=server.base_url) as client,
    ):
        pages: list[OrdersPage] = []

        async def walk() -> None:
            async with asyncio.timeout(20):
                async for page in client.iter_order_pages(ADDRESS, page_size=2):
                    pages.append(page)

        with pytest.raises(PaginationError, match="exactly the orders"):
            await walk()
    assert [[o.transaction_id for o in p.orders] for p in pages] == [
        [o["transactionId"] for o in A],
        [o["transactionId"] for o in B],
    ]


async def test_any_cursor_handed_before_ends_the_walk_not_only_the_last() -> None:
    """Cursors c0, c1, c2, then c0 again (with new orders each time): the walk stops
    without asking for c0 a second time."""
    cursors = ["c0", "c1", "c2", "c0"]
    async with (
        serving(orders=repeating([A, B, C, make_orders(8)[6:]], cursors.__getitem__)) as server,
        Client(base_url=server.base_url) as client,
    ):
        got: list[str] = []
        with pytest.raises(PaginationError, match="'c0' a second time"):
            await walk_ids(client, got, page_size=2)
    assert len(got) == 8
    assert [request.query.get("cursor") for request in server.requests] == [None, *cursors[:3]]


async def test_a_board_repeating_its_pages_ends_before_a_repeat() -> None:
    """The leaderboard's analogue: pages 1 and 2 served again as pages 3 and 4."""
    one, two = [(1, "0xa"), (2, "0xb")], [(3, "0xc"), (4, "0xd")]
    pages = PagesBoard({1: one, 2: two, 3: one, 4: two}, total=8)
    async with (
        serving(leaderboard=serve_board(pages, budget=BUDGET)) as server,
        Client(base_url=server.base_url) as client,
    ):
        got: list[str] = []

        async def walk() -> None:
            async with asyncio.timeout(20):
                async for item in client.iter_leaderboard(page_size=2, concurrency=1):
                    got.append(item.address)

        with pytest.raises(PaginationError, match="page 3 brings no entry"):
            await walk()
    assert got == ["0xa", "0xb", "0xc", "0xd"]


# --- memory: 16 bytes a page ------------------------------------------------------------------


def _orders_page(n: int) -> OrdersPage:
    order = Order(
        transaction_id=f"tx{n}",
        pool_id="pool",
        user=ADDRESS,
        side=Side.BUY,
        price=Decimal(1),
        size=Decimal(1),
        filled_size=Decimal(0),
        status=OrderStatus.OPEN,
        timestamp=n,
    )
    return OrdersPage(orders=(order,), cursor=f"cursor-{n + 1:08d}")


def held_by_walks() -> int:
    """Bytes traced now that were allocated by the code of asyncapi_client/_walks.py."""
    snapshot = tracemalloc.take_snapshot().filter_traces(
        [tracemalloc.Filter(True, walks_module.__file__)]
    )
    return sum(stat.size for stat in snapshot.statistics("filename"))


async def test_what_a_cursor_walk_keeps_against_loops_is_16_bytes_a_page() -> None:
    """A walk of 5,120 one-order pages, each with a fresh cursor, measured from page 1,024
    to page 5,120 (both multiples of 128: the small set of the latest digests is empty
    there, and the arrays hold 2,048 digests, then 8,192 + 2,048): the walk keeps 16 bytes a
    page, a digest of 8 of each cursor and each page (the
    16-byte digests in a set it kept before took 169). Counted: what the walks' module
    holds (allocated from its code), not what a tracer or a cache elsewhere in the process
    adds meanwhile."""

    async def fetch(cursor: str | None) -> OrdersPage:
        return _orders_page(0 if cursor is None else int(cursor.removeprefix("cursor-")))

    start = Checkpoint(operation="orders", network=Network.MAINNET, page_size=1, address=ADDRESS)
    walk = item_walk(CursorPager(fetch, start, None), start, None)
    first, last = 1024, 5120
    gc.collect()
    tracemalloc.start(1)
    try:
        count = at_first = at_last = 0
        async for _order in walk:
            count += 1
            if count in (first, last):
                gc.collect()
                if count == first:
                    at_first = held_by_walks()
                else:
                    at_last = held_by_walks()
                    break
    finally:
        tracemalloc.stop()
        await walk.aclose()
    per_page = (at_last - at_first) / (last - first)
    assert per_page <= 16.1, f"{per_page:.2f} bytes a page"


def test_the_digest_set_finds_everything_it_was_given_and_nothing_else() -> None:
    digests = _Digests()
    given = [(n * 0x9E3779B97F4A7C15) % 2**64 for n in range(3000)]
    for n, digest in enumerate(given):
        assert digest not in digests
        digests.add(digest)
        assert digest in digests
        if n % 500 == 0:
            assert all(earlier in digests for earlier in given[: n + 1])
    assert len(digests) == 3000
    assert all(digest in digests for digest in given)
    others = {digest + 1 for digest in given} - set(given)
    assert not any(other in digests for other in others)
