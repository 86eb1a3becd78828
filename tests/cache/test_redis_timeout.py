"""A ``RedisCache`` never costs a call more than ``redis_timeout`` when Redis does not answer
(frozen with SIGSTOP), never makes the caller who has the answer wait for its store, and a
caller waiting for another process's fetch waits no longer than that fetcher's lock lives:
woken when the lock is gone (its holder SIGKILLed) or when anyone stores the entry.

The server holds requests at a gate, so calls are in flight together by construction.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

import pytest
import redis.asyncio as aredis

from asyncapi_client.fleet import RedisCache
from asyncapi_client.testing import FakeExchange, FakeServer
from tests._cache_redis import WAIT, client_for, frozen, run_in, until_waiting, worker

if TYPE_CHECKING:
    from tests._redis import RedisServer

pytest_plugins = ("tests._redis",)

#: How much later than its bound a call may end on a loaded machine (seconds).
SLACK = 1.0
#: The default bound of each question to Redis.
REDIS_TIMEOUT = 0.5


@pytest.fixture
async def server() -> AsyncIterator[FakeServer]:
    async with FakeServer(FakeExchange.generate(seed=8)) as started:
        yield started


def tokens_requests(server: FakeServer) -> int:
    return sum(1 for r in server.requests if r.operation == "tokens")


def worker_config(server: FakeServer, url: str, timeout: float) -> dict[str, Any]:
    """One ``tokens`` call, with the attempt timeout ``timeout`` (its lock lives that long
    and ``redis_timeout`` more)."""
    return {
        "redis": url,
        "name": "bots",
        "base_url": server.base_url,
        "testnet_base_url": server.testnet_base_url,
        "tokens": [],
        "timeout": timeout,
    }


async def test_a_frozen_redis_adds_at_most_redis_timeout_to_a_call(
    server: FakeServer, own_redis: RedisServer
) -> None:
    async with (
        RedisCache(own_redis.url, name="bots") as cache,
        client_for(server, cache, timeout=10.0) as client,
    ):
        await client.token_markets(server.exchange.tokens[0]["address"])  # connected
        with frozen(own_redis):
            started = time.monotonic()
            answer = await client.with_response.tokens(deadline=2.0)
            took = time.monotonic() - started
    assert answer.cache == "miss"
    assert took < REDIS_TIMEOUT + SLACK


async def test_the_caller_with_the_answer_does_not_wait_for_its_store(
    server: FakeServer, own_redis: RedisServer
) -> None:
    redis_timeout = 2.0
    cache = RedisCache(own_redis.url, name="bots", redis_timeout=redis_timeout)
    async with client_for(server, cache, timeout=10.0) as client:
        with server.gate("tokens") as gate:
            call = asyncio.create_task(client.with_response.tokens())
            await gate.arrived(1)  # it asked Redis and took the lock; now Redis stops
            with frozen(own_redis):
                released = time.monotonic()
                gate.release()
                answer = await call
                took = time.monotonic() - released
                # its store is pending: closing the cache ends it (it gives up in time)
                async with asyncio.timeout(2 * redis_timeout + SLACK):
                    await cache.aclose()
    assert answer.cache == "miss"
    assert took < redis_timeout - SLACK
    running = [getattr(t.get_coro(), "__qualname__", "") for t in asyncio.all_tasks()]
    assert not [name for name in running if name.startswith("RedisCache.")]


async def test_a_store_under_way_when_a_script_s_loop_ends_is_made_all_the_same(
    server: FakeServer, redis_url: str
) -> None:
    """``asyncio.run`` (and a ``SyncClient``'s ``close()``) cancels every task of its loop as
    it ends: a store under way then is made again, so a script's last answers are kept."""
    cache = RedisCache(redis_url, name="script", redis_timeout=5.0)

    async def script() -> None:  # the cache is never closed; the loop ends after the call
        async with client_for(server, cache) as client:
            await client.tokens()

    redis = aredis.Redis.from_url(redis_url)
    try:
        with server.gate("tokens") as gate:
            ran = asyncio.ensure_future(asyncio.to_thread(asyncio.run, script()))
            await gate.arrived(1)  # it read and took the lock; its store comes next
            await redis.client_pause(1000, all=False)  # Redis holds every write for 1 s
            gate.release()
            async with asyncio.timeout(WAIT):
                await ran
        async with (
            RedisCache(redis_url, name="script") as other,
            client_for(server, other) as reader,
        ):
            answer = await reader.with_response.tokens()
    finally:
        await redis.aclose()
    assert answer.cache == "hit"
    assert tokens_requests(server) == 1


async def test_a_warning_names_redis_and_the_cause(
    server: FakeServer, own_redis: RedisServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="asyncapi_client")
    async with (
        RedisCache(own_redis.url, name="bots") as cache,
        client_for(server, cache) as client,
    ):
        await client.token_markets(server.exchange.tokens[0]["address"])  # connected
        with frozen(own_redis):
            await client.tokens()
    (warning,) = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert own_redis.url in warning
    assert "(TimeoutError: no answer within 0.5s)" in warning


@pytest.mark.waits
async def test_a_killed_fetcher_holds_its_key_no_longer_than_its_lock_lives(
    server: FakeServer, redis_url: str
) -> None:
    lock_life = 2.0 + REDIS_TIMEOUT  # the fetcher's attempt timeout and redis_timeout
    async with (
        RedisCache(redis_url, name="bots") as cache,
        client_for(server, cache, timeout=30.0) as client,
    ):
        with worker() as fetcher, server.gate("tokens") as gate:
            run_in(fetcher, worker_config(server, redis_url, timeout=2.0))
            await gate.arrived(1)  # it holds the fetch lock
            locked = time.monotonic()
            waiter = asyncio.create_task(client.with_response.tokens())
            await until_waiting(redis_url, 1)
            fetcher.kill()
            await gate.arrived(2, timeout=WAIT)  # the waiter's own request, once the lock is gone
            waited = time.monotonic() - locked
            gate.release()
            answer = await waiter
    assert answer.cache == "miss"
    assert lock_life - SLACK < waited < lock_life + SLACK


@pytest.mark.waits
async def test_an_entry_stored_by_anyone_wakes_those_who_wait(
    server: FakeServer, redis_url: str
) -> None:
    async with (
        RedisCache(redis_url, name="bots") as one,
        RedisCache(redis_url, name="bots") as two,
        client_for(server, one, timeout=2.0) as impatient,
        client_for(server, two, timeout=30.0) as patient,
    ):
        with worker() as fetcher, server.gate("tokens") as gate:
            run_in(fetcher, worker_config(server, redis_url, timeout=30.0))
            await gate.arrived(1)  # it holds the fetch lock, for half a minute
            fetcher.kill()
            first = asyncio.create_task(impatient.with_response.tokens())
            second = asyncio.create_task(patient.with_response.tokens())
            await until_waiting(redis_url, 2)
            await gate.arrived(2, timeout=WAIT)  # one gave up waiting and fetches itself
            gate.release()
            answer = await first
            async with asyncio.timeout(5.0):  # woken by that store, not the dead lock's end
                woken = await second
    assert (answer.cache, woken.cache) == ("miss", "hit")
    assert woken.value == answer.value
    assert tokens_requests(server) == 2  # the killed fetcher's and the impatient one's


@pytest.mark.parametrize("value", [0, -1.0, float("inf"), float("nan"), "0.5", True, None])
def test_a_redis_timeout_that_is_not_a_positive_number_of_seconds_is_refused(
    value: object,
) -> None:
    with pytest.raises(ValueError, match="redis_timeout must be a finite number of seconds > 0"):
        RedisCache("redis://127.0.0.1:6379/0", name="x", redis_timeout=value)  # type: ignore[arg-type]
