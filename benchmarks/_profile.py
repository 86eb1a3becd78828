"""Where asyncapi_client's time goes: ``python -m benchmarks._profile [pool|orders|decode]``.

* ``pool`` / ``orders``: cProfile of the client process over ``pool()`` calls (concurrency 1
  and 64) or 100-order ``orders()`` pages against the benchmark server; functions by own
  time, and own time summed by package (aiohttp, asyncio, asyncapi_client, cattrs, ...).
* ``decode``: the stages of decoding one 10,000-order page (``benchmarks._stages``, no
  profiler overhead), then a cProfile of each decode path.

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
from typing import Any

from asyncapi_client import Client
from asyncapi_client._decode import ORDERS_PAGE

from . import _calls, _stages
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
    ("msgspec", "msgspec (parse, convert)"),
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
                if operation == "pool":  # the 64 cycled ids of pool-c1/pool-c64
                    call: Callable[[str], Any] = client.pool
                    warm_lists = _calls.work(200, concurrency, "cycle")
                    await _calls.drive(call, warm_lists, concurrency)
                    lists = _calls.work(n, concurrency, "cycle")
                    gc.collect()
                    start = time.process_time()
                    profile.enable()
                    await _calls.drive(call, lists, concurrency)
                    profile.disable()
                    return time.process_time() - start
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


def _profile_decode(top: int) -> None:
    """The stage table of ``benchmarks._stages``, then cProfile of both decode paths."""
    n = 10_000
    body = decode_body(n)
    _stages._time(_stages._stages(body), rounds=5, reps=3, n=n)
    for title, decode in (
        ("ORDERS_PAGE(body) x3 (accelerated)", ORDERS_PAGE),
        ("ORDERS_PAGE.general(body) x3 (orjson + generated functions)", ORDERS_PAGE.general),
    ):
        profile = cProfile.Profile()
        profile.enable()
        for _ in range(3):
            decode(body)
        profile.disable()
        _report(profile, title, top)


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
