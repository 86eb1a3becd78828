"""Where asyncapi_client's time goes: ``python -m benchmarks._profile [pool|orders|decode]``.

* ``pool`` / ``orders``: cProfile of the client process over ``pool()`` calls (concurrency 1
  and 64) or 100-order ``orders()`` pages against the benchmark server; functions by own
  time, and own time summed by package (aiohttp, asyncio, asyncapi_client, cattrs, ...).
* ``decode``: a cost breakdown of decoding one 10,000-order page, step by step with
  ``time.process_time`` (no profiler overhead), then a cProfile of the decoder.

cProfile inflates small functions; read its numbers as shares, the breakdown as costs.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import gc
import io
import pstats
import re
import time
from collections import defaultdict
from collections.abc import Callable
from decimal import Decimal
from typing import Any

import orjson

from asyncapi_client import Client, Order, OrderStatus, Side
from asyncapi_client import _decode as decode_module
from asyncapi_client._decode import ORDERS_PAGE

from ._cases import _drive, decode_body
from ._server import ServerProcess, pin_cores

_GROUPS = (
    ("asyncapi_client/", "asyncapi_client"),
    ("cattrs", "cattrs (generated + hooks)"),
    ("aiohttp/", "aiohttp"),
    ("yarl/", "yarl"),
    ("multidict", "multidict"),
    ("asyncio/", "asyncio"),
    ("attrs", "attrs"),
    ("orjson", "orjson"),
    ("epoll", "epoll (waiting)"),
    ("_socket", "socket send/recv"),
)


def _group(filename: str, name: str) -> str:
    text = f"{filename}:{name}"
    for needle, group in _GROUPS:
        if needle in text:
            return group
    return "other"


def _report(profile: cProfile.Profile, title: str, top: int) -> None:
    stats = pstats.Stats(profile)
    raw: dict[Any, Any] = stats.stats  # type: ignore[attr-defined]
    total = sum(v[2] for v in raw.values())
    groups: dict[str, float] = defaultdict(float)
    for (filename, _line, name), (_cc, _nc, tottime, _ct, _callers) in raw.items():
        groups[_group(filename, name)] += tottime
    print(f"\n== {title}: own time by package (total {total:.3f} s under cProfile)")
    for group, seconds in sorted(groups.items(), key=lambda kv: -kv[1]):
        print(f"  {group:<28} {seconds:7.3f} s  {seconds / total:6.1%}")
    out = io.StringIO()
    pstats.Stats(profile, stream=out).sort_stats("tottime").print_stats(top)
    text = re.sub(r"/\S*/site-packages/", "", out.getvalue())
    print(f"\n== {title}: top {top} functions by own time")
    print(text[text.find("   ncalls") :])


def _profile_requests(operation: str, n: int, concurrency: int, top: int) -> None:
    with ServerProcess(_SERVER_CPU) as server:
        base = server.base_url

        async def run(profile: cProfile.Profile) -> float:
            async with Client(base_url=base, testnet_base_url=base) as client:
                if operation == "pool":
                    call: Callable[[str], Any] = client.pool
                    warm = [f"warm-{i}" for i in range(200)]
                    args = [f"pool-{i:05d}" for i in range(n)]
                else:

                    def call(cursor: str) -> Any:
                        return client.orders("0xbenchuser", limit=100, cursor=cursor)

                    warm = [f"o{i * 100}" for i in range(n, n + 200)]
                    args = [f"o{i * 100}" for i in range(n)]
                await _drive(call, warm, concurrency)
                gc.collect()
                start = time.process_time()
                profile.enable()
                await _drive(call, args, concurrency)
                profile.disable()
                return time.process_time() - start

        profile = cProfile.Profile()
        cpu = asyncio.run(run(profile))
        title = f"{operation}() x{n} at concurrency {concurrency}"
        print(f"\n{title}: {cpu / n * 1e6:.1f} us CPU/request under cProfile")
        _report(profile, title, top)


def _per_order(fn: Callable[[], object], orders: int, reps: int = 5) -> float:
    best = float("inf")
    for _ in range(reps):
        gc.collect()
        start = time.process_time()
        fn()
        best = min(best, time.process_time() - start)
    return best / orders * 1e6


def _profile_decode(top: int) -> None:
    n = 10_000
    body = decode_body(n)
    data = orjson.loads(body)
    wire = data["orders"]
    fast = decode_module._FAST
    hooks = {
        "Decimal": fast.get_structure_hook(Decimal),
        "str": fast.get_structure_hook(str),
        "Side": fast.get_structure_hook(Side),
        "OrderStatus": fast.get_structure_hook(OrderStatus),
        "number": fast.get_structure_hook(int | float),
    }
    decoded = ORDERS_PAGE(body).orders
    fields = [
        (o.transaction_id, o.pool_id, o.user, o.side, o.price, o.size, o.filled_size, o.status)
        for o in decoded
    ]
    texts = [(w["price"], w["size"], w["filledSize"]) for w in wire]
    pattern = decode_module._DECIMAL_TEXT
    side_map = dict(Side._value2member_map_)
    status_map = dict(OrderStatus._value2member_map_)
    steps: list[tuple[str, Callable[[], object]]] = [
        ("whole decode: ORDERS_PAGE(body)", lambda: ORDERS_PAGE(body)),
        ("  orjson.loads(body)", lambda: orjson.loads(body)),
        ("  _FAST.structure(dict, OrdersPage)", lambda: fast.structure(data, ORDERS_PAGE.cls)),
        (
            "    Order(...) x1 (frozen attrs __init__)",
            lambda: [Order(*f, 0) for f in fields],
        ),
        (
            "    3x _decimal hook (regex + Decimal)",
            lambda: [[hooks["Decimal"](t, Decimal) for t in ts] for ts in texts],
        ),
        ("    3x regex fullmatch only", lambda: [[pattern(t) for t in ts] for ts in texts]),
        ("    3x Decimal(str) only", lambda: [[Decimal(t) for t in ts] for ts in texts]),
        (
            "    2x enum hooks (Side, OrderStatus)",
            lambda: [
                (hooks["Side"](w["side"], Side), hooks["OrderStatus"](w["status"], OrderStatus))
                for w in wire
            ],
        ),
        (
            "    2x plain dict lookup (for comparison)",
            lambda: [(side_map[w["side"]], status_map[w["status"]]) for w in wire],
        ),
        (
            "    3x str hook",
            lambda: [
                (
                    hooks["str"](w["transactionId"], str),
                    hooks["str"](w["poolId"], str),
                    hooks["str"](w["user"], str),
                )
                for w in wire
            ],
        ),
        ("    1x number hook", lambda: [hooks["number"](w["timestamp"], None) for w in wire]),
        ("    9x dict item lookups (w[...])", lambda: [_lookups(w) for w in wire]),
    ]
    print(f"\n== decode of {n:,} orders ({len(body):,} bytes): CPU us per order, best of 5")
    for label, fn in steps:
        print(f"  {label:<44} {_per_order(fn, n):7.3f}")
    profile = cProfile.Profile()
    profile.enable()
    for _ in range(3):
        ORDERS_PAGE(body)
    profile.disable()
    _report(profile, "ORDERS_PAGE(body) x3", top)


def _lookups(w: dict[str, Any]) -> tuple[Any, ...]:
    return (
        w["transactionId"],
        w["poolId"],
        w["user"],
        w["side"],
        w["price"],
        w["size"],
        w["filledSize"],
        w["status"],
        w["timestamp"],
    )


_SERVER_CPU: int | None = None


def main() -> None:
    global _SERVER_CPU
    _SERVER_CPU = pin_cores()[1]
    parser = argparse.ArgumentParser(prog="python -m benchmarks._profile")
    parser.add_argument("what", nargs="*", choices=["pool", "orders", "decode"], default=[])
    parser.add_argument("--top", type=int, default=30)
    args = parser.parse_args()
    what = args.what or ["pool", "orders", "decode"]
    if "pool" in what:
        _profile_requests("pool", 3000, 1, args.top)
        _profile_requests("pool", 3000, 64, args.top)
    if "orders" in what:
        _profile_requests("orders", 1000, 1, args.top)
    if "decode" in what:
        _profile_decode(args.top)


if __name__ == "__main__":
    main()
