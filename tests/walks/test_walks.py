"""Walks against broken and hostile servers: they always end, lose nothing, and stay small.

Each server here is bounded (``budget``: past it every request gets 410), so a walk that
would run forever fails its test instead of hanging it; ``asyncio.timeout`` is only a
safety net.
"""

from __future__ import annotations

import asyncio
import gc
import tracemalloc
from collections.abc import AsyncIterator

import pytest

from asyncapi_client import Client, LeaderboardEntry, Order, PaginationError
from tests._checks import settled, stray_tasks
from tests._pages import (
    ADDRESS,
    PagesBoard,
    cursor_for,
    make_orders,
    page_of,
    serve_board,
    serve_orders,
    serving,
)

#: A total that claims a billion pages of 10.
HUGE = 10**9 * 10


@pytest.fixture(autouse=True)
async def _no_stray_tasks() -> AsyncIterator[None]:
    yield
    assert await settled(lambda: not stray_tasks()), stray_tasks()


def addr(name: str) -> str:
    return f"0x{name:0>40}"


def board(*pages: list[tuple[int, str]]) -> dict[int, list[tuple[int, str]]]:
    """Pages of (rank, short name) pairs, numbered from 1, with full addresses."""
    return {n: [(rank, addr(name)) for rank, name in rows] for n, rows in enumerate(pages, 1)}


def pairs(entries: list[LeaderboardEntry]) -> list[tuple[int, str]]:
    return [(e.rank, e.address) for e in entries]


async def walk_entries(client: Client, into: list[LeaderboardEntry], **kwargs: int | None) -> None:
    async with asyncio.timeout(20):
        async for entry in client.iter_leaderboard(**kwargs):  # type: ignore[arg-type]
            into.append(entry)


async def collect_orders(client: Client, into: list[Order], **kwargs: int | None) -> None:
    async with asyncio.timeout(20):
        async for order in client.iter_orders(ADDRESS, **kwargs):  # type: ignore[arg-type]
            into.append(order)


# --- leaderboard walks that always end ------------------------------------------------------------


@pytest.mark.parametrize("max_items", [5, None])
async def test_a_board_claiming_a_billion_pages_then_empty_ones_ends_at_the_first_empty(
    max_items: int | None,
) -> None:
    three = board([(1, "a"), (2, "b"), (3, "c")])
    async with (
        serving(leaderboard=serve_board(PagesBoard(three, total=HUGE), budget=50)) as server,
        Client(base_url=server.base_url) as client,
    ):
        got: list[LeaderboardEntry] = []
        await walk_entries(client, got, page_size=10, max_items=max_items, concurrency=4)
    assert pairs(got) == [(1, addr("a")), (2, addr("b")), (3, addr("c"))]
    # page 1, then at most `concurrency` pages ahead: the first empty page ends the walk
    assert 2 <= len(server.requests) <= 5
    assert all(request.status == 200 for request in server.requests)


async def test_the_page_walk_yields_the_first_empty_page_and_ends_there() -> None:
    three = board([(1, "a"), (2, "b"), (3, "c")])
    async with (
        serving(leaderboard=serve_board(PagesBoard(three, total=HUGE), budget=50)) as server,
        Client(base_url=server.base_url) as client,
    ):
        async with asyncio.timeout(20):
            pages = [p async for p in client.iter_leaderboard_pages(page_size=10, concurrency=2)]
    assert [(p.page, len(p.leaderboard)) for p in pages] == [(1, 3), (2, 0)]
    assert len(server.requests) <= 3


@pytest.mark.parametrize("max_items", [5, None])
async def test_a_server_ignoring_the_page_parameter_raises_pagination_error_naming_the_page(
    max_items: int | None,
) -> None:
    three = board([(1, "a"), (2, "b"), (3, "c")])
    async with (
        serving(
            leaderboard=serve_board(PagesBoard(three, total=HUGE, ignore_page=True), budget=50)
        ) as server,
        Client(base_url=server.base_url) as client,
    ):
        got: list[LeaderboardEntry] = []
        with pytest.raises(PaginationError, match=r"page 2\b.*ignor"):
            await walk_entries(client, got, page_size=10, max_items=max_items, concurrency=4)
    assert len(got) == 3  # page 1 was walked, the repeat was refused
    assert len(server.requests) <= 5
    assert all(request.status == 200 for request in server.requests)


async def test_max_items_reached_on_page_one_of_a_page_ignoring_server_ends_cleanly() -> None:
    ten = board([(r, f"e{r}") for r in range(1, 11)])
    async with (
        serving(
            leaderboard=serve_board(PagesBoard(ten, total=HUGE, ignore_page=True), budget=50)
        ) as server,
        Client(base_url=server.base_url) as client,
    ):
        got: list[LeaderboardEntry] = []
        await walk_entries(client, got, page_size=10, max_items=5, concurrency=4)
        exact: list[LeaderboardEntry] = []
        await walk_entries(client, exact, page_size=10, max_items=10, concurrency=4)
    assert [e.rank for e in got] == [1, 2, 3, 4, 5]
    assert [e.rank for e in exact] == list(range(1, 11))
    assert len(server.requests) == 2  # one page each: nothing asked for beyond max_items


async def test_a_page_that_brings_some_new_entries_is_not_an_error() -> None:
    pages = board(
        [(1, "a"), (2, "b"), (3, "c")],
        [(3, "c"), (4, "d"), (5, "e")],  # overlaps page 1 by one entry
        [(6, "f")],
    )
    async with (
        serving(leaderboard=serve_board(PagesBoard(pages, total=9), budget=50)) as server,
        Client(base_url=server.base_url) as client,
    ):
        got: list[LeaderboardEntry] = []
        await walk_entries(client, got, page_size=3)
    assert [e.rank for e in got] == [1, 2, 3, 4, 5, 6]


# --- an entry is its address ----------------------------------------------------------------------


async def test_a_tie_split_across_two_pages_keeps_both_entries() -> None:
    pages = board(
        [(1, "a"), (2, "b"), (3, "c"), (4, "d")],
        [(4, "e"), (6, "f"), (7, "g"), (7, "h")],  # rank 4 is shared by d and e
        [(9, "i")],
    )
    async with (
        serving(leaderboard=serve_board(PagesBoard(pages, total=9), budget=50)) as server,
        Client(base_url=server.base_url) as client,
    ):
        got: list[LeaderboardEntry] = []
        await walk_entries(client, got, page_size=4, concurrency=2)
        board_pages = [p async for p in client.iter_leaderboard_pages(page_size=4)]
    expected = [(r, a) for rows in pages.values() for r, a in rows]
    assert pairs(got) == expected
    assert [pair for p in board_pages for pair in pairs(list(p.leaderboard))] == expected


async def test_an_address_already_yielded_is_skipped_whatever_its_rank() -> None:
    pages = board(
        [(1, "a"), (2, "b"), (3, "c"), (3, "c")],  # c twice on one page
        [(2, "c"), (5, "d"), (6, "a"), (7, "e")],  # c moved up, a moved down: both seen
    )
    async with (
        serving(leaderboard=serve_board(PagesBoard(pages, total=8), budget=50)) as server,
        Client(base_url=server.base_url) as client,
    ):
        got: list[LeaderboardEntry] = []
        await walk_entries(client, got, page_size=4)
    assert pairs(got) == [
        (1, addr("a")),
        (2, addr("b")),
        (3, addr("c")),
        (5, addr("d")),
        (7, addr("e")),
    ]


# --- memory of a cursor walk ----------------------------------------------------------------------

#: A cursor of 8 KB: as long as a request line may be (8190 bytes), yet 60 of them are 480 KB.
CURSOR_PAD = 8000


async def test_a_new_8_kb_cursor_per_page_does_not_grow_the_walk() -> None:
    """Measured from page 140 to page 200: by then every bounded cache on the way (yarl keeps
    the last 128 URLs it parsed, on both sides of the loopback) is full, so what still grows
    is what the walk keeps: 60 cursors, 480 KB, if it kept them (the walk kept every cursor
    until it kept 16-byte digests)."""
    pages, start = 200, 140
    async with (
        serving(orders=serve_orders(make_orders(pages), pad=CURSOR_PAD)) as server,
        Client(base_url=server.base_url) as client,
    ):
        gc.collect()
        tracemalloc.start(1)
        try:
            count = at_start = at_end = 0
            async with asyncio.timeout(120):
                async for _order in client.iter_orders(ADDRESS, page_size=1):
                    count += 1
                    server.requests.clear()  # the fake's own record of the cursors
                    if count == start:
                        at_start = tracemalloc.get_traced_memory()[0]
                    if count == pages:  # still inside the walk: all it keeps is live
                        at_end = tracemalloc.get_traced_memory()[0]
        finally:
            tracemalloc.stop()
    assert count == pages
    growth = at_end - at_start
    assert growth < (pages - start) * CURSOR_PAD // 3, f"{growth / (pages - start):,.0f} B a page"


async def test_a_repeated_8_kb_cursor_is_still_detected() -> None:
    async with (
        serving(
            orders=serve_orders(make_orders(20), pad=CURSOR_PAD, repeat_cursor_on_page=4)
        ) as server,
        Client(base_url=server.base_url) as client,
    ):
        got: list[Order] = []
        with pytest.raises(PaginationError, match="a second time"):
            await collect_orders(client, got, page_size=2)
    assert len(got) == 8
    assert len(server.requests) == 4


async def test_a_server_ignoring_the_cursor_raises_pagination_error_naming_the_cursor() -> None:
    """Same orders each page, a fresh cursor each time: without the check, a walk forever."""
    async with (
        serving(orders=serve_orders(make_orders(1000), ignore_cursor=True, budget=20)) as server,
        Client(base_url=server.base_url) as client,
    ):
        got: list[Order] = []
        with pytest.raises(PaginationError, match="ignore the cursor") as caught:
            await collect_orders(client, got, page_size=3)
    assert repr(cursor_for(3)) in str(
        caught.value
    )  # the cursor of the page that brought nothing new
    assert [order.transaction_id for order in got] == ["tx00000", "tx00001", "tx00002"]
    assert len(server.requests) == 2


async def test_a_cursor_page_that_overlaps_the_one_before_but_brings_more_walks_on() -> None:
    async with (
        serving(orders=serve_orders(make_orders(9), overlap=2)) as server,
        Client(base_url=server.base_url) as client,
    ):
        got: list[Order] = []
        await collect_orders(client, got, page_size=3)
    ids = [order.transaction_id for order in got]
    assert ids[:6] == ["tx00000", "tx00001", "tx00002", "tx00001", "tx00002", "tx00003"]
    assert ids[-1] == "tx00008"


async def test_an_empty_cursor_page_still_simply_ends_the_walk() -> None:
    async with (
        serving(orders=serve_orders(make_orders(6), last_page="empty_page")) as server,
        Client(base_url=server.base_url) as client,
    ):
        got: list[Order] = []
        await collect_orders(client, got, page_size=3)
    assert len(got) == 6
    assert len(server.requests) == 3  # two full pages, then the empty one


# --- the Walk object ------------------------------------------------------------------------------


async def test_break_without_aclose_stops_the_fetch_ahead_at_once() -> None:
    """The walk is dropped at the ``break``: its fetch is cancelled before the next await."""
    async with (
        serving(orders=serve_orders(make_orders(50))) as server,
        Client(base_url=server.base_url) as client,
        server.gate("orders") as gate,
    ):
        gate.release(1)  # page 1; page 2 is held until the walk is gone
        async for _order in client.iter_orders(ADDRESS, page_size=10):
            await gate.arrived(2)  # page 2 is on its way
            break
        left = stray_tasks()  # no await since the break
        assert left
        assert all(task.cancelling() or task.done() for task in left), left
        assert await settled(lambda: not stray_tasks())


async def test_a_walk_still_held_after_break_keeps_its_fetch_until_aclose() -> None:
    async with (
        serving(orders=serve_orders(make_orders(50))) as server,
        Client(base_url=server.base_url) as client,
        server.gate("orders") as gate,
    ):
        gate.release(1)
        walk = client.iter_orders(ADDRESS, page_size=10)
        async for _order in walk:
            await gate.arrived(2)
            break
        assert [task for task in stray_tasks() if not task.cancelling()]  # documented
        await walk.aclose()
        assert not stray_tasks()
        await walk.aclose()  # twice is fine
        assert [o async for o in walk] == []  # a closed walk hands out nothing
        assert walk.checkpoint.consumed == 1


async def test_two_tasks_cannot_step_one_walk_at_once() -> None:
    async with (
        serving(orders=serve_orders(make_orders(30))) as server,
        Client(base_url=server.base_url) as client,
    ):
        walk = client.iter_orders(ADDRESS, page_size=10)
        async with server.gate("orders") as gate:
            first = asyncio.create_task(anext(walk))
            await gate.arrived(1)
            with pytest.raises(RuntimeError, match="already running"):
                await anext(walk)
            with pytest.raises(RuntimeError, match="another task"):
                await walk.aclose()
            gate.release()
            assert (await first).transaction_id == "tx00000"
        await walk.aclose()


async def test_max_items_reached_cancels_the_pages_still_in_flight_at_once() -> None:
    # Page 1 has 2 entries (the page size), so the walk asks for pages 2 and 3 to find 3 more;
    # page 2 brings 10: page 3 is not needed, and is cancelled as soon as page 2 is in.
    pages = board([(1, "a"), (2, "b")], [(r, f"e{r}") for r in range(3, 13)], [(13, "m")])

    def delay(page: int) -> float:
        return 30.0 if page == 3 else 0.0  # page 3 never answers: it must be cancelled

    async def answer_page_2_once_page_3_is_in() -> None:
        await gate.arrived(3)
        gate.release()

    async with (
        serving(
            leaderboard=serve_board(PagesBoard(pages, total=30), delay=delay, budget=10)
        ) as server,
        Client(base_url=server.base_url) as client,
        server.gate("leaderboard") as gate,
    ):
        gate.release(1)  # page 1
        releasing = asyncio.create_task(answer_page_2_once_page_3_is_in())
        walk = client.iter_leaderboard(page_size=2, max_items=5, concurrency=4)
        got = [await anext(walk) for _ in range(5)]
        await releasing
        assert [e.rank for e in got] == [1, 2, 3, 4, 5]
        # the fifth entry is out and the consumer has not asked for more: page 3 is stopping
        assert all(task.cancelling() or task.done() for task in stray_tasks())
        await server.wait_until(lambda: server.in_flight == 0)
        with pytest.raises(StopAsyncIteration):
            await anext(walk)
    assert {page_of(r): (r.status, r.cancelled) for r in server.requests} == {
        1: (200, False),
        2: (200, False),
        3: (None, True),
    }


async def test_resuming_on_a_page_with_repeats_keeps_the_positions_of_the_server_page() -> None:
    """Positions count the server's entries, repeats included. A resumed walk re-reads its
    checkpoint page: repeats of that page (e on page 2) and repeats at the start of a page,
    as a shifted board makes them (c on page 2, f on page 3), stay skipped."""
    pages = board(
        [(1, "a"), (2, "b"), (3, "c"), (4, "d")],
        [(3, "c"), (5, "e"), (6, "f"), (5, "e")],
        [(6, "f"), (7, "g"), (8, "h")],
    )
    async with (
        serving(leaderboard=serve_board(PagesBoard(pages, total=12), budget=200)) as server,
        Client(base_url=server.base_url) as client,
    ):
        every = [e async for e in client.iter_leaderboard(page_size=4)]
        assert [e.address for e in every] == [addr(n) for n in "abcdefgh"]
        for stop in range(len(every) + 1):
            walk = client.iter_leaderboard(page_size=4, max_items=stop) if stop else None
            head = [e async for e in walk] if walk else []
            point = walk.checkpoint.to_json() if walk else None
            rest = [e async for e in client.iter_leaderboard(page_size=4, resume=point)]
            assert head + rest == every, stop
        after_e = client.iter_leaderboard(page_size=4, max_items=5)
        _ = [e async for e in after_e]
        assert (after_e.checkpoint.page, after_e.checkpoint.consumed) == (2, 2)  # server positions
        resumed = client.iter_leaderboard_pages(page_size=4, resume=after_e.checkpoint)
        first = await anext(resumed)
        await resumed.aclose()
    assert [e.address for e in first.leaderboard] == [addr("f")]
