"""The oracle: the wire bodies the spec shows, written out literally, and a script serving them.

Tests compare what the client decodes against these bodies, not against the fake's own data:
the fake routes a request and records it, and :func:`oracle_reply` (scripted on every
operation by the ``server`` fixture) answers it with the literal body. Path parameters and
filters are echoed into the body, so a test sees that its argument arrived unchanged.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from asyncapi_client.testing import FakeExchange, FakeServer, RecordedRequest, Reply

__all__ = [
    "DEEP_DECIMAL",
    "canned",
    "leaderboard_wire",
    "market_wire",
    "oracle_reply",
    "oracle_server",
    "order_wire",
    "orders_wire",
    "pool_json",
    "pool_wire",
    "token_json",
    "token_wire",
    "tokens_wire",
    "user_wire",
]

#: A decimal with more digits than any float or default Decimal context keeps (64 digits).
DEEP_DECIMAL = "1234567890123456789012345678901234.567890123456789012345678901234"

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
    """One page of orders: filters are echoed into the orders, the cursor walks once (to
    the orders that follow, as a server that honours the cursor does)."""
    limit = int(query.get("limit", "2"))
    pool_id = query.get("market", "pool-1")
    first = min(limit, 3) if "cursor" in query else 0
    orders = [order_wire(first + i, address, pool_id) for i in range(min(limit, 3))]
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


# --- small valid bodies for the raw-socket server's answers ---------------------------------


def token_json(address: str = "0xtoken") -> dict[str, Any]:
    return {
        "address": address,
        "name": "Token",
        "symbol": "TOK",
        "decimals": 18,
        "totalSupply": "1000000",
        "logoUri": None,
        "priceUsd": 1.5,
    }


def pool_json(pool_id: str = "p1") -> dict[str, Any]:
    """A valid Pool body."""
    return {
        "poolId": pool_id,
        "baseToken": token_json("0xbase"),
        "quoteToken": token_json("0xquote"),
        "price": 2.5,
        "priceChange24h": -0.5,
        "volume24h": 1000.0,
        "tvl": 5000.0,
    }


def oracle_reply(request: RecordedRequest) -> Reply:
    """The fake's script for every operation: the literal body for this request."""
    assert request.operation is not None
    return Reply(json=canned(request.operation, request.param, request.query, request.network))


#: The fake's own data is never served by an oracle server (the script answers everything).
_TINY = FakeExchange.generate(seed=0, tokens=2, users=1, orders_per_user=1, pools=1)


def oracle_server(prefix: str = "") -> FakeServer:
    """A FakeServer (not started) that answers every operation from the oracle."""
    server = FakeServer(_TINY, prefix=prefix)
    server.script("*", oracle_reply, repeat=True)
    return server
