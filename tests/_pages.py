"""Data for the walk tests: orders with readable cursors, leaderboard boards, and the
responders that serve them from the project's fake exchange.

Each ``serve_*`` function returns a :data:`~asyncapi_client.testing.Responder` for
``server.script(operation, responder, repeat=True)``: the fake routes, records, gates and
times every request; the responder only says which page of this data set it gets.
:func:`serving` starts the fake on its own loop in a thread (``in_thread()``), so the
test's loop holds nothing but the client's tasks.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from typing import Any, Literal, Protocol

import attrs

from asyncapi_client.testing import FakeExchange, FakeServer, RecordedRequest, Reply, Responder
from tests._oracle import pool_json

__all__ = [
    "ADDRESS",
    "Board",
    "PagesBoard",
    "ShiftingBoard",
    "StaticBoard",
    "cursor_for",
    "entry",
    "make_orders",
    "page_of",
    "serve_board",
    "serve_orders",
    "serve_pools",
    "serving",
]

LastPage = Literal["null", "missing", "empty", "empty_page"]
#: Seconds before an answer: one for all, or by page number.
Delay = float | Callable[[int], float]

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
    """The cursor of the page starting at ``offset`` (with characters to encode),
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


def page_of(request: RecordedRequest) -> int:
    """The leaderboard page a request asked for."""
    return int(request.query.get("page", "1"))


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


@attrs.define
class _Paging:
    """What every responder here shares: a request budget, delays and one-off errors by page.

    Past ``budget`` requests every answer is 410, so a walk that would not end fails its
    test instead of hanging it.
    """

    budget: int | None
    delay: Delay
    errors: dict[int, int]
    served: int = 0

    def reply(self, page: int, body: Callable[[], dict[str, Any]]) -> Reply:
        self.served += 1
        delay = self.delay(page) if callable(self.delay) else self.delay
        if self.budget is not None and self.served > self.budget:
            return Reply(410, json={"error": "request budget exhausted"}, delay=delay)
        status = self.errors.pop(page, None)
        if status is not None:
            return Reply(status, delay=delay)
        return Reply(json=body(), delay=delay)


def serve_orders(
    orders: Sequence[Mapping[str, Any]],
    *,
    last_page: LastPage = "null",
    pad: int = 0,
    repeat_cursor_on_page: int | None = None,
    ignore_cursor: bool = False,
    overlap: int = 0,
    budget: int | None = None,
    delay: Delay = 0.0,
    errors: Mapping[int, int] | None = None,
) -> Responder:
    """Cursor pages of ``orders`` (filtered by user, market, status, side), cursors made by
    :func:`cursor_for`, each ``pad`` characters longer.

    ``last_page`` is how the last page says so: cursor null, missing, ``""``, or a cursor
    to one more, empty page. ``repeat_cursor_on_page`` makes that page hand back the cursor
    that brought it; ``ignore_cursor`` serves the first orders for every cursor (each with a
    fresh cursor); ``overlap`` starts each next page that many orders before the page's end.
    ``errors={3: 404}`` answers page 3 (counted from 1) with 404 once.
    """
    paging = _Paging(budget, delay, dict(errors or {}))

    def respond(request: RecordedRequest) -> Reply:
        query = request.query
        limit = int(query.get("limit", "10"))
        cursor = query.get("cursor")
        offset = 0 if cursor is None else _offset_of(cursor)
        if offset is None:
            return Reply(400, json={"error": f"bad cursor {cursor!r}"})
        rows = [
            order
            for order in orders
            if order["user"] == request.param
            and ("market" not in query or order["poolId"] == query["market"])
            and ("status" not in query or order["status"] == query["status"])
            and ("side" not in query or order["side"] == query["side"])
        ]
        page = offset // limit + 1

        def body() -> dict[str, Any]:
            first = 0 if ignore_cursor else offset
            chunk = rows[first : first + limit]
            answer: dict[str, Any] = {"orders": chunk}
            if page == repeat_cursor_on_page:
                answer["cursor"] = cursor_for(offset, pad)  # the cursor that brought us here
            elif offset + limit < len(rows) or (last_page == "empty_page" and chunk):
                answer["cursor"] = cursor_for(offset + limit - overlap, pad)
            elif last_page == "null":
                answer["cursor"] = None
            elif last_page == "empty":
                answer["cursor"] = ""
            elif last_page == "empty_page":
                answer["cursor"] = cursor_for(offset + limit, pad)  # an empty page says "more"
            return answer

        return paging.reply(page, body)

    return respond


def serve_board(
    board: Board,
    *,
    budget: int | None = None,
    delay: Delay = 0.0,
    errors: Mapping[int, int] | None = None,
) -> Responder:
    """Numbered leaderboard pages of ``board`` (see :func:`serve_orders` for the rest)."""
    paging = _Paging(budget, delay, dict(errors or {}))
    reads = 0

    def respond(request: RecordedRequest) -> Reply:
        page = page_of(request)
        limit = int(request.query.get("limit", "10"))

        def body() -> dict[str, Any]:
            nonlocal reads
            entries, total = board.page(page, limit, reads)
            reads += 1
            return {
                "leaderboard": entries,
                "page": page,
                "limit": limit,
                "total": total,
                "totalPages": -(-total // limit),
            }

        return paging.reply(page, body)

    return respond


def serve_pools(delay: float = 0.0) -> Responder:
    """A valid pool whose id is the one asked for, after ``delay`` seconds."""

    def respond(request: RecordedRequest) -> Reply:
        return Reply(json=pool_json(request.param or ""), delay=delay)

    return respond


@contextlib.asynccontextmanager
async def serving(
    exchange: FakeExchange | None = None, *, seed: int = 0, **responders: Responder
) -> AsyncIterator[FakeServer]:
    """The fake exchange in a thread of its own, answering each operation named here with
    its responder (every request) and any other from ``exchange`` (empty unless given)."""
    with FakeServer(exchange or FakeExchange(), seed=seed).in_thread() as server:
        for operation, responder in responders.items():
            server.script(operation, responder, repeat=True)
        yield server
