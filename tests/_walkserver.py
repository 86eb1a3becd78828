"""An aiohttp.web loopback server for cursor walks, leaderboard walks and fan-outs.

It serves ``/api/clob/users/{address}/orders`` (cursor pages), ``/api/dash/leaderboard``
(numbered pages) and ``/api/clob/pools/{id}``, with injectable latency, faults on given
pages, a seeded random fault schedule, and its own count of requests in flight (and the
most seen at once). It runs on a loop in a thread of its own (see ``_rawserver``), so
the test's loop holds only the client's tasks, and its timings are not the client's.
"""

from __future__ import annotations

import asyncio
import random
import socket
import struct
import time
from collections.abc import Callable, Mapping, Sequence
from types import TracebackType
from typing import Any, Literal, Protocol, Self

import attrs
from aiohttp import web

from asyncapi_client.testing._thread import LoopThread
from tests._oracle import pool_json
from tests._rawserver import drain_accepts

__all__ = [
    "Board",
    "Fault",
    "FaultSchedule",
    "PagesBoard",
    "Seen",
    "ShiftingBoard",
    "StaticBoard",
    "WalkServer",
    "cursor_for",
    "make_orders",
]

#: A fault the server can play instead of an answer: a status, a reset, or a body cut short.
Fault = int | Literal["reset", "cut"]
LastPage = Literal["null", "missing", "empty", "empty_page"]

ADDRESS = "0xuser"
STATUSES = ("OPEN", "FILLED", "PARTIALLY_FILLED", "CANCELLED", "EXPIRED")


def make_orders(count: int, user: str = ADDRESS) -> list[dict[str, Any]]:
    """``count`` distinct orders on the wire, in the order the server pages them."""
    return [
        {
            "transactionId": f"tx{i:05d}",
            "poolId": f"pool-{i % 3}",
            "user": user,
            "side": "BUY" if i % 2 == 0 else "SELL",
            "price": f"{1 + i / 1000:.3f}",
            "size": "1.5",
            "filledSize": "0",
            "status": STATUSES[i % len(STATUSES)],
            "timestamp": 1_700_000_000 + i,
        }
        for i in range(count)
    ]


def cursor_for(offset: int, pad: int = 0) -> str:
    """The server's cursor for the page starting at ``offset`` (with characters to encode),
    ``pad`` characters longer."""
    return f"c/{offset}{'p' * pad}+="


def _offset_of(cursor: str) -> int | None:
    if not (cursor.startswith("c/") and cursor.endswith("+=")):
        return None
    try:
        return int(cursor[2:-2].rstrip("p"))
    except ValueError:
        return None


def entry(rank: int, address: str | None = None) -> dict[str, Any]:
    """A leaderboard entry; its address is made from its rank unless given."""
    return {"rank": rank, "address": address or f"0x{rank:040x}", "score": 10_000.0 - rank}


class Board(Protocol):
    """What the leaderboard answers: the entries of a page and the board's total."""

    def page(self, page: int, limit: int, nth: int) -> tuple[list[dict[str, Any]], int]:
        """``nth`` counts the leaderboard requests served before this one."""
        ...


@attrs.define
class StaticBoard:
    """A board of ``total`` entries, ranked 1..total, that never changes."""

    total: int

    def page(self, page: int, limit: int, nth: int) -> tuple[list[dict[str, Any]], int]:
        start = (page - 1) * limit
        return [entry(r) for r in range(start + 1, min(self.total, start + limit) + 1)], self.total


@attrs.define
class ShiftingBoard:
    """A live board: after the first read it has ``after`` entries and its pages start
    ``overlap`` ranks earlier (so they repeat ranks a previous page already had)."""

    before: int
    after: int
    overlap: int

    def page(self, page: int, limit: int, nth: int) -> tuple[list[dict[str, Any]], int]:
        if nth == 0:
            return StaticBoard(self.before).page(page, limit, nth)
        start = max(0, (page - 1) * limit - self.overlap)
        return [entry(r) for r in range(start + 1, min(self.after, start + limit) + 1)], self.after


@attrs.define
class PagesBoard:
    """A board given page by page as (rank, address) pairs, claiming ``total`` entries.

    A page not given is empty. With ``ignore_page`` every request gets page 1, as from a
    server that ignores the page parameter.
    """

    pages: Mapping[int, Sequence[tuple[int, str]]]
    total: int
    ignore_page: bool = False

    def page(self, page: int, limit: int, nth: int) -> tuple[list[dict[str, Any]], int]:
        rows = self.pages.get(1 if self.ignore_page else page, ())
        return [entry(rank, address) for rank, address in rows], self.total


#: The faults of the random schedule: 500, 503, 429 (with a small Retry-After), a reset
#: before the answer, a body cut short.
FAULTS: tuple[Fault, ...] = (500, 503, 429, "reset", "cut")


class FaultSchedule:
    """Seeded random faults (picked from ``faults``) on about ``rate`` of the requests.

    A URL never gets more than ``max_in_a_row`` faults in a row, so a client with that many
    retries always gets through; ``injected`` lists what was played.
    """

    def __init__(
        self,
        seed: int,
        *,
        rate: float = 0.3,
        max_in_a_row: int = 3,
        faults: Sequence[Fault] = FAULTS,
    ) -> None:
        self._faults = tuple(faults)
        self._rng = random.Random(seed)
        self._rate = rate
        self._max = max_in_a_row
        self._row: dict[str, int] = {}
        self.injected: list[tuple[str, Fault]] = []
        self.served = 0

    def next(self, key: str) -> Fault | None:
        roll, fault = self._rng.random(), self._rng.choice(self._faults)
        self.served += 1
        if roll >= self._rate or self._row.get(key, 0) >= self._max:
            self._row[key] = 0
            return None
        self._row[key] = self._row.get(key, 0) + 1
        self.injected.append((key, fault))
        return fault


@attrs.define
class Seen:
    """One request as the server saw it."""

    path: str
    query: dict[str, str]
    page: int
    start: float  # time.monotonic()
    end: float | None = None
    outcome: str = "pending"


class WalkServer:
    """``async with WalkServer(orders=45) as server:``; ``server.base_url`` is its address.

    ``latency`` delays every answer (seconds, or a function of the request); ``page_faults``
    plays the listed faults, one per request, on the given page number (orders: the
    cursor page counted from 1); ``schedule`` adds random faults; ``repeat_cursor_on_page``
    makes that page hand back the cursor its previous page handed back. ``cursor_pad``
    characters are added to every cursor (a server with huge cursors); ``max_requests``
    bounds a test against a walk that would not end: past it, every request gets 410.
    ``record_queries=False`` keeps no query in ``seen`` (memory measurements).
    ``answer_after={2: 3}`` answers page 2 only once a request for page 3 has arrived.
    ``ignore_cursor`` serves the first page for every cursor, each with a fresh cursor;
    ``overlap`` makes each next cursor start that many orders before the page's end.
    """

    def __init__(
        self,
        *,
        orders: int = 0,
        board: Board | None = None,
        last_page: LastPage = "null",
        default_limit: int = 10,
        latency: float | Callable[[Seen], float] = 0.0,
        page_faults: Mapping[int, Sequence[Fault]] | None = None,
        schedule: FaultSchedule | None = None,
        repeat_cursor_on_page: int | None = None,
        retry_after: str = "0.01",
        cursor_pad: int = 0,
        max_requests: int | None = None,
        record_queries: bool = True,
        answer_after: Mapping[int, int] | None = None,
        ignore_cursor: bool = False,
        overlap: int = 0,
    ) -> None:
        self.orders = make_orders(orders)
        self.board: Board = board or StaticBoard(0)
        self.last_page = last_page
        self.default_limit = default_limit
        self._latency = latency
        self._page_faults = {page: list(faults) for page, faults in (page_faults or {}).items()}
        self.schedule = schedule
        self.repeat_cursor_on_page = repeat_cursor_on_page
        self.retry_after = retry_after
        self.cursor_pad = cursor_pad
        self.max_requests = max_requests
        self.record_queries = record_queries
        self.answer_after = dict(answer_after or {})
        self.ignore_cursor = ignore_cursor
        self.overlap = overlap
        self.seen: list[Seen] = []
        self.in_flight = 0
        self.max_in_flight = 0
        self.board_reads = 0
        self._thread: LoopThread | None = None
        self._runner: web.AppRunner | None = None
        self._changed: asyncio.Condition | None = None
        self.port = 0

    # --- lifecycle ----------------------------------------------------------------------

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def __aenter__(self) -> Self:
        self._thread = LoopThread.shared()
        await self._thread.run(self._start())
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        assert self._thread is not None
        await self._thread.run(self._stop())

    async def _start(self) -> None:
        self._changed = asyncio.Condition()
        app = web.Application()
        app.router.add_get("/api/clob/users/{address}/orders", self._orders)
        app.router.add_get("/api/dash/leaderboard", self._leaderboard)
        app.router.add_get("/api/clob/pools/{pool_id}", self._pool)
        self._runner = web.AppRunner(
            app,
            access_log=None,
            handler_cancellation=True,
            shutdown_timeout=1.0,
            max_line_size=8190 + 2 * self.cursor_pad,
        )
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self.port = self._runner.addresses[0][1]

    async def _stop(self) -> None:
        assert self._runner is not None
        await drain_accepts()
        await self._runner.cleanup()

    async def wait_until(self, predicate: Callable[[], bool], within: float = 5.0) -> None:
        """Wait (from the test's loop) until ``predicate`` holds on the server's state."""
        assert self._thread is not None
        await self._thread.run(self._wait_until(predicate, within), within + 1.0)

    async def _wait_until(self, predicate: Callable[[], bool], within: float) -> None:
        assert self._changed is not None
        async with asyncio.timeout(within), self._changed:
            await self._changed.wait_for(predicate)

    async def _notify(self) -> None:
        assert self._changed is not None
        async with self._changed:
            self._changed.notify_all()

    # --- what the tests read ------------------------------------------------------------

    @property
    def done(self) -> int:
        """Requests answered (or failed on purpose) so far."""
        return sum(1 for seen in self.seen if seen.end is not None)

    # --- handlers -----------------------------------------------------------------------

    async def _serve(
        self, request: web.Request, page: int, answer: Callable[[], web.StreamResponse]
    ) -> web.StreamResponse:
        query = dict(request.query) if self.record_queries else {}
        seen = Seen(request.path, query, page, time.monotonic())
        self.seen.append(seen)
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            await self._notify()
            delay = self._latency(seen) if callable(self._latency) else self._latency
            if delay:
                await asyncio.sleep(delay)
            if page in self.answer_after:
                other = self.answer_after[page]
                await self._wait_until(lambda: any(s.page == other for s in self.seen), 5.0)
            fault = self._fault(request, page)
            if self.max_requests is not None and len(self.seen) > self.max_requests:
                seen.outcome = "410"
                return web.json_response({"error": "request budget exhausted"}, status=410)
            if fault is None:
                response = answer()
                seen.outcome = str(response.status)
                return response
            seen.outcome = str(fault)
            return await self._play(request, fault)
        except asyncio.CancelledError:
            seen.outcome = "cancelled"
            raise
        finally:
            seen.end = time.monotonic()
            self.in_flight -= 1
            await asyncio.shield(self._notify())

    def _fault(self, request: web.Request, page: int) -> Fault | None:
        queued = self._page_faults.get(page)
        if queued:
            return queued.pop(0)
        if self.schedule is not None:
            return self.schedule.next(str(request.rel_url))
        return None

    async def _play(self, request: web.Request, fault: Fault) -> web.StreamResponse:
        if fault == "reset":
            transport = request.transport
            assert transport is not None
            sock = transport.get_extra_info("socket")
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            transport.abort()
            return web.Response()
        if fault == "cut":
            response = web.StreamResponse(headers={"Content-Type": "application/json"})
            response.content_length = 1000
            await response.prepare(request)
            await response.write(b'{"orders": [')
            transport = request.transport
            assert transport is not None
            transport.abort()
            return response
        headers = {"Retry-After": self.retry_after} if fault == 429 else {}
        return web.json_response({"error": f"injected {fault}"}, status=fault, headers=headers)

    async def _orders(self, request: web.Request) -> web.StreamResponse:
        query = request.query
        limit = int(query.get("limit", self.default_limit))
        cursor = query.get("cursor")
        offset = 0 if cursor is None else _offset_of(cursor)
        if offset is None:
            return web.json_response({"error": f"bad cursor {cursor!r}"}, status=400)
        rows = [
            order
            for order in self.orders
            if order["user"] == request.match_info["address"]
            and ("market" not in query or order["poolId"] == query["market"])
            and ("status" not in query or order["status"] == query["status"])
            and ("side" not in query or order["side"] == query["side"])
        ]
        page = offset // limit + 1
        pad = self.cursor_pad

        def answer() -> web.StreamResponse:
            first = 0 if self.ignore_cursor else offset
            chunk = rows[first : first + limit]
            body: dict[str, Any] = {"orders": chunk}
            more = offset + limit < len(rows)
            if page == self.repeat_cursor_on_page:
                body["cursor"] = cursor_for(offset, pad)  # the cursor that brought us here
            elif more or (self.last_page == "empty_page" and chunk):
                body["cursor"] = cursor_for(offset + limit - self.overlap, pad)
            elif self.last_page == "null":
                body["cursor"] = None
            elif self.last_page == "empty":
                body["cursor"] = ""
            elif self.last_page == "empty_page":
                body["cursor"] = cursor_for(offset + limit, pad)  # an empty page says "more"
            return web.json_response(body)

        return await self._serve(request, page, answer)

    async def _leaderboard(self, request: web.Request) -> web.StreamResponse:
        page = int(request.query.get("page", 1))
        limit = int(request.query.get("limit", self.default_limit))

        def answer() -> web.StreamResponse:
            entries, total = self.board.page(page, limit, self.board_reads)
            self.board_reads += 1
            body = {
                "leaderboard": entries,
                "page": page,
                "limit": limit,
                "total": total,
                "totalPages": -(-total // limit),
            }
            return web.json_response(body)

        return await self._serve(request, page, answer)

    async def _pool(self, request: web.Request) -> web.StreamResponse:
        pool_id = request.match_info["pool_id"]
        return await self._serve(request, 1, lambda: web.json_response(pool_json(pool_id)))
