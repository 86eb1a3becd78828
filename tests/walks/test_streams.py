"""The four streams against the fake exchange: exact walks, fetch-ahead, fan-out, clean endings."""

from __future__ import annotations

import asyncio
import contextlib
import math
import random
from collections.abc import AsyncIterator, Callable
from typing import Any, TypeVar

import aiohttp
import pytest

from asyncapi_client import (
    Client,
    LeaderboardEntry,
    LeaderboardPage,
    NotFoundError,
    Order,
    OrdersPage,
    OrderStatus,
    PaginationError,
    Walk,
)
from asyncapi_client.testing import FakeServer
from tests._checks import assert_clean, settled, stray_tasks
from tests._pages import (
    ADDRESS,
    PagesBoard,
    ShiftingBoard,
    StaticBoard,
    cursor_for,
    make_orders,
    page_of,
    serve_board,
    serve_orders,
    serving,
)

T = TypeVar("T")

LAST_PAGE_STYLES = ["null", "missing", "empty", "empty_page"]


@pytest.fixture(autouse=True)
async def _no_stray_tasks() -> AsyncIterator[None]:
    """Every test must leave no task of ours behind."""
    yield
    assert await settled(lambda: not stray_tasks()), stray_tasks()


def agen(stream: AsyncIterator[T]) -> Walk[T]:
    """The streams are walks (so ``aclose`` and ``aclosing`` work)."""
    assert isinstance(stream, Walk)
    return stream


async def collect(stream: AsyncIterator[T], into: list[T]) -> None:
    """Append everything ``stream`` yields to ``into`` (which keeps it when the walk fails)."""
    async for item in stream:
        into.append(item)


def expected_requests(items: int, page_size: int, style: str) -> int:
    pages = max(1, math.ceil(items / page_size))
    return pages + 1 if style == "empty_page" and items else pages


def ids(orders: list[Order]) -> list[str]:
    return [order.transaction_id for order in orders]


def answered(server: FakeServer) -> int:
    """How many requests the server has finished with."""
    return sum(request.answered_at is not None for request in server.requests)


# --- cursor walk: exactness ------------------------------------------------------------------


@pytest.mark.parametrize("style", LAST_PAGE_STYLES)
@pytest.mark.parametrize(("total", "page_size"), [(40, 10), (45, 10), (7, 3), (1, 5), (0, 5)])
async def test_cursor_walk_yields_every_order_once_in_order(
    style: Any, total: int, page_size: int
) -> None:
    orders = make_orders(total)
    async with (
        serving(orders=serve_orders(orders, last_page=style)) as server,
        Client(base_url=server.base_url) as client,
    ):
        got = [order async for order in client.iter_orders(ADDRESS, page_size=page_size)]
    assert ids(got) == [row["transactionId"] for row in orders]
    assert len(server.requests) == expected_requests(total, page_size, style)
    assert [request.query.get("cursor") for request in server.requests] == [None] + [
        cursor_for(page_size * n) for n in range(1, len(server.requests))
    ]


@pytest.mark.parametrize("style", LAST_PAGE_STYLES)
async def test_cursor_walk_carries_every_filter_on_every_request(style: Any) -> None:
    orders = make_orders(400)
    async with (
        serving(orders=serve_orders(orders, last_page=style)) as server,
        Client(base_url=server.base_url) as client,
    ):
        pages = [
            page
            async for page in client.iter_order_pages(
                ADDRESS, market="pool-1", status=OrderStatus.OPEN, side="buy", page_size=3
            )
        ]
    wanted = [
        row
        for row in orders
        if (row["poolId"], row["status"], row["side"]) == ("pool-1", "OPEN", "BUY")
    ]
    assert len(wanted) > 6  # several pages, the last one partial or full
    got = [order for page in pages for order in page.orders]
    assert ids(got) == [row["transactionId"] for row in wanted]
    assert all(len(page.orders) == 3 for page in pages[: len(wanted) // 3])
    assert len(server.requests) == expected_requests(len(wanted), 3, style)
    for request in server.requests:
        assert {k: request.query[k] for k in ("market", "status", "side", "limit")} == {
            "market": "pool-1",
            "status": "OPEN",
            "side": "BUY",
            "limit": "3",
        }


async def test_repeated_cursor_raises_after_the_page_that_carried_it() -> None:
    rows = make_orders(80)
    async with (
        serving(orders=serve_orders(rows, repeat_cursor_on_page=3)) as server,
        Client(base_url=server.base_url) as client,
    ):
        pages: list[OrdersPage] = []
        with pytest.raises(PaginationError, match="a second time"):
            await collect(client.iter_order_pages(ADDRESS, page_size=10), pages)
        orders: list[Order] = []
        with pytest.raises(PaginationError):
            await collect(client.iter_orders(ADDRESS, page_size=10), orders)
    assert len(pages) == 3  # page 3 (which repeats page 2's cursor) was yielded first
    assert pages[2].cursor == cursor_for(20)
    assert ids(orders) == [row["transactionId"] for row in rows[:30]]
    assert len(server.requests) == 6  # 3 pages per walk, not one more


@pytest.mark.parametrize(
    ("max_items", "items", "requests"),
    [(1, 1, 1), (10, 10, 1), (20, 20, 2), (25, 25, 3), (45, 45, 5), (1000, 45, 5)],
)
async def test_cursor_walk_max_items_asks_only_for_pages_it_needs(
    max_items: int, items: int, requests: int
) -> None:
    orders = make_orders(45)
    async with (
        serving(orders=serve_orders(orders)) as server,
        Client(base_url=server.base_url) as client,
    ):
        got = [o async for o in client.iter_orders(ADDRESS, page_size=10, max_items=max_items)]
    assert ids(got) == [row["transactionId"] for row in orders[:items]]
    assert len(server.requests) == requests


# --- cursor walk: fetch ahead ----------------------------------------------------------------


async def test_next_page_is_fetched_while_the_consumer_holds_a_page_and_no_further() -> None:
    async with (
        serving(orders=serve_orders(make_orders(50))) as server,
        Client(base_url=server.base_url) as client,
    ):
        pages = agen(client.iter_order_pages(ADDRESS, page_size=10))
        async with contextlib.aclosing(pages):
            first = await anext(pages)
            assert ids(list(first.orders)) == [f"tx{i:05d}" for i in range(10)]
            # The server sees page 2 asked for and answered while we sit on page 1 ...
            await server.wait_until(lambda: answered(server) == 2)
            # ... and never page 3: at most one page ahead.
            await settled(lambda: False, turns=50)
            assert len(server.requests) == 2
            rest = [page async for page in pages]
    assert len(rest) == 4
    assert server.max_in_flight == 1


async def test_fetch_ahead_overlaps_the_consumers_work_with_the_next_request() -> None:
    """While the consumer works on each page, the request for the next one reaches the
    server: the walk does not wait for the consumer to ask."""
    async with (
        serving(orders=serve_orders(make_orders(100))) as server,
        Client(base_url=server.base_url) as client,
        server.gate("orders") as gate,
    ):
        gate.release(1)  # page 1; every other page waits for the consumer's work to see it
        worked = 0
        async for page in client.iter_order_pages(ADDRESS, page_size=10):
            worked += 1  # the consumer's work on this page begins ...
            if page.cursor is not None:
                await gate.arrived(worked + 1)  # ... and the next page is asked for meanwhile
                gate.release(1)
    assert worked == 10
    assert len(server.requests) == 10
    assert server.max_in_flight == 1  # ahead, but never more than one page


# --- leaderboard walk ------------------------------------------------------------------------


async def test_leaderboard_ten_pages_at_concurrency_four_take_about_four_round_trips() -> None:
    """Page 1, then four pages at once, twice: 1 + ceil(9 / 4) = 4 round trips, not 10."""
    async with (
        serving(leaderboard=serve_board(StaticBoard(100))) as server,
        Client(base_url=server.base_url) as client,
        server.gate("leaderboard") as gate,
    ):
        entries: list[LeaderboardEntry] = []
        walking = asyncio.create_task(
            collect(client.iter_leaderboard(page_size=10, concurrency=4), entries)
        )
        for arrived, in_flight in ((1, 1), (5, 4), (9, 4), (10, 1)):
            await gate.arrived(arrived)  # a round trip: these are at the server together
            await server.wait_until(lambda: server.in_flight == in_flight)  # noqa: B023
            gate.release(in_flight)
        await walking
    assert [e.rank for e in entries] == list(range(1, 101))
    assert len(server.requests) == 10
    assert server.max_in_flight == 4


async def test_leaderboard_yields_in_page_order_when_the_server_answers_out_of_order() -> None:
    rng = random.Random(1234)
    delays = {page: rng.uniform(0.0, 0.08) for page in range(1, 11)}
    async with (
        serving(leaderboard=serve_board(StaticBoard(95), delay=delays.__getitem__)) as server,
        Client(base_url=server.base_url) as client,
    ):
        pages = [p async for p in client.iter_leaderboard_pages(page_size=10, concurrency=4)]
    assert [page.page for page in pages] == list(range(1, 11))
    assert [e.rank for page in pages for e in page.leaderboard] == list(range(1, 96))
    in_order = sorted(server.requests, key=lambda request: request.answered_at or 0.0)
    answered_pages = [page_of(request) for request in in_order]
    assert answered_pages != sorted(answered_pages)  # the server really did answer out of order
    assert server.max_in_flight <= 4


async def test_leaderboard_holds_at_most_concurrency_pages_unread() -> None:
    async with (
        serving(leaderboard=serve_board(StaticBoard(100))) as server,
        Client(base_url=server.base_url) as client,
    ):
        pages = agen(client.iter_leaderboard_pages(page_size=10, concurrency=3))
        async with contextlib.aclosing(pages):
            first = await anext(pages)
            assert first.page == 1
            await server.wait_until(lambda: answered(server) == 4)
            await settled(lambda: False, turns=50)
            assert len(server.requests) == 4  # page 1 and three ahead, however long we wait
            rest = [page.page async for page in pages]
    assert rest == list(range(2, 11))
    assert server.max_in_flight <= 3


async def test_leaderboard_keeps_concurrency_pages_coming_while_the_consumer_works() -> None:
    async with (
        serving(leaderboard=serve_board(StaticBoard(100))) as server,
        Client(base_url=server.base_url) as client,
    ):
        pages = agen(client.iter_leaderboard_pages(page_size=10, concurrency=4))
        async with contextlib.aclosing(pages):
            assert (await anext(pages)).page == 1
            assert (await anext(pages)).page == 2
            # While we work on page 2, pages 3-6 are on their way: four, not three.
            await server.wait_until(lambda: len(server.requests) == 6, timeout=2.0)
            await settled(lambda: False, turns=50)
            assert len(server.requests) == 6


async def test_leaderboard_max_items_fetches_more_when_overlapping_pages_bring_fewer() -> None:
    # After page 1 the pages start 5 ranks early: page 2 brings only 5 new ranks.
    board = ShiftingBoard(before=100, after=100, overlap=5)
    async with (
        serving(leaderboard=serve_board(board)) as server,
        Client(base_url=server.base_url) as client,
    ):
        ranks = [e.rank async for e in client.iter_leaderboard(page_size=10, max_items=30)]
    assert ranks == list(range(1, 31))
    assert len(server.requests) == 4


@pytest.mark.parametrize(("max_items", "requests"), [(5, 1), (10, 1), (15, 2), (25, 3)])
async def test_leaderboard_max_items_asks_only_for_pages_it_needs(
    max_items: int, requests: int
) -> None:
    async with (
        serving(leaderboard=serve_board(StaticBoard(100), delay=0.01)) as server,
        Client(base_url=server.base_url) as client,
    ):
        entries = [
            e
            async for e in client.iter_leaderboard(page_size=10, max_items=max_items, concurrency=4)
        ]
    assert [e.rank for e in entries] == list(range(1, max_items + 1))
    assert len(server.requests) == requests


async def test_leaderboard_stopped_early_cancels_the_pages_in_flight() -> None:
    session = aiohttp.ClientSession(connector=aiohttp.TCPConnector())
    async with (
        session,
        serving(leaderboard=serve_board(StaticBoard(100))) as server,
        server.gate("leaderboard") as gate,  # held until the server has seen them go
    ):
        gate.release(1)  # page 1; pages 2-5 are held
        async with Client(base_url=server.base_url, session=session) as client:
            walk = agen(client.iter_leaderboard(page_size=10, concurrency=4))
            async with contextlib.aclosing(walk) as entries:
                async for entry in entries:
                    if entry.rank == 3:  # pages 2-5 are on their way: stop now
                        await gate.arrived(5)
                        break
            await assert_clean(session.connector)
        await server.wait_until(lambda: server.in_flight == 0)
    assert sorted(page_of(request) for request in server.requests) == [1, 2, 3, 4, 5]
    assert {
        (request.status, request.cancelled) for request in server.requests if page_of(request) > 1
    } == {(None, True)}


async def test_leaderboard_that_shifts_during_the_walk_yields_each_rank_once() -> None:
    board = ShiftingBoard(before=45, after=58, overlap=3)
    async with (
        serving(leaderboard=serve_board(board)) as server,
        Client(base_url=server.base_url) as client,
    ):
        ranks = [e.rank async for e in client.iter_leaderboard(page_size=10, concurrency=2)]
    # Pages after the first overlap their predecessor by 3 ranks; the board grew to 6 pages.
    assert ranks == list(range(1, 58))
    assert sorted(page_of(request) for request in server.requests) == [1, 2, 3, 4, 5, 6]


async def test_leaderboard_that_shrinks_during_the_walk_ends_without_error() -> None:
    board = ShiftingBoard(before=50, after=22, overlap=0)
    async with (
        serving(leaderboard=serve_board(board)) as server,
        Client(base_url=server.base_url) as client,
    ):
        pages = [p async for p in client.iter_leaderboard_pages(page_size=10)]
    assert [e.rank for page in pages for e in page.leaderboard] == list(range(1, 23))
    assert [page.page for page in pages] == [1, 2, 3, 4]  # the first empty page ends it


# --- clean endings ---------------------------------------------------------------------------

Stream = Callable[[Client], AsyncIterator[Any]]
WALKS: dict[str, Stream] = {
    "orders": lambda client: client.iter_orders(ADDRESS, page_size=10),
    "order_pages": lambda client: client.iter_order_pages(ADDRESS, page_size=10),
    "leaderboard": lambda client: client.iter_leaderboard(page_size=10, concurrency=4),
    "leaderboard_pages": lambda client: client.iter_leaderboard_pages(page_size=10),
}


async def _end_by(ending: str, stream: AsyncIterator[Any]) -> None:
    if ending == "break":
        async for _ in stream:
            break
    elif ending == "aclose":
        await anext(stream)
        await agen(stream).aclose()
    elif ending == "aclosing":
        async with contextlib.aclosing(agen(stream)) as closing:
            async for _ in closing:
                break
    elif ending == "consumer_error":

        async def consume() -> None:
            async for _ in stream:
                raise RuntimeError("the consumer failed")

        with pytest.raises(RuntimeError, match="consumer"):
            await consume()
    elif ending == "cancel":
        reached = asyncio.Event()

        async def consume() -> None:
            async for _ in stream:
                reached.set()  # then ask for more: the next page is still on its way

        task = asyncio.create_task(consume())
        await asyncio.wait_for(reached.wait(), 5)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    else:  # pragma: no cover
        raise AssertionError(ending)


@pytest.mark.parametrize("ending", ["break", "aclose", "aclosing", "consumer_error", "cancel"])
@pytest.mark.parametrize("walk", list(WALKS))
async def test_ending_a_walk_early_leaves_no_task_and_no_connection(walk: str, ending: str) -> None:
    session = aiohttp.ClientSession(connector=aiohttp.TCPConnector())
    async with (
        session,
        serving(
            orders=serve_orders(make_orders(100)), leaderboard=serve_board(StaticBoard(100))
        ) as server,
        Client(base_url=server.base_url, session=session) as client,
        server.gate() as gate,
    ):
        gate.release(1)  # the first page; the walk ends while the next ones are held
        await _end_by(ending, WALKS[walk](client))
        await assert_clean(session.connector)
        assert gate.arrivals >= 1  # the walk had started: something was fetched or in flight


# --- errors surface where the consumer reaches them --------------------------------------------


async def test_cursor_walk_error_on_page_3_of_5_surfaces_after_pages_1_and_2() -> None:
    orders = make_orders(50)
    async with (
        serving(orders=serve_orders(orders, errors={3: 404})) as server,
        Client(base_url=server.base_url) as client,
    ):
        got: list[Order] = []
        with pytest.raises(NotFoundError) as caught:
            await collect(client.iter_orders(ADDRESS, page_size=10), got)
    assert ids(got) == [row["transactionId"] for row in orders[:20]]
    assert caught.value.status == 404
    assert len(server.requests) == 3


async def test_leaderboard_error_on_page_3_of_5_surfaces_after_pages_1_and_2() -> None:
    # Page 3 fails at once while page 2 is still slow: the error waits for its turn.
    def delay(page: int) -> float:
        return 0.15 if page == 2 else 0.0

    board = serve_board(StaticBoard(50), delay=delay, errors={3: 404})
    async with serving(leaderboard=board) as server, Client(base_url=server.base_url) as client:
        got: list[LeaderboardPage] = []
        with pytest.raises(NotFoundError):
            await collect(client.iter_leaderboard_pages(page_size=10, concurrency=4), got)
    assert [page.page for page in got] == [1, 2]
    page3 = next(request for request in server.requests if page_of(request) == 3)
    page2 = next(request for request in server.requests if page_of(request) == 2)
    assert page3.answered_at is not None
    assert page2.answered_at is not None
    assert page3.answered_at < page2.answered_at


# --- arguments ---------------------------------------------------------------------------------

BAD_STREAMS: dict[str, Stream] = {
    "empty address": lambda c: c.iter_orders(""),
    "empty address (pages)": lambda c: c.iter_order_pages(""),
    "unknown status": lambda c: c.iter_orders(ADDRESS, status="LOST"),  # type: ignore[arg-type]
    "unknown side": lambda c: c.iter_order_pages(ADDRESS, side="long"),  # type: ignore[arg-type]
    "zero page_size": lambda c: c.iter_orders(ADDRESS, page_size=0),
    "negative page_size": lambda c: c.iter_order_pages(ADDRESS, page_size=-1),
    "bool page_size": lambda c: c.iter_orders(ADDRESS, page_size=True),
    "zero max_items": lambda c: c.iter_orders(ADDRESS, max_items=0),
    "zero leaderboard page_size": lambda c: c.iter_leaderboard(page_size=0),
    "negative leaderboard max_items": lambda c: c.iter_leaderboard(max_items=-5),
    "zero concurrency": lambda c: c.iter_leaderboard(concurrency=0),
    "zero concurrency (pages)": lambda c: c.iter_leaderboard_pages(concurrency=0),
    "float concurrency": lambda c: c.iter_leaderboard_pages(concurrency=2.5),  # type: ignore[arg-type]
}


@pytest.mark.parametrize("bad", list(BAD_STREAMS))
async def test_stream_arguments_are_checked_before_any_request(bad: str) -> None:
    async with (
        serving(
            orders=serve_orders(make_orders(10)), leaderboard=serve_board(StaticBoard(10))
        ) as server,
        Client(base_url=server.base_url) as client,
    ):
        with pytest.raises(ValueError):
            BAD_STREAMS[bad](client)  # raised by the call itself, before any iteration
    assert server.requests == []


async def test_entries_and_orders_are_models() -> None:
    async with (
        serving(
            orders=serve_orders(make_orders(3)), leaderboard=serve_board(StaticBoard(3))
        ) as server,
        Client(base_url=server.base_url) as client,
    ):
        order = await anext(agen(client.iter_orders(ADDRESS)))
        entry = await anext(agen(client.iter_leaderboard()))
        await assert_clean()
    assert isinstance(order, Order)
    assert isinstance(entry, LeaderboardEntry)
    assert entry.rank == 1


async def test_ties_within_a_page_are_kept_and_addresses_from_earlier_pages_dropped() -> None:
    """A board with a tie (2, 2) on page 1, and page 2 overlapping page 1 by one entry."""
    pages = {
        1: [(1, "a"), (2, "b"), (2, "c"), (4, "d")],
        2: [(4, "d"), (5, "e"), (6, "f"), (6, "g")],
    }
    async with (
        serving(leaderboard=serve_board(PagesBoard(pages, total=8))) as server,
        Client(base_url=server.base_url) as client,
    ):
        walk = client.iter_leaderboard_pages(page_size=4, concurrency=2)
        seen = [(e.rank, e.address) async for page in walk for e in page.leaderboard]
    assert seen == [(1, "a"), (2, "b"), (2, "c"), (4, "d"), (5, "e"), (6, "f"), (6, "g")]
