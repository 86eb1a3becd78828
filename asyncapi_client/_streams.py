"""The cursor walk and the page walk, as async generators that clean up after themselves.

Both walks run their fetches ahead of the consumer in tasks they own. Whatever ends the
walk (the last page, ``break``, ``aclose()``, an exception in the consumer, cancellation
of the consuming task) cancels and awaits every fetch still in flight in a ``finally``,
so no task and no connection outlives the walk. A fetch ahead that failed raises at the
point where the consumer reaches its page, never earlier, never lost.
"""

from __future__ import annotations

import asyncio
import hashlib
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
    seen: set[bytes] = set()  # digests: memory per page, not per cursor byte
    ahead: asyncio.Task[OrdersPage] | None = None
    count = 0
    try:
        page = await fetch(None)
        while True:
            count += len(page.orders)
            cursor = page.cursor
            repeated = None
            if page.orders and cursor and (max_items is None or count < max_items):
                digest = _digest(cursor)
                if digest in seen:
                    repeated = PaginationError(
                        f"the server handed back cursor {_shorten(cursor)} a second time; "
                        "stopping instead of walking in a loop"
                    )
                else:
                    seen.add(digest)
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


def _digest(cursor: str) -> bytes:
    return hashlib.blake2b(cursor.encode("utf-8", "surrogatepass"), digest_size=16).digest()


def _shorten(text: str, keep: int = 80) -> str:
    """``text`` for a message: its repr, cut in the middle when long."""
    if len(text) <= keep:
        return repr(text)
    return f"{text[: keep // 2]!r}...{text[-keep // 2 :]!r} ({len(text):,} characters)"


async def walk_leaderboard_pages(
    fetch: Callable[[int], Awaitable[LeaderboardPage]],
    *,
    concurrency: int,
    max_items: int | None = None,
) -> AsyncGenerator[LeaderboardPage, None]:
    """Read page 1, learn ``totalPages``, fetch the rest concurrently, yield in page order.

    At most ``concurrency`` pages are in flight or held unread at any time, and with
    ``max_items`` no page is asked for that the entries still wanted do not need.

    An entry is its address: an address already yielded is not yielded again, so pages that
    overlap after a shift of a live board repeat nothing, while a tie split across two pages
    keeps both of its entries. The walk ends at the first empty page, and a page after the
    first that brings no address not already yielded raises :class:`PaginationError` (the
    server ignores the page parameter). Pages the board gains during the walk are followed.
    """
    first = await fetch(1)
    last = first.total_pages
    per_page = max(first.limit, len(first.leaderboard), 1)
    wanted = max_items  # entries the consumer may still take; None: all of them
    addresses: set[str] = set()
    queue: deque[asyncio.Task[LeaderboardPage]] = deque()
    numbers: deque[int] = deque()  # the page number each task in the queue asked for
    next_page = 2
    page, number = first, 1
    try:
        while True:
            fresh = _fresh_entries(page, addresses)
            if number > 1 and page.leaderboard and not fresh.leaderboard:
                raise PaginationError(
                    f"leaderboard page {number} brings no entry the walk has not already "
                    "yielded: the server seems to ignore the page parameter; stopping instead "
                    "of walking in a loop"
                )
            page = fresh
            if not page.leaderboard:
                yield page  # the first empty page ends the walk
                return
            if wanted is not None:
                wanted -= len(page.leaderboard)
                if wanted <= 0:
                    yield page
                    return
            while next_page <= last and len(queue) < concurrency:
                if wanted is not None and wanted <= len(queue) * per_page:
                    break  # the pages already on their way bring what is wanted
                queue.append(asyncio.ensure_future(fetch(next_page)))
                numbers.append(next_page)
                next_page += 1
            yield page
            if not queue:
                return
            page = await queue[0]
            queue.popleft()
            number = numbers.popleft()
            if page.total_pages > last:
                last = page.total_pages
    finally:
        await _cancel_all(queue)


def _fresh_entries(page: LeaderboardPage, addresses: set[str]) -> LeaderboardPage:
    """The page without entries whose address the walk already had (this page included)."""
    fresh = []
    for entry in page.leaderboard:
        if entry.address not in addresses:
            addresses.add(entry.address)
            fresh.append(entry)
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
