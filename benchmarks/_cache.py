"""The ``cache`` case: what a cache hit costs next to a request to the loopback server.

``pool()`` calls at concurrency 1 through three clients in the same rounds: no cache (each
call a request), a ``MemoryCache`` answering ``pool`` (every call a hit), and a
``RedisCache`` on a redis-server on loopback (every call a hit read from Redis). Per round,
client CPU and latency per call; the ratios are request / hit within each round. Also per
round: one raw ``HMGET`` round trip to the same Redis and the decode of the same body alone,
the floor a Redis hit is measured against. The server's request count confirms that hits
sent nothing.
"""

from __future__ import annotations

import asyncio
import gc
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final

import redis.asyncio as aredis

from asyncapi_client import Client, MemoryCache
from asyncapi_client._decode import POOL
from asyncapi_client._operations import OperationName
from asyncapi_client.fleet import RedisCache
from tests._redis import RedisServer

from ._server import ServerProcess
from ._stats import per_round_ratios, spread, summary

__all__ = ["cache"]

ROUNDS: Final = 7
QUICK_ROUNDS: Final = 3
TTL: Final[dict[OperationName, float]] = {"pool": 3600.0}
POOL_ID: Final = "pool-cached"


def _round(server: ServerProcess, redis_url: str, n: int, warmup: int) -> dict[str, float]:
    async def run() -> dict[str, float]:
        out: dict[str, float] = {}
        name = f"bench-{time.monotonic_ns()}"
        redis = aredis.Redis.from_url(redis_url)
        async with (
            RedisCache(redis_url, name=name, ttl=TTL) as shared,
            Client(base_url=server.base_url) as plain,
            Client(base_url=server.base_url, cache=MemoryCache(TTL)) as memory,
            Client(base_url=server.base_url, cache=shared) as fleet,
        ):
            for client in (plain, memory, fleet):
                for _ in range(warmup):
                    await client.pool(POOL_ID)
            body = (await plain.with_response.pool(POOL_ID)).content
            await redis.hset("bench-raw", mapping={"b": body, "m": b"{}"})

            async def raw_hmget() -> object:
                return await redis.hmget("bench-raw", ["b", "m"])

            async def decode() -> object:
                return POOL(body)

            server.stats(reset=True)
            contenders: dict[str, Callable[[], Any]] = {
                "request": lambda: plain.pool(POOL_ID),
                "memory hit": lambda: memory.pool(POOL_ID),
                "redis hit": lambda: fleet.pool(POOL_ID),
                "HMGET alone": raw_hmget,
                "decode alone": decode,
            }
            for label, call in contenders.items():
                gc.collect()
                cpu, wall = time.process_time(), time.perf_counter()
                for _ in range(n):
                    await call()
                out[f"{label} cpu_us"] = (time.process_time() - cpu) / n * 1e6
                out[f"{label} wall_us"] = (time.perf_counter() - wall) / n * 1e6
            seen = server.stats()
            if seen != n:
                raise RuntimeError(f"the server saw {seen} requests, expected {n} (hits send none)")
            assert (await memory.with_response.pool(POOL_ID)).cache == "hit"
            assert (await fleet.with_response.pool(POOL_ID)).cache == "hit"
        await redis.delete("bench-raw")
        await redis.aclose()
        return out

    return asyncio.run(run())


def cache(cfg: Any, server: ServerProcess) -> dict[str, Any]:
    """Run the case (``cfg``: the suite's Config; only ``quick`` and ``warmup`` are read)."""
    n = 300 if cfg.quick else 2_000
    rounds = QUICK_ROUNDS if cfg.quick else ROUNDS
    runs: list[dict[str, float]] = []
    with tempfile.TemporaryDirectory(prefix="bench-redis-") as directory:
        redis_server = RedisServer(Path(directory))
        redis_server.start()
        try:
            for r in range(rounds):
                runs.append(_round(server, redis_server.url, n, cfg.warmup))
                x = runs[-1]
                print(
                    f"  cache round {r + 1} (us per call, CPU/wall): request "
                    f"{x['request cpu_us']:.1f}/{x['request wall_us']:.1f}, memory hit "
                    f"{x['memory hit cpu_us']:.1f}/{x['memory hit wall_us']:.1f}, redis hit "
                    f"{x['redis hit cpu_us']:.1f}/{x['redis hit wall_us']:.1f}, HMGET "
                    f"{x['HMGET alone cpu_us']:.1f}/{x['HMGET alone wall_us']:.1f}, decode "
                    f"{x['decode alone cpu_us']:.1f}",
                    file=sys.stderr,
                    flush=True,
                )
        finally:
            redis_server.stop()

    def series(key: str) -> list[float]:
        return [x[key] for x in runs]

    def per_call(key: str) -> str:
        return spread(summary(series(key)), 1, " us")

    def ratio(of: str, to: str) -> dict[str, Any]:
        return summary(per_round_ratios(series(of), series(to)))

    title = f"cache hits vs a request, pool() x{n:,} at concurrency 1"
    memory_cpu = ratio("request cpu_us", "memory hit cpu_us")
    ok = memory_cpu["median"] >= 20.0
    redis_floor = [
        x["redis hit wall_us"] - x["HMGET alone wall_us"] - x["decode alone wall_us"] for x in runs
    ]
    rows = []
    for hit in ("memory hit", "redis hit"):
        for what, unit in (("client CPU", "cpu_us"), ("latency", "wall_us")):
            target = "request >= 20x" if (hit, unit) == ("memory hit", "cpu_us") else "(info)"
            rows.append(
                {
                    "case": f"{title}: {hit}, {what} per call",
                    "asyncapi_client": f"{hit} {per_call(f'{hit} {unit}')}",
                    "baseline": f"request {per_call(f'request {unit}')}",
                    "ratio": f"request / hit {spread(ratio(f'request {unit}', f'{hit} {unit}'))}",
                    "target": target,
                    "result": ("pass" if ok else "FAIL") if target != "(info)" else "info",
                }
            )
    rows.append(
        {
            "case": f"{title}: redis hit latency over one HMGET round trip + the decode",
            "asyncapi_client": f"{spread(summary(redis_floor), 1, ' us')} more",
            "baseline": f"HMGET {spread(summary(series('HMGET alone wall_us')), 1, ' us')}, "
            f"decode {spread(summary(series('decode alone wall_us')), 1, ' us')}",
            "ratio": "-",
            "target": "(info)",
            "result": "info",
        }
    )
    return {
        "title": title,
        "rounds": runs,
        "ratios": {
            "request/memory hit cpu": memory_cpu,
            "request/memory hit wall": ratio("request wall_us", "memory hit wall_us"),
            "request/redis hit cpu": ratio("request cpu_us", "redis hit cpu_us"),
            "request/redis hit wall": ratio("request wall_us", "redis hit wall_us"),
        },
        "target": {"request/memory hit cpu": 20.0},
        "pass": ok,
        "rows": rows,
    }
