"""The memory case, run in a fresh process: peak RSS growth over a long cursor walk.

``python -m benchmarks._memory --base-url URL --orders N --page-size P --contender NAME``
prints one JSON line. The baseline RSS is taken after imports, a warm-up walk of two pages
of 10 orders and ``gc.collect()``; the peak is the larger of a 1 ms RSS sampler and the kernel's
high-water mark (``VmHWM``, reset to the baseline through ``/proc/self/clear_refs``).
``ru_maxrss`` is not used: Linux carries it over from the parent across fork and exec.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import threading
import time
from typing import Any

import aiohttp
import orjson
import psutil  # type: ignore[import-untyped]

from asyncapi_client import Client, MemoryCache

#: The cached walk's cache: every page stored (orders fresh 5 minutes), at most this much.
CACHE_BYTES = 16 * 2**20


class _Sampler(threading.Thread):
    """Polls this process's RSS every millisecond and keeps the maximum."""

    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.peak = 0
        self._done = threading.Event()
        self._process = psutil.Process()

    def run(self) -> None:
        while not self._done.wait(0.001):
            rss = self._process.memory_info().rss
            if rss > self.peak:
                self.peak = rss

    def stop(self) -> None:
        self._done.set()
        self.join()


async def _walk_ours(base_url: str, address: str, page_size: int) -> int:
    count = 0
    async with Client(base_url=base_url, testnet_base_url=base_url) as client:
        async for _order in client.iter_orders(address, page_size=page_size):
            count += 1
    return count


async def _walk_cached(base_url: str, address: str, page_size: int) -> int:
    """The walk with every page of orders cached: memory bounded by ``max_bytes``."""
    count = 0
    cache = MemoryCache(ttl={"orders": 300.0}, max_bytes=CACHE_BYTES)
    async with Client(base_url=base_url, testnet_base_url=base_url, cache=cache) as client:
        async for _order in client.iter_orders(address, page_size=page_size):
            count += 1
    assert cache.bytes <= CACHE_BYTES
    return count


async def _walk_raw(base_url: str, address: str, page_size: int) -> int:
    count = 0
    url = f"{base_url}/api/clob/users/{address}/orders?limit={page_size}"
    async with aiohttp.ClientSession() as session:
        cursor: str | None = None
        while True:
            async with session.get(url + (f"&cursor={cursor}" if cursor else "")) as response:
                page = orjson.loads(await response.read())
            for _order in page["orders"]:
                count += 1
            cursor = page["cursor"]
            if not cursor or not page["orders"]:
                return count


def _reset_high_water_mark() -> bool:
    """Reset the kernel's peak RSS of this process to its current RSS (Linux >= 4.0)."""
    try:
        with open("/proc/self/clear_refs", "w", encoding="ascii") as clear:
            clear.write("5")
    except OSError:
        return False
    return True


def _high_water_mark() -> int:
    """The kernel's peak RSS of this process in bytes (``VmHWM``), 0 when unknown."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


_WALKS = {
    "asyncapi_client": _walk_ours,
    "raw aiohttp+orjson": _walk_raw,
    "asyncapi_client, orders cached": _walk_cached,
}


def measure(base_url: str, contender: str, orders: int, page_size: int) -> dict[str, Any]:
    walk = _WALKS[contender]
    # Warm the code paths (lazy imports, first connection) with two tiny pages, so the growth
    # measured includes the working set of full pages, not only what exceeds a first one.
    warm = asyncio.run(walk(base_url, "bench-20", 10))
    assert warm == 20, warm
    gc.collect()
    process = psutil.Process()
    rss_before = process.memory_info().rss
    hwm_reset = _reset_high_water_mark()
    sampler = _Sampler()
    sampler.start()
    cpu = time.process_time()
    wall = time.perf_counter()
    count = asyncio.run(walk(base_url, f"bench-{orders}", page_size))
    wall = time.perf_counter() - wall
    cpu = time.process_time() - cpu
    sampler.stop()
    hwm = _high_water_mark() if hwm_reset else 0
    peak = max(sampler.peak, hwm)
    return {
        "contender": contender,
        "orders": count,
        "page_size": page_size,
        "rss_before_mb": rss_before / 2**20,
        "peak_rss_mb": peak / 2**20,
        "sampled_peak_mb": sampler.peak / 2**20,
        "vm_hwm_mb": hwm / 2**20 if hwm_reset else None,
        "growth_mb": (peak - rss_before) / 2**20,
        "wall_s": wall,
        "cpu_s": cpu,
    }


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks._memory")
    parser.add_argument("--base-url", required=True)
    parser.add_argument("--contender", choices=sorted(_WALKS), default="asyncapi_client")
    parser.add_argument("--orders", type=int, default=1_000_000)
    parser.add_argument("--page-size", type=int, default=1_000)
    parser.add_argument("--cpu", type=int, default=None)
    args = parser.parse_args()
    if args.cpu is not None:
        os.sched_setaffinity(0, {args.cpu})
    result = measure(args.base_url, args.contender, args.orders, args.page_size)
    print(orjson.dumps(result).decode(), flush=True)


if __name__ == "__main__":
    main()
