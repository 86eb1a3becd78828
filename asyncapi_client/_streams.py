"""The cursor walk and the page walk, as async generators that clean up after themselves.

Both walks run their fetches ahead of the consumer in tasks they own. Whatever ends the
walk (the last page, ``break``, ``aclose()``, an exception in the consumer, cancellation
of the consuming task) cancels and awaits every fetch still in flight in a ``finally``,
so no task and no connection outlives the walk. A fetch ahead that failed raises at the
point where the consumer reaches its page, never earlier, never lost.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import AsyncGenerator, Awaitable, Callable, Iterable, Sequence
from contextlib import aclosing
from typing import TypeVar

import attrs

from ._errors import PaginationError
from ._models import LeaderboardPage, OrdersPage

__all__ = ["items", "walk_leaderboard_pages", "walk_order_pages"]

T = TypeVar("T")
P = TypeVar("P")


async def _cancel_all(tasks: Iterable[asyncio.Task[T]]) -> None:
    """Cancel ``tasks`` and wait until each has really finished; retrieve every outcome.

    A cancellation of our own that arrives meanwhile is held until they have finished,
    then re-raised: nothing we started is left running behind us.
    """
    tasks = list(tasks)
    pending = [task for task in tasks if not task.done()]
    for task in pending:
        task.cancel()
    interrupted = False
    while pending:
        try:
            await asyncio.wait(pending)
        except asyncio.CancelledError:
            interrupted = True
        pending = [task for task in pending if not task.done()]
    for task in tasks:
        if not task.cancelled():
            task.exception()  # mark retrieved: the walk is over, nobody will read it
    if interrupted:
        raise asyncio.CancelledError


async def walk_order_pages(
    fetch: Callable[[str | None], Awaitable[OrdersPage]],
    *,
    max_items: int | None = None,
) -> AsyncGenerator[OrdersPage, None]:
    """Follow the cursor page after page, one page fetched ahead of the consumer.

    Ends on an empty, null or missing cursor, or an empty page; with ``max_items``, after
    the page that reaches it. A cursor the server handed back before raises
    :class:`PaginationError` once the page that carried it has been yielded.
    """
    seen: set[str] = set()
    ahead: asyncio.Task[OrdersPage] | None = None
    count = 0
    try:
        page = await fetch(None)
        while True:
            count += len(page.orders)
            cursor = page.cursor
            repeated = None
            if page.orders and cursor and (max_items is None or count < max_items):
                if cursor in seen:
                    repeated = PaginationError(
                        f"the server handed back cursor {cursor!r} a second time; "
                        "stopping instead of walking in a loop"
                    )
                else:
                    seen.add(cursor)
                    ahead = asyncio.ensure_future(fetch(cursor))
            yield page
            if repeated is not None:
                raise repeated
            if ahead is None:
                return
            page = await ahead
            ahead = None
    finally:
        if ahead is not None:
            await _cancel_all([ahead])


async def walk_leaderboard_pages(
    fetch: Callable[[int], Awaitable[LeaderboardPage]],
    *,
    concurrency: int,
    max_items: int | None = None,
) -> AsyncGenerator[LeaderboardPage, None]:
    """Read page 1, learn ``totalPages``, fetch the rest concurrently, yield in page order.

    At most ``concurrency`` pages are in flight or held unread at any time, and with
    ``max_items`` no page is asked for that the entries still wanted do not need.

    A live board shifts while it is walked, and a rank is the only identity an entry has
    here: a rank an earlier page had is not yielded again (its first occurrence is kept, so
    pages that overlap after a shift do not repeat ranks; ties within a page are kept, but a
    tie that straddles a page boundary looks like an overlap and keeps only its first), and
    pages the board gains during the walk are followed when a later page reports them. An
    account that moves between two reads may still show up under two ranks or under none.
    For an exact snapshot, walk a board that is not changing.
    """
    first = await fetch(1)
    last = first.total_pages
    per_page = max(first.limit, len(first.leaderboard), 1)
    wanted = max_items  # entries the consumer may still take; None: all of them
    ranks: set[int] = set()
    queue: deque[asyncio.Task[LeaderboardPage]] = deque()
    next_page = 2
    page = first
    try:
        while True:
            page = _first_of_each_rank(page, ranks)
            if wanted is not None:
                wanted -= len(page.leaderboard)
                if wanted <= 0:
                    yield page
                    return
            while next_page <= last and len(queue) < concurrency:
                if wanted is not None and wanted <= len(queue) * per_page:
                    break  # the pages already on their way bring what is wanted
                queue.append(asyncio.ensure_future(fetch(next_page)))
                next_page += 1
            yield page
            if not queue:
                return
            page = await queue[0]
            queue.popleft()
            if page.total_pages > last:
                last = page.total_pages
    finally:
        await _cancel_all(queue)


def _first_of_each_rank(page: LeaderboardPage, ranks: set[int]) -> LeaderboardPage:
    """The page without entries whose rank an earlier page already had.

    Overlapping pages repeat ranks from earlier pages; ties within one page (1, 2, 2, 4)
    are the server's data and are kept.
    """
    fresh = [entry for entry in page.leaderboard if entry.rank not in ranks]
    ranks.update(entry.rank for entry in fresh)
    if len(fresh) == len(page.leaderboard):
        return page
    return attrs.evolve(page, leaderboard=tuple(fresh))


async def items(
    pages: AsyncGenerator[P, None],
    of: Callable[[P], Sequence[T]],
    max_items: int | None,
) -> AsyncGenerator[T, None]:
    """Every item ``of`` every page, at most ``max_items``; closes the page walk when done."""
    remaining = max_items
    async with aclosing(pages):
        async for page in pages:
            for item in of(page):
                yield item
                if remaining is not None:
                    remaining -= 1
                    if remaining == 0:
                        return
