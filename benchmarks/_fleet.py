"""The ``limiter`` case: what a fleet's RedisLimiter adds per request over the LocalLimiter.

``pool()`` calls at concurrency 1 through a Client whose limiter is a ``LocalLimiter`` or a
``RedisLimiter`` on a redis-server on loopback, with the same rate (one that never binds, so
every request takes the limiter's full path and nothing waits). Rounds are interleaved
(local, redis, local, redis, ...); per round, the Redis run's CPU and wall time per request
are divided by the local run's, and the wall-time difference is the latency Redis adds.
"""

from __future__ import annotations

import asyncio
import gc
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Final

from asyncapi_client import Client, LocalLimiter, Network, Rate
from asyncapi_client.fleet import RedisLimiter
from tests._redis import RedisServer

from ._server import ServerProcess
from ._stats import per_round_ratios, spread, summary

__all__ = ["limiter"]

#: A quota the benchmark never reaches: the limiter is asked, and always answers "go".
RATE: Final = Rate(100_000, 1.0)
ROUNDS: Final = 7
QUICK_ROUNDS: Final = 3


def _once(server: ServerProcess, redis_url: str | None, n: int, warmup: int) -> dict[str, float]:
    async def run() -> tuple[float, float, float, float]:
        limiter: LocalLimiter | RedisLimiter = (
            LocalLimiter([RATE])
            if redis_url is None
            else RedisLimiter(redis_url, [RATE], name=f"bench-{time.monotonic_ns()}")
        )
        try:
            async with Client(base_url=server.base_url, limiter=limiter) as client:
                for i in range(warmup):
                    await client.pool(f"warm-{i}")
                gc.collect()
                cpu, wall = time.process_time(), time.perf_counter()
                for i in range(n):
                    await client.pool(f"pool-{i:05d}")
                cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
            # the question alone, without HTTP: what the limiter adds to every attempt
            gc.collect()
            ask_cpu, ask_wall = time.process_time(), time.perf_counter()
            for _ in range(n):
                await limiter.acquire("pool", Network.MAINNET)
            ask_cpu, ask_wall = time.process_time() - ask_cpu, time.perf_counter() - ask_wall
            return cpu, wall, ask_cpu, ask_wall
        finally:
            if isinstance(limiter, RedisLimiter):
                await limiter.aclose()

    server.stats(reset=True)
    cpu, wall, ask_cpu, ask_wall = asyncio.run(run())
    seen = server.stats()
    if seen != n + warmup:
        raise RuntimeError(f"the server saw {seen} requests, expected {n + warmup}")
    return {
        "cpu_us": cpu / n * 1e6,
        "wall_us": wall / n * 1e6,
        "ask_cpu_us": ask_cpu / n * 1e6,
        "ask_wall_us": ask_wall / n * 1e6,
    }


def limiter(cfg: Any, server: ServerProcess) -> dict[str, Any]:
    """Run the case (``cfg``: the suite's Config; only ``quick`` and ``warmup`` are read)."""
    n = 200 if cfg.quick else 1_000
    rounds = QUICK_ROUNDS if cfg.quick else ROUNDS
    local: list[dict[str, float]] = []
    redis: list[dict[str, float]] = []
    with tempfile.TemporaryDirectory(prefix="bench-redis-") as directory:
        redis_server = RedisServer(Path(directory))
        redis_server.start()
        try:
            for r in range(rounds):
                local.append(_once(server, None, n, cfg.warmup))
                redis.append(_once(server, redis_server.url, n, cfg.warmup))
                a, b = local[-1], redis[-1]
                print(
                    f"  limiter round {r + 1} (us per request, CPU/wall): local "
                    f"{a['cpu_us']:.1f}/{a['wall_us']:.1f}, redis {b['cpu_us']:.1f}/"
                    f"{b['wall_us']:.1f}; acquire() alone: local {a['ask_cpu_us']:.1f}/"
                    f"{a['ask_wall_us']:.1f}, redis {b['ask_cpu_us']:.1f}/{b['ask_wall_us']:.1f}",
                    file=sys.stderr,
                    flush=True,
                )
        finally:
            redis_server.stop()

    def series(runs: list[dict[str, float]], key: str) -> list[float]:
        return [x[key] for x in runs]

    def ratio(key: str) -> dict[str, Any]:
        return summary(per_round_ratios(series(redis, key), series(local, key)))

    def added(key: str) -> dict[str, Any]:
        return summary([b[key] - a[key] for a, b in zip(local, redis, strict=True)])

    title = f"limiter, x{n:,} at concurrency 1"

    def row(what: str, key: str) -> dict[str, str]:
        return {
            "case": f"{title}: {what}",
            "asyncapi_client": f"RedisLimiter {spread(summary(series(redis, key)), 1, ' us')}",
            "baseline": f"LocalLimiter {spread(summary(series(local, key)), 1, ' us')}",
            "ratio": f"{spread(ratio(key))}; added {spread(added(key), 1, ' us')}",
            "target": "(info)",
            "result": "info",
        }

    return {
        "title": title,
        "rounds": {"local": local, "redis": redis},
        "ratios": {key: ratio(key) for key in local[0]},
        "added_us": {key: added(key) for key in local[0]},
        "pass": None,
        "rows": [
            row("client CPU per request", "cpu_us"),
            row("latency per request", "wall_us"),
            row("acquire() alone, client CPU", "ask_cpu_us"),
            row("acquire() alone, latency", "ask_wall_us"),
        ],
    }
