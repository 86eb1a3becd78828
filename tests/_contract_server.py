"""A small, independent loopback server for the six operations, and the canned wire data.

Not the project's fake exchange: it is written from the spec alone, serves each network on
its own port (two hosts), routes on the RAW request path (so a percent-encoded segment is
seen exactly as sent), logs every request, and can be told to answer with any status, body
or headers, or to hold its answers until a number of requests have arrived.
"""

from __future__ import annotations

import asyncio
import math
import re
import socket
from collections import deque
from collections.abc import Callable, Mapping
from types import TracebackType
from typing import Any, Self
from urllib.parse import parse_qsl, unquote

import attrs
import orjson
from aiohttp import web

__all__ = [
    "DEEP_DECIMAL",
    "ContractServer",
    "Reply",
    "Seen",
    "canned",
    "leaderboard_wire",
    "market_wire",
    "order_wire",
    "orders_wire",
    "pool_wire",
    "token_wire",
    "tokens_wire",
    "user_wire",
]

#: A decimal with more digits than any float or default Decimal context keeps (64 digits).
DEEP_DECIMAL = "1234567890123456789012345678901234.567890123456789012345678901234"

#: How long a gated request waits for the others before the server gives up (seconds).
GATE_TIMEOUT = 15.0


# --- canned wire data (camelCase, exactly as the spec shows it) ---------------------------


def token_wire(symbol: str, network: str = "mainnet") -> dict[str, Any]:
    """A Token as the wire carries it; ``name`` tells which host served it."""
    return {
        "address": f"0x{symbol.lower()}",
        "name": f"{symbol} on {network}",
        "symbol": symbol,
        "decimals": 18,
        "totalSupply": DEEP_DECIMAL,
        "logoUri": f"https://img.example/{symbol.lower()}.png",
        "priceUsd": 1.25,
    }


def tokens_wire(search: str | None, network: str) -> dict[str, Any]:
    """The token directory; a search comes back as the name of the only token."""
    if search is not None:
        return {"tokens": [dict(token_wire("HIT", network), name=search)]}
    return {"tokens": [token_wire("AAA", network), token_wire("BBB", network)]}


def market_wire(token: str, network: str) -> dict[str, Any]:
    """One aggregated market of ``token``."""
    return {
        "address": f"market-of-{token}",
        "token0": dict(token_wire("T0", network), address=token),
        "token1": token_wire("USDC", network),
        "type": "amm",
        "tvl": 1_000_000.5,
        "volume24h": 25_000.0,
        "fee": 0.003,
    }


def pool_wire(pool_id: str, network: str) -> dict[str, Any]:
    """A CLOB pool whose poolId echoes the decoded path segment."""
    return {
        "poolId": pool_id,
        "baseToken": token_wire("BASE", network),
        "quoteToken": token_wire("QUOTE", network),
        "price": 2.5,
        "priceChange24h": -0.125,
        "volume24h": 1234.5,
        "tvl": 99.0,
    }


def order_wire(index: int, user: str, pool_id: str = "pool-1") -> dict[str, Any]:
    """An order with decimals carried as text."""
    return {
        "transactionId": f"tx-{index}",
        "poolId": pool_id,
        "user": user,
        "side": "BUY" if index % 2 == 0 else "SELL",
        "price": "0.000000000000000001",
        "size": DEEP_DECIMAL,
        "filledSize": "0",
        "status": "OPEN",
        "timestamp": 1_700_000_000 + index,
    }


def user_wire(address: str, network: str) -> dict[str, Any]:
    """A user profile whose address echoes the decoded path segment."""
    return {
        "address": address,
        "balances": [{"token": "0xbase", "amount": "10.5", "network": network}],
        "orders": [order_wire(0, address), order_wire(1, address)],
        "positions": [],
    }


def orders_wire(address: str, query: Mapping[str, str]) -> dict[str, Any]:
    """One page of orders: filters are echoed into the orders, the cursor walks once."""
    limit = int(query.get("limit", "2"))
    pool_id = query.get("market", "pool-1")
    orders = [order_wire(i, address, pool_id) for i in range(min(limit, 3))]
    for order in orders:
        if "status" in query:
            order["status"] = query["status"]
        if "side" in query:
            order["side"] = query["side"]
    return {"orders": orders, "cursor": None if "cursor" in query else "cursor-2"}


def leaderboard_wire(query: Mapping[str, str], total: int = 25) -> dict[str, Any]:
    """One leaderboard page, numbered from 1; page and limit echo the query."""
    page = int(query.get("page", "1"))
    limit = int(query.get("limit", "10"))
    first = (page - 1) * limit
    entries = [
        {"rank": rank, "address": f"0xref{rank}", "score": 1000.0 - rank}
        for rank in range(first + 1, min(first + limit, total) + 1)
    ]
    return {
        "leaderboard": entries,
        "page": page,
        "limit": limit,
        "total": total,
        "totalPages": math.ceil(total / limit),
    }


def canned(operation: str, param: str | None, query: Mapping[str, str], network: str) -> Any:
    """The body this server answers ``operation`` with."""
    if operation == "tokens":
        return tokens_wire(query.get("search"), network)
    if operation == "token_markets":
        assert param is not None
        return {"markets": [market_wire(param, network)]}
    if operation == "pool":
        assert param is not None
        return pool_wire(param, network)
    if operation == "user":
        assert param is not None
        return user_wire(param, network)
    if operation == "orders":
        assert param is not None
        return orders_wire(param, query)
    assert operation == "leaderboard"
    return leaderboard_wire(query)


#: operation -> pattern over the raw path after the prefix; a parameter is ONE raw segment.
ROUTES: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("tokens", re.compile(r"/api/tokens")),
    ("token_markets", re.compile(r"/api/aggregated/tokens/([^/?#]+)/markets")),
    ("pool", re.compile(r"/api/clob/pools/([^/?#]+)")),
    ("user", re.compile(r"/api/clob/users/([^/?#]+)")),
    ("orders", re.compile(r"/api/clob/users/([^/?#]+)/orders")),
    ("leaderboard", re.compile(r"/api/dash/leaderboard")),
)


def route(raw_path: str) -> tuple[str | None, str | None]:
    """(operation, decoded path parameter) for a raw path, or (None, None)."""
    for operation, pattern in ROUTES:
        match = pattern.fullmatch(raw_path)
        if match:
            segment = match.group(1) if pattern.groups else None
            return operation, None if segment is None else unquote(segment, errors="strict")
    return None, None


# --- the server ---------------------------------------------------------------------------


@attrs.frozen
class Seen:
    """One request as the server saw it."""

    network: str
    method: str
    raw_path: str  # without the prefix and without the query
    raw_query: str
    headers: Mapping[str, str]
    operation: str | None
    param: str | None

    @property
    def query_pairs(self) -> list[tuple[str, str]]:
        return parse_qsl(self.raw_query, keep_blank_values=True, strict_parsing=False)

    @property
    def query(self) -> dict[str, str]:
        pairs = self.query_pairs
        result = dict(pairs)
        assert len(result) == len(pairs), f"a query parameter was repeated: {pairs}"
        return result


@attrs.frozen
class Reply:
    """A scripted answer; ``body=None`` means the canned body of the operation."""

    status: int = 200
    body: bytes | str | None = None
    headers: Mapping[str, str] = attrs.field(factory=dict)
    content_type: str | None = "application/json"  # None: whatever ``headers`` say


class ContractServer:
    """Both hosts on loopback: ``base_url`` (mainnet) and ``testnet_base_url`` (testnet)."""

    def __init__(self, prefix: str = "") -> None:
        self.prefix = prefix.rstrip("/")
        self.seen: list[Seen] = []
        #: answers used once each, first in first out, before ``always`` and the canned data.
        self.replies: deque[Reply] = deque()
        self.always: Reply | None = None
        self._gate_count: int | None = None
        self._gate = asyncio.Event()
        self._runners: dict[str, web.AppRunner] = {}
        # Bound now, listened on by start(): the addresses are known before any loop runs.
        self._sockets: dict[str, socket.socket] = {}
        self._urls: dict[str, str] = {}
        for network in ("mainnet", "testnet"):
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.bind(("127.0.0.1", 0))
            self._sockets[network] = sock
            host, port = sock.getsockname()[:2]
            self._urls[network] = f"http://{host}:{port}{self.prefix}"

    # --- configuration ----------------------------------------------------------------

    def hold_until(self, count: int) -> None:
        """Hold every answer until ``count`` requests have arrived (bounded by GATE_TIMEOUT)."""
        self._gate_count = count
        self._gate.clear()

    @property
    def base_url(self) -> str:
        return self._urls["mainnet"]

    @property
    def testnet_base_url(self) -> str:
        return self._urls["testnet"]

    def url(self, network: str) -> str:
        return self._urls[network]

    def operations(self) -> list[tuple[str, str | None]]:
        return [(seen.network, seen.operation) for seen in self.seen]

    # --- lifecycle --------------------------------------------------------------------

    async def start(self) -> None:
        for network, sock in self._sockets.items():
            app = web.Application()
            app.router.add_route("*", "/{tail:.*}", self._handler(network))
            runner = web.AppRunner(app, access_log=None, handle_signals=False)
            await runner.setup()
            self._runners[network] = runner
            await web.SockSite(runner, sock).start()

    async def close(self) -> None:
        self._gate.set()
        for runner in self._runners.values():
            await runner.cleanup()
        self._runners.clear()
        for sock in self._sockets.values():
            sock.close()

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    # --- handling ---------------------------------------------------------------------

    def _handler(self, network: str) -> Callable[[web.Request], Any]:
        async def handle(request: web.Request) -> web.StreamResponse:
            raw = request.raw_path
            path, _, query = raw.partition("?")
            unprefixed = path[len(self.prefix) :] if path.startswith(self.prefix) else None
            operation, param = route(unprefixed) if unprefixed is not None else (None, None)
            seen = Seen(
                network=network,
                method=request.method,
                raw_path=unprefixed if unprefixed is not None else path,
                raw_query=query,
                headers=dict(request.headers),
                operation=operation,
                param=param,
            )
            self.seen.append(seen)
            if self._gate_count is not None:
                if len(self.seen) >= self._gate_count:
                    self._gate.set()
                try:
                    await asyncio.wait_for(self._gate.wait(), GATE_TIMEOUT)
                except TimeoutError:
                    return web.Response(status=500, text=f"gate: only {len(self.seen)} arrived")
            if request.method != "GET":
                return web.Response(status=405, text="GET only")
            reply = self.replies.popleft() if self.replies else self.always
            if reply is not None and reply.body is not None:
                body = reply.body.encode() if isinstance(reply.body, str) else reply.body
                return web.Response(
                    status=reply.status,
                    body=body,
                    headers=reply.headers,
                    content_type=reply.content_type,
                )
            if operation is None:
                return web.json_response({"error": f"no route for {raw}"}, status=404)
            data = canned(operation, param, seen.query, network)
            status = 200 if reply is None else reply.status
            headers = {} if reply is None else reply.headers
            return web.Response(
                status=status,
                body=orjson.dumps(data),
                headers=headers,
                content_type="application/json",
            )

        return handle
