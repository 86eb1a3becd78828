"""Deterministic wire data for the benchmarks: pools, orders, leaderboard entries, as JSON bytes.

Everything follows the read API's wire format (camelCase, decimals as text). Orders come from
a fixed ring of pre-rendered JSON fragments, so a page of any size at any offset is one
``bytes.join`` away: the server stays cheap, and a 1,000,000-order walk costs it little.
Past the ring's first pass each order gets a transaction id of its own (its index): a walk
refuses a page whose orders it has already seen (a server repeating its pages).
"""

from __future__ import annotations

import random
from typing import Any, Final

import orjson

__all__ = [
    "LEADERBOARD_ENTRIES",
    "ORDER_RING",
    "leaderboard_page",
    "order_fragments",
    "orders_page",
    "pool_body",
    "user_total",
]

#: How many distinct orders the ring holds before it repeats (under new transaction ids).
ORDER_RING: Final = 10_000
#: Where an order fragment's transaction id starts (it is the first field), and its length.
_ID_AT: Final = len(b'{"transactionId":"0x')
_ID_DIGITS: Final = 64
#: Entries on the leaderboard: 20 pages of 100.
LEADERBOARD_ENTRIES: Final = 2_000
_STATUSES: Final = ("OPEN", "FILLED", "PARTIALLY_FILLED", "CANCELLED", "EXPIRED")


def _hex(rng: random.Random, digits: int) -> str:
    return f"0x{rng.getrandbits(digits * 4):0{digits}x}"


def _token(rng: random.Random, symbol: str) -> dict[str, Any]:
    return {
        "address": _hex(rng, 40),
        "name": f"{symbol} Token",
        "symbol": symbol,
        "decimals": 18,
        "totalSupply": f"{rng.randrange(10**6, 10**12)}.{rng.randrange(10**18):018d}",
        "logoUri": f"https://assets.example/{symbol.lower()}.png",
        "priceUsd": round(rng.uniform(0.01, 5000.0), 6),
    }


def _pool_template() -> tuple[bytes, bytes]:
    """A pool body split around its ``poolId`` value: (before, after)."""
    rng = random.Random(1)
    body = {
        "poolId": "@@ID@@",
        "baseToken": _token(rng, "WETH"),
        "quoteToken": _token(rng, "USDC"),
        "price": 3456.789012,
        "priceChange24h": -1.2345,
        "volume24h": 12345678.9,
        "tvl": 98765432.1,
    }
    before, after = orjson.dumps(body).split(b"@@ID@@")
    return before, after


_POOL_BEFORE, _POOL_AFTER = _pool_template()


def pool_body(pool_id: str) -> bytes:
    """The ``GET /api/clob/pools/{poolId}`` body for ``pool_id`` (about 600 bytes)."""
    return _POOL_BEFORE + orjson.dumps(pool_id)[1:-1] + _POOL_AFTER


def _order(rng: random.Random, index: int) -> dict[str, Any]:
    price = rng.randrange(1, 10**8)
    size = rng.randrange(1, 10**6)
    return {
        "transactionId": _hex(rng, 64),
        "poolId": f"pool-{index % 7}",
        "user": _hex(rng, 40),
        "side": "BUY" if rng.random() < 0.5 else "SELL",
        "price": f"{price // 10**4}.{price % 10**4:04d}",
        "size": f"{size // 10**3}.{size % 10**3:03d}",
        "filledSize": f"{rng.randrange(size + 1) / 10**3:.3f}",
        "status": _STATUSES[rng.randrange(len(_STATUSES))],
        "timestamp": 1_700_000_000_000 + index * 1_000,
    }


def order_fragments(seed: int = 2) -> list[bytes]:
    """The ring of pre-rendered order objects, each the JSON of one order."""
    rng = random.Random(seed)
    ring = [orjson.dumps(_order(rng, i)) for i in range(ORDER_RING)]
    assert all(f[_ID_AT + _ID_DIGITS : _ID_AT + _ID_DIGITS + 2] == b'",' for f in ring)
    return ring


def user_total(address: str) -> int:
    """How many orders a benchmark user has: ``bench-<N>`` has N, anyone else 1,000,000,000."""
    prefix, _, count = address.rpartition("-")
    if prefix == "bench" and count.isdigit():
        return int(count)
    return 10**9


def orders_page(ring: list[bytes], offset: int, limit: int, total: int) -> bytes:
    """The orders page at ``offset``: ``{"orders": [...], "cursor": "o<next>" | null}``."""
    end = min(offset + limit, total)
    n = len(ring)
    if end <= n:  # the ring's first pass, as rendered
        items = b",".join(ring[offset:end])
    else:  # past it, the ring's orders under transaction ids of their own (their index)
        items = b",".join(
            ring[i] if i < n else _renamed(ring[i % n], i) for i in range(offset, end)
        )
    cursor = b'"o%d"' % end if end < total else b"null"
    return b'{"orders":[' + items + b'],"cursor":' + cursor + b"}"


def _renamed(fragment: bytes, index: int) -> bytes:
    """``fragment`` with ``index`` as its transaction id (64 hex digits)."""
    return b"%s%064x%s" % (fragment[:_ID_AT], index, fragment[_ID_AT + _ID_DIGITS :])


def _entries() -> list[bytes]:
    rng = random.Random(3)
    scores = sorted((rng.uniform(0, 10**6) for _ in range(LEADERBOARD_ENTRIES)), reverse=True)
    return [
        orjson.dumps({"rank": i + 1, "address": _hex(rng, 40), "score": round(s, 4)})
        for i, s in enumerate(scores)
    ]


_ENTRIES: Final = _entries()


def leaderboard_page(page: int, limit: int) -> bytes:
    """One leaderboard page over a board of :data:`LEADERBOARD_ENTRIES` entries."""
    total = len(_ENTRIES)
    start = (page - 1) * limit
    items = b",".join(_ENTRIES[start : start + limit]) if start >= 0 else b""
    return b'{"leaderboard":[%s],"page":%d,"limit":%d,"total":%d,"totalPages":%d}' % (
        items,
        page,
        limit,
        total,
        -(-total // limit),
    )
