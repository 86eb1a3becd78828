"""The walks: a user's orders by cursor and the leaderboard by page, with a checkpoint.

A :class:`Walk` hands out items (or pages) one at a time and knows the position just after
the last one it handed out (:attr:`Walk.checkpoint`). Under it, a pager fetches pages ahead
of the consumer in tasks it owns: the cursor pager one page ahead, the leaderboard pager up
to ``concurrency`` pages, handed out in page order.

Whatever ends a walk (its last page, ``max_items``, ``aclose()``, an error, cancellation of
the consuming task) cancels and awaits every fetch still in flight before the end is
reported, so no task and no connection outlives the walk. A walk dropped without
``aclose()`` (a ``break`` out of ``async for``) cancels its fetches when it is collected:
in CPython at once, when its last reference goes; they finish unwinding over the next few
turns of the event loop. A fetch ahead that failed raises where the consumer reaches its
page, never earlier, never lost; the checkpoint then still names the last item handed out.
"""

from __future__ import annotations

import asyncio
import bisect
import contextlib
import hashlib
import itertools
import os
from array import array
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any, ClassVar, Generic, Self, TypeVar

import attrs

from ._checkpoint import Checkpoint
from ._errors import PaginationError
from ._models import LeaderboardEntry, LeaderboardPage, Order, OrdersPage

if TYPE_CHECKING:
    import pyarrow

__all__ = ["BoardPager", "CursorPager", "Walk", "item_walk", "page_walk"]

T = TypeVar("T")
R = TypeVar("R")


# --- tasks ------------------------------------------------------------------------------------


def _retrieve(task: asyncio.Task[Any]) -> None:
    """Mark a fetch's outcome as seen: a walk dropped early must not log it as lost."""
    if not task.cancelled():
        task.exception()


def _start(fetch: Awaitable[R]) -> asyncio.Task[R]:
    task: asyncio.Task[R] = asyncio.ensure_future(fetch)
    task.add_done_callback(_retrieve)
    return task


def _cancel_soon(tasks: Iterable[asyncio.Task[Any]]) -> None:
    """Ask ``tasks`` to stop, from any thread and without awaiting (``__del__`` calls this)."""
    try:
        running: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
    except RuntimeError:
        running = None
    for task in tasks:
        if task.done():
            continue
        loop = task.get_loop()
        if loop is running:
            task.cancel()
        elif not loop.is_closed():
            loop.call_soon_threadsafe(task.cancel)


async def _cancel_all(tasks: Iterable[asyncio.Task[Any]]) -> None:
    """Cancel ``tasks`` and wait until each has really finished.

    A cancellation of our own that arrives meanwhile is held until they have finished,
    then re-raised: nothing we started is left running behind us.
    """
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
    if interrupted:
        raise asyncio.CancelledError


# --- pagers: pages ahead of the consumer ------------------------------------------------------


class _Chunk:
    """One page as a pager hands it to a walk: what to hand out of it, and where it sits."""

    __slots__ = ("fresh", "items", "key", "page", "start")

    def __init__(
        self,
        page: Any,
        items: Sequence[Any],
        start: int,
        fresh: list[int] | None,
        key: str | int | None,
    ) -> None:
        self.page = page
        #: every item of the page, as the server sent it
        self.items = items
        #: the first index to hand out (past what a resumed walk had already consumed)
        self.start = start
        #: the indexes to hand out when some were handed out before; None: all from start
        self.fresh = fresh
        #: what fetched the page: its cursor (orders) or its number (leaderboard)
        self.key = key

    def to_hand_out(self) -> int:
        return len(self.items) - self.start if self.fresh is None else len(self.fresh)


class _Pager:
    """Fetches the pages of one walk, ahead of the consumer, in tasks it owns."""

    __slots__ = ()

    async def next(self) -> _Chunk | None:
        """The next page, or None after the last one."""
        raise NotImplementedError

    def identity(self, item: Any) -> str:
        """What a checkpoint records of the last item consumed."""
        raise NotImplementedError

    def position(self, start: Checkpoint, chunk: _Chunk, consumed: int) -> Checkpoint:
        """``start`` moved to just after item ``consumed`` of ``chunk`` (as the server sent it)."""
        raise NotImplementedError

    def view(self, chunk: _Chunk) -> Any:
        """The page as a page walk hands it out: only the items not handed out before."""
        raise NotImplementedError

    def pending(self) -> Iterable[asyncio.Task[Any]]:
        raise NotImplementedError

    def cancel_soon(self) -> None:
        _cancel_soon(self.pending())

    async def close(self) -> None:
        await _cancel_all(list(self.pending()))


def _digest(cursor: str) -> int:
    """A cursor's 64-bit stand-in: the repeat check's memory does not grow with the cursor."""
    data = cursor.encode("utf-8", "surrogatepass")
    return int.from_bytes(hashlib.blake2b(data, digest_size=8, person=b"cursor").digest())


def _page_digest(ids: Iterable[str]) -> int:
    """The 64-bit stand-in of a page's orders: the same for the same transaction ids in
    any order, different (but for a 2**-64 chance) for any other ids."""
    hashed = hashlib.blake2b(digest_size=8, person=b"orders")
    for identity in sorted(ids):
        data = identity.encode("utf-8", "surrogatepass")
        hashed.update(len(data).to_bytes(8, "little"))
        hashed.update(data)
    return int.from_bytes(hashed.digest())


class _Digests:
    """A set of 64-bit digests that keeps 8 bytes for each, however many it holds.

    A ``set`` of ints takes about 60 bytes an entry; here the latest few sit in a small set,
    and the rest in sorted arrays whose lengths double, merged like the carries of a binary
    counter: adding costs O(log n) amortised, a lookup a binary search in each of the
    O(log n) arrays.
    """

    __slots__ = ("_levels", "_recent")

    #: Digests kept in the small set before they are sorted into the arrays.
    RECENT: ClassVar[int] = 256

    def __init__(self) -> None:
        self._recent: set[int] = set()
        self._levels: list[array[int]] = []  # longest first, each sorted

    def __len__(self) -> int:
        return len(self._recent) + sum(len(level) for level in self._levels)

    def __contains__(self, digest: int) -> bool:
        if digest in self._recent:
            return True
        for level in self._levels:
            at = bisect.bisect_left(level, digest)
            if at < len(level) and level[at] == digest:
                return True
        return False

    def add(self, digest: int) -> None:
        recent = self._recent
        recent.add(digest)
        if len(recent) < self.RECENT:
            return
        run = sorted(recent)
        recent.clear()
        levels = self._levels
        while levels and len(levels[-1]) <= len(run):
            run = sorted(itertools.chain(levels.pop(), run))  # two sorted runs: linear
        levels.append(array("Q", run))  # from a list: allocated to its exact length


def _shorten(text: str, keep: int = 80) -> str:
    """``text`` for a message: its repr, cut in the middle when long."""
    if len(text) <= keep:
        return repr(text)
    return f"{text[: keep // 2]!r}...{text[-keep // 2 :]!r} ({len(text):,} characters)"


def _check_position(
    items: Sequence[Any],
    consumed: int,
    last: str | None,
    identity: Callable[[Any], str],
    where: str,
) -> None:
    """A resumed walk's first page must still have the recorded item where it was."""
    found = identity(items[consumed - 1]) if len(items) >= consumed else None
    if found != last:
        now = (
            f"it has {_shorten(found)} there"
            if found is not None
            else f"it has only {len(items)} item(s) now"
        )
        raise PaginationError(
            f"cannot resume: {where} had {_shorten(last or '')} as item {consumed} when the "
            f"checkpoint was taken, {now}: the data changed since; start the walk again"
        )


class CursorPager(_Pager):
    """A user's orders, following the cursor, one page fetched ahead of the consumer.

    Ends on an empty, null or missing cursor, or an empty page; with ``max_items``, after
    the page that reaches it. A cursor the server handed back at any point of the walk
    raises :class:`PaginationError` once the page that carried it has been handed out; a
    page whose orders are exactly those of a page already handed out (a server repeating
    its pages under fresh cursors: A, B, A, B) raises before it is handed out again, and so
    does a page after the first that brings no order not on the page before it. What the
    walk keeps for this is 16 bytes a page (a 64-bit digest of each cursor and of each
    page's transaction ids) and the previous page's transaction ids.
    """

    __slots__ = (
        "_ahead",
        "_ahead_cursor",
        "_error",
        "_fetch",
        "_first",
        "_previous",
        "_seen",
        "_wanted",
    )

    def __init__(
        self,
        fetch: Callable[[str | None], Awaitable[OrdersPage]],
        start: Checkpoint,
        max_items: int | None,
    ) -> None:
        self._fetch = fetch
        self._first: Checkpoint | None = start
        #: digests of every cursor handed out and of every page's transaction ids
        self._seen = _Digests()
        self._ahead: asyncio.Task[OrdersPage] | None = None
        self._ahead_cursor: str | None = None
        self._wanted = max_items
        self._error: PaginationError | None = None
        self._previous: frozenset[str] = frozenset()  # the transaction ids of the last page

    async def next(self) -> _Chunk | None:
        first = self._first
        if first is not None:
            self._first = None
            cursor, start = first.cursor, first.consumed
            page = await self._fetch(cursor)
            if start:
                where = (
                    "the first page" if cursor is None else "the page at the checkpoint's cursor"
                )
                _check_position(page.orders, start, first.last, self.identity, where)
            if cursor is not None:
                self._seen.add(_digest(cursor))
        else:
            if self._error is not None:
                raise self._error
            ahead = self._ahead
            if ahead is None:
                return None
            page = await ahead
            self._ahead = None
            cursor, start = self._ahead_cursor, 0
            if page.orders and all(o.transaction_id in self._previous for o in page.orders):
                raise PaginationError(
                    f"the page at cursor {_shorten(cursor or '')} brings no order not on the "
                    "page before it: the server seems to ignore the cursor; stopping instead "
                    "of walking in a loop"
                )
        orders = page.orders
        if orders:
            digest = _page_digest(order.transaction_id for order in orders)
            if digest in self._seen:
                raise PaginationError(
                    f"the page at cursor {_shorten(cursor or '')} has exactly the orders of a "
                    "page the walk already yielded: the server repeats its pages under fresh "
                    "cursors; stopping instead of walking in a loop"
                )
            self._seen.add(digest)
        self._previous = frozenset(order.transaction_id for order in orders)
        following = page.cursor
        wanted = self._wanted
        if wanted is not None:
            wanted = self._wanted = wanted - (len(orders) - start)
        if orders and following and (wanted is None or wanted > 0):
            digest = _digest(following)
            if digest in self._seen:
                self._error = PaginationError(
                    f"the server handed back cursor {_shorten(following)} a second time; "
                    "stopping instead of walking in a loop"
                )
            else:
                self._seen.add(digest)
                self._ahead = _start(self._fetch(following))
                self._ahead_cursor = following
        return _Chunk(page, orders, start, None, cursor)

    def identity(self, item: Any) -> str:
        return item.transaction_id  # type: ignore[no-any-return]

    def position(self, start: Checkpoint, chunk: _Chunk, consumed: int) -> Checkpoint:
        last = self.identity(chunk.items[consumed - 1]) if consumed else None
        cursor: str | None = chunk.key  # type: ignore[assignment]
        return Checkpoint(  # not attrs.evolve: this is read after every item by some callers
            operation="orders",
            network=start.network,
            page_size=start.page_size,
            address=start.address,
            market=start.market,
            status=start.status,
            side=start.side,
            cursor=cursor,
            consumed=consumed,
            last=last,
        )

    def view(self, chunk: _Chunk) -> OrdersPage:
        page: OrdersPage = chunk.page
        if chunk.start == 0:
            return page
        return attrs.evolve(page, orders=tuple(chunk.items[chunk.start :]))

    def pending(self) -> Iterable[asyncio.Task[Any]]:
        return () if self._ahead is None else (self._ahead,)


class BoardPager(_Pager):
    """The leaderboard: the first page, then the rest concurrently, handed out in page order.

    At most ``concurrency`` pages are in flight or held unread at any time, and with
    ``max_items`` no page is asked for that the entries still wanted do not need.

    An entry is its address: an address already handed out is not handed out again, so the
    pages of a live board that overlap after a shift repeat nothing, while a tie split across
    two pages keeps both of its entries. The walk ends at the first empty page; a page after
    the first that brings no address not already handed out raises :class:`PaginationError`
    (the server ignores the page parameter). Pages the board gains are followed.
    """

    __slots__ = (
        "_addresses",
        "_concurrency",
        "_ended",
        "_fetch",
        "_first",
        "_last",
        "_next_page",
        "_per_page",
        "_queue",
        "_wanted",
    )

    def __init__(
        self,
        fetch: Callable[[int], Awaitable[LeaderboardPage]],
        start: Checkpoint,
        *,
        concurrency: int,
        max_items: int | None,
    ) -> None:
        self._fetch = fetch
        self._first: Checkpoint | None = start
        self._concurrency = concurrency
        self._wanted = max_items  # entries the consumer may still take; None: all of them
        #: every address handed out (or, on a resumed walk, behind the position on its page)
        self._addresses: set[str] = set()
        self._queue: deque[tuple[int, asyncio.Task[LeaderboardPage]]] = deque()
        self._next_page = 1
        self._last = 1
        self._per_page = 1
        self._ended = False

    async def next(self) -> _Chunk | None:
        first = self._first
        if first is not None:
            self._first = None
            number, start = first.page or 1, first.consumed
            page = await self._fetch(number)
            entries = page.leaderboard
            if start:
                _check_position(entries, start, first.last, self.identity, f"page {number}")
            self._last = page.total_pages
            self._per_page = max(page.limit, len(entries), 1)
            self._next_page = number + 1
            self._addresses.update(entry.address for entry in entries[:start])
        else:
            if self._ended or not self._queue:
                return None
            number, task = self._queue[0]
            page = await task
            self._queue.popleft()
            entries, start = page.leaderboard, 0
            if page.total_pages > self._last:
                self._last = page.total_pages
        if not entries:  # the first empty page ends the walk
            return self._end(_Chunk(page, entries, 0, None, number))
        chunk = _Chunk(page, entries, start, self._fresh(entries, start), number)
        count = chunk.to_hand_out()
        if not count and first is None:
            raise PaginationError(
                f"leaderboard page {number} brings no entry the walk has not already "
                "yielded: the server seems to ignore the page parameter; stopping instead "
                "of walking in a loop"
            )
        if self._wanted is not None:
            self._wanted -= count
            if self._wanted <= 0:
                return self._end(chunk)
        self._schedule()
        return chunk

    def _fresh(self, entries: Sequence[Any], start: int) -> list[int] | None:
        """Indexes of the entries whose address is new (None: all from ``start``); records them."""
        addresses = self._addresses
        fresh: list[int] | None = None
        for index in range(start, len(entries)):
            address = entries[index].address
            if address in addresses:
                if fresh is None:
                    fresh = list(range(start, index))
            else:
                addresses.add(address)
                if fresh is not None:
                    fresh.append(index)
        return fresh

    def _schedule(self) -> None:
        queue, wanted = self._queue, self._wanted
        while self._next_page <= self._last and len(queue) < self._concurrency:
            if wanted is not None and wanted <= len(queue) * self._per_page:
                break  # the pages already on their way bring what is wanted
            queue.append((self._next_page, _start(self._fetch(self._next_page))))
            self._next_page += 1

    def _end(self, chunk: _Chunk) -> _Chunk:
        """The last page: what is still in flight is not needed; cancel it now."""
        self._ended = True
        self.cancel_soon()
        return chunk

    def identity(self, item: Any) -> str:
        return item.address  # type: ignore[no-any-return]

    def position(self, start: Checkpoint, chunk: _Chunk, consumed: int) -> Checkpoint:
        last = self.identity(chunk.items[consumed - 1]) if consumed else None
        page: int = chunk.key  # type: ignore[assignment]
        return Checkpoint(
            operation="leaderboard",
            network=start.network,
            page_size=start.page_size,
            page=page,
            consumed=consumed,
            last=last,
        )

    def view(self, chunk: _Chunk) -> LeaderboardPage:
        page: LeaderboardPage = chunk.page
        if chunk.fresh is None and chunk.start == 0:
            return page
        indexes = range(chunk.start, len(chunk.items)) if chunk.fresh is None else chunk.fresh
        return attrs.evolve(page, leaderboard=tuple(chunk.items[i] for i in indexes))

    def pending(self) -> Iterable[asyncio.Task[Any]]:
        return (task for _, task in self._queue)


# --- walks: what the consumer holds -----------------------------------------------------------


class Walk(Generic[T]):
    """An async iterator over a stream's items (or pages) that knows where it stands.

    The four stream methods of :class:`Client` make them. Use one with ``async for``,
    ``anext()``, ``aclose()`` and ``contextlib.aclosing``; one task at a time steps it.
    :attr:`checkpoint` is the position just after the last item handed out; pass it (or its
    JSON text) as ``resume=`` to continue there, in this process or another one. After the
    end, an error or ``aclose()``, the walk hands out nothing more, and its checkpoint stays.
    A walk of items also goes straight to columns: :meth:`to_arrow`, :meth:`to_parquet` and
    :meth:`record_batches` (extra ``asyncapi-client[arrow]``).
    """

    __slots__ = ("_busy", "_chunk", "_closed", "_pager", "_start")

    def __init__(self, pager: _Pager, start: Checkpoint) -> None:
        self._pager = pager
        self._start = start
        self._chunk: _Chunk | None = None
        self._closed = False
        self._busy = False

    def __aiter__(self) -> Self:
        return self

    async def __anext__(self) -> T:
        raise NotImplementedError

    @property
    def checkpoint(self) -> Checkpoint:
        """The position just after the last item handed out (before the first: the start)."""
        chunk = self._chunk
        if chunk is None:
            return self._start
        return self._pager.position(self._start, chunk, self._consumed(chunk))

    def _consumed(self, chunk: _Chunk) -> int:
        """How many items of ``chunk`` (as the server sent it) are behind the position."""
        raise NotImplementedError

    async def aclose(self) -> None:
        """Stop the walk: cancel and await every fetch in flight. Calling it twice is fine."""
        if self._busy:
            raise RuntimeError("aclose(): the walk is running in another task; cancel that task")
        await self._close()

    async def _close(self) -> None:
        if not self._closed:
            self._closed = True
            await self._pager.close()

    def _enter(self) -> None:
        if self._busy:
            raise RuntimeError("anext(): the walk is already running in another task")
        self._busy = True

    def __del__(self) -> None:
        if not self._closed:
            with contextlib.suppress(RuntimeError):  # a loop closed meanwhile: nothing runs
                self._pager.cancel_soon()

    def __repr__(self) -> str:
        state = "closed" if self._closed else "open"
        return f"<Walk {self._start.operation} {state} at {self.checkpoint.to_json()[:200]}>"

    # --- columnar export (asyncapi-client[arrow]; the work is in _export) ---------------------

    def _of_items(self) -> bool:
        """True for a walk of items (orders, entries), False for a walk of pages: only a walk
        of items goes to columns."""
        return False

    def _rewind(self, checkpoint: Checkpoint) -> None:
        """A closed walk's checkpoint becomes ``checkpoint``: an export that failed hands out
        no row of its batch, so the walk stands just after the last row it did hand out."""
        assert self._closed
        self._start, self._chunk = checkpoint, None

    async def to_arrow(
        self: Walk[Order] | Walk[LeaderboardEntry], *, decimal_scale: int = 18
    ) -> pyarrow.Table:
        """The rest of the walk as a ``pyarrow.Table``, one column per model attribute.

        Decimals are ``decimal128(38, decimal_scale)``, exact or refused: a value that does
        not fit raises ``ValueError`` naming the field and the item's position (from 0 where
        the export began). Walks of items only; needs ``asyncapi-client[arrow]``.

        Args:
            decimal_scale: digits after the point in the decimal columns (0 to 38).
        """
        from . import _export  # on first use: importing the package costs nothing for it

        return await _export.to_arrow(self, decimal_scale=decimal_scale)

    async def to_parquet(
        self: Walk[Order] | Walk[LeaderboardEntry],
        path: str | os.PathLike[str],
        *,
        rows_per_group: int = 65_536,
        decimal_scale: int = 18,
    ) -> int:
        """Write the rest of the walk to a Parquet file, row group by row group; returns
        the number of rows written.

        The file is written beside ``path`` and renamed to it once complete: ``path``
        appears only whole, and a failure or cancellation leaves no file behind.

        Args:
            path: the file to write (replaced if it exists).
            rows_per_group: rows in each row group (all full but the last).
            decimal_scale: digits after the point in the decimal columns (0 to 38).
        """
        from . import _export

        return await _export.to_parquet(
            self, path, rows_per_group=rows_per_group, decimal_scale=decimal_scale
        )

    def record_batches(
        self: Walk[Order] | Walk[LeaderboardEntry],
        *,
        rows: int = 65_536,
        decimal_scale: int = 18,
    ) -> AsyncIterator[pyarrow.RecordBatch]:
        """The rest of the walk as ``pyarrow.RecordBatch`` objects of ``rows`` rows (all full
        but the last), each built as its pages arrive: memory stays bounded by one batch.

        After each batch handed out, :attr:`checkpoint` stands just after its last row.

        Args:
            rows: rows in each batch.
            decimal_scale: digits after the point in the decimal columns (0 to 38).
        """
        from . import _export

        return _export.record_batches(self, rows=rows, decimal_scale=decimal_scale)


class _ItemWalk(Walk[T]):
    """Every item of every page, at most ``max_items`` of them."""

    __slots__ = ("_i", "_index", "_items", "_left", "_n")

    def __init__(self, pager: _Pager, start: Checkpoint, max_items: int | None) -> None:
        super().__init__(pager, start)
        self._items: Sequence[T] = ()
        self._i = self._n = 0
        self._index: list[int] | None = None  # raw page index of each item, when not all
        self._left = max_items

    async def __anext__(self) -> T:
        i = self._i
        if i < self._n:  # the hot path: an item of the page at hand
            self._i = i + 1
            return self._items[i]
        return await self._advance()

    async def _advance(self) -> T:
        if self._closed:
            raise StopAsyncIteration
        self._enter()
        try:
            while self._left != 0 and (chunk := await self._pager.next()) is not None:
                if chunk.fresh is None:
                    items, i, index = chunk.items, chunk.start, None
                else:
                    items, i, index = [chunk.items[j] for j in chunk.fresh], 0, chunk.fresh
                n = len(items)
                if i >= n:
                    continue
                left = self._left
                if left is not None:
                    n = min(n, i + left)
                    self._left = left - (n - i)
                self._chunk, self._items, self._index, self._n = chunk, items, index, n
                self._i = i + 1
                return self._items[i]
        except BaseException:
            await self._close()
            raise
        finally:
            self._busy = False
        await self._close()
        raise StopAsyncIteration

    def _consumed(self, chunk: _Chunk) -> int:
        return self._i if self._index is None else self._index[self._i - 1] + 1

    def _of_items(self) -> bool:
        return True

    async def _close(self) -> None:
        self._n = self._i  # nothing more of the page at hand, either
        await super()._close()


class _PageWalk(Walk[T]):
    """Each page; a resumed walk first hands out what is left of its first page."""

    __slots__ = ()

    async def __anext__(self) -> T:
        if self._closed:
            raise StopAsyncIteration
        self._enter()
        try:
            while (chunk := await self._pager.next()) is not None:
                if chunk.items and not chunk.to_hand_out():
                    continue  # a resumed walk's first page, consumed to its end
                self._chunk = chunk
                return self._pager.view(chunk)  # type: ignore[no-any-return]
        except BaseException:
            await self._close()
            raise
        finally:
            self._busy = False
        await self._close()
        raise StopAsyncIteration

    def _consumed(self, chunk: _Chunk) -> int:
        return len(chunk.items)


def item_walk(pager: _Pager, start: Checkpoint, max_items: int | None) -> Walk[Any]:
    """A walk that hands out every item of ``pager``'s pages, at most ``max_items``."""
    return _ItemWalk(pager, start, max_items)


def page_walk(pager: _Pager, start: Checkpoint) -> Walk[Any]:
    """A walk that hands out ``pager``'s pages."""
    return _PageWalk(pager, start)
