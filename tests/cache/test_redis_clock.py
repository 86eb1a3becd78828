"""A ``RedisCache`` measures ages on the Redis server's clock: a step of this machine's wall
clock (forward or back) changes neither what is fresh nor how long ``stale_if_error`` serves,
and entries stored by a process whose clock is an hour off are fresh for the others."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator

import orjson
import pytest
import redis.asyncio as aredis

from asyncapi_client import ServerError
from asyncapi_client.fleet import RedisCache
from asyncapi_client.testing import FakeExchange, FakeServer, Reply
from tests._cache_redis import client_for, entry_key, report, run_in, worker

pytest_plugins = ("tests._redis",)

#: Generous: a question to Redis that ran out of time on a loaded machine would send the
#: calls of the next second to the server uncached, which is not what is tested here.
REDIS_TIMEOUT = 5.0

HOUR = 3600.0


@pytest.fixture
async def server() -> AsyncIterator[FakeServer]:
    async with FakeServer(FakeExchange.generate(seed=10)) as started:
        yield started


def step_wall_clock(monkeypatch: pytest.MonkeyPatch, seconds: float) -> None:
    """This process's wall clock (``time.time``) jumps by ``seconds``, as an NTP step does."""
    real = time.time
    monkeypatch.setattr(time, "time", lambda: real() + seconds)


@pytest.mark.parametrize("step", [HOUR, -HOUR], ids=["forward", "back"])
async def test_a_fresh_entry_stays_fresh_when_the_wall_clock_steps(
    server: FakeServer, redis_url: str, monkeypatch: pytest.MonkeyPatch, step: float
) -> None:
    async with (
        RedisCache(redis_url, name="clock", redis_timeout=REDIS_TIMEOUT) as cache,
        client_for(server, cache) as client,
    ):
        first = await client.with_response.tokens()
        step_wall_clock(monkeypatch, step)
        again = await client.with_response.tokens()
    assert (first.cache, again.cache) == ("miss", "hit")
    assert len(server.requests) == 1


async def test_stale_if_error_holds_its_bound_when_the_wall_clock_steps_back(
    server: FakeServer, redis_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    server.script("tokens", Reply(200), Reply(503), repeat=True)
    key = entry_key("clock", server)
    redis = aredis.Redis.from_url(redis_url)
    async with (
        RedisCache(
            redis_url, name="clock", redis_timeout=REDIS_TIMEOUT, stale_if_error=30.0
        ) as cache,
        client_for(server, cache) as client,
    ):
        await client.tokens()
        await cache._written()  # stored in the background
        # the entry was stored 100 s ago (on Redis's clock) and was fresh for 10 s: 90 s
        # stale, past the 30 s that stale_if_error allows
        seconds, micros = await redis.time()
        stored = await redis.hget(key, "m")
        assert isinstance(stored, bytes)
        meta = {**orjson.loads(stored), "t": seconds + micros / 1e6 - 100.0, "f": 10.0}
        await redis.hset(key, "m", orjson.dumps(meta))
        step_wall_clock(monkeypatch, -HOUR)
        with pytest.raises(ServerError):
            await client.tokens()
    await redis.aclose()


async def test_an_entry_stored_by_a_process_an_hour_ahead_is_fresh_for_the_others(
    server: FakeServer, redis_url: str
) -> None:
    config = {
        "redis": redis_url,
        "name": "clock",
        "base_url": server.base_url,
        "testnet_base_url": server.testnet_base_url,
        "tokens": [],
        "timeout": 10.0,
    }
    ahead = ["import time", "real = time.time", f"time.time = lambda: real() + {HOUR}"]
    with worker(ahead) as member:
        run_in(member, config)
        done = await report(member)
    assert done["states"] == {"miss": 1}
    async with (
        RedisCache(redis_url, name="clock", redis_timeout=REDIS_TIMEOUT) as cache,
        client_for(server, cache) as client,
    ):
        answer = await client.with_response.tokens()
    assert answer.cache == "hit"
    assert len(server.requests) == 1
