"""Pins the types of cached reference data for mypy --strict (type-checked only, never run)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import redis.asyncio as aredis

from asyncapi_client import Client, MemoryCache, Response, Token
from asyncapi_client.fleet import RedisCache


async def cached(redis: aredis.Redis) -> None:
    memory = MemoryCache({"tokens": 300.0, "token_markets": 60.0}, max_entries=100)
    MemoryCache(stale_if_error=30.0)
    MemoryCache(ttl={"pool": 1})
    shared = RedisCache("redis://127.0.0.1:6379/0", name="bots", ttl={"tokens": 60.0})
    RedisCache(redis, name="bots", stale_if_error=5.0)
    async with Client(cache=memory) as client, Client(cache=shared) as other:
        answer: Response[Sequence[Token]] = await client.with_response.tokens()
        where: Literal["miss", "hit", "revalidated", "stale"] | None = answer.cache
        tokens: Sequence[Token] = await other.tokens()
    await memory.clear()
    await shared.clear()
    owns: bool = shared.owns_client
    await shared.aclose()
    del where, tokens, owns
