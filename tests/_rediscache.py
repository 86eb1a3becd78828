"""What our Redis users leave in a real Redis: its keys with their TTLs, the script calls it
ran, and a bounded wait for the processes registered as waiting for a fetch. Shared by the
one-process and the fleet tests of the cache and the limiter, and the benchmarks."""

from __future__ import annotations

import asyncio

import redis.asyncio as aredis

__all__ = ["WAIT", "keys_and_ttls", "script_calls", "until_waiting"]

#: How long a condition on Redis may take to hold on a loaded machine (a bound, not a pace).
WAIT = 20.0


async def keys_and_ttls(url: str) -> dict[bytes, int]:
    """Every key in the Redis at ``url`` with its time to live in ms (``-1``: it never expires)."""
    redis = aredis.Redis.from_url(url)
    try:
        return {key: await redis.pttl(key) async for key in redis.scan_iter(match="*")}
    finally:
        await redis.aclose()


async def until_waiting(url: str, count: int) -> None:
    """Until ``count`` processes are registered as waiting for a fetch (a bounded poll of
    Redis: nothing there notifies the test)."""
    redis = aredis.Redis.from_url(url)
    try:
        async with asyncio.timeout(WAIT):
            while True:
                waiting = 0
                async for key in redis.scan_iter(match="asyncapi_client:cache:*:w:*"):
                    waiting += await redis.llen(key)
                if waiting >= count:
                    return
                await asyncio.sleep(0.005)
    finally:
        await redis.aclose()


async def script_calls(client: aredis.Redis) -> int:
    """Script calls Redis has run so far (its own count, ``INFO commandstats``): the round
    trips of the limiters and caches, counted where they land."""
    stats = await client.info("commandstats")
    return sum(
        int(stats.get(f"cmdstat_{name}", {}).get("calls", 0)) for name in ("evalsha", "eval")
    )
