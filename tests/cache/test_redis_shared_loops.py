"""One ``RedisCache`` shared by clients on different event loops (two ``SyncClient``s, each on
its own thread and loop; a ``SyncClient`` and an async ``Client``): every call works as with
a cache of its own, the loops share its entries, and each loop's connections to Redis close
when that loop ends."""

from __future__ import annotations

import asyncio
import threading
from collections import Counter
from collections.abc import Callable, Iterator

import pytest
import redis

from asyncapi_client import Client, SyncClient
from asyncapi_client.fleet import RedisCache
from asyncapi_client.testing import FakeExchange, FakeServer

pytest_plugins = ("tests._redis",)

#: Calls each thread makes.
CALLS = 40
#: Every wait is bounded by this (seconds); none paces the test.
BOUND = 60.0
#: Generous: a question to Redis that ran out of time on a loaded machine would send the
#: calls of the next second to the server uncached, which is not what is tested here.
REDIS_TIMEOUT = 5.0


@pytest.fixture
def threaded_server() -> Iterator[FakeServer]:
    with FakeServer(FakeExchange.generate(seed=12)).in_thread() as server:
        yield server


def redis_connections(url: str) -> int:
    """Connections Redis has open, less the one asking."""
    with redis.Redis.from_url(url) as plain:
        return len(plain.client_list()) - 1


def in_threads(calls: list[Callable[[], object]]) -> list[BaseException]:
    """Run each of ``calls`` in a thread of its own, all at once; what they raised."""
    errors: list[BaseException] = []
    lock = threading.Lock()

    def run(call: Callable[[], object]) -> None:
        try:
            call()
        except BaseException as exc:
            with lock:
                errors.append(exc)

    threads = [threading.Thread(target=run, args=(call,)) for call in calls]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(BOUND)
    assert not any(thread.is_alive() for thread in threads), "a caller never finished"
    return errors


def caller(client: SyncClient, tokens: list[str]) -> Callable[[], object]:
    """Calls over a few keys, so the loops meet on each."""
    return lambda: [
        client.token_markets(tokens[n % len(tokens)]) if n % 2 else client.tokens()
        for n in range(CALLS)
    ]


def test_two_sync_clients_share_one_redis_cache(
    redis_url: str, threaded_server: FakeServer
) -> None:
    tokens = [t["address"] for t in threaded_server.exchange.tokens[:3]]
    cache = RedisCache(redis_url, name="two-sync", redis_timeout=REDIS_TIMEOUT)
    options = {
        "base_url": threaded_server.base_url,
        "testnet_base_url": threaded_server.testnet_base_url,
        "cache": cache,
        "coalesce": False,
    }
    with SyncClient(**options) as one, SyncClient(**options) as other:  # type: ignore[arg-type]
        errors = in_threads([caller(one, tokens), caller(other, tokens)] * 2)
        assert errors == []
    per_path = Counter(r.path for r in threaded_server.requests)
    assert len(per_path) == 1 + len(tokens)
    assert set(per_path.values()) == {1}, per_path  # one fetch per key, all loops together
    assert redis_connections(redis_url) == 0  # each loop closed what it opened
    asyncio.run(cache.aclose())


async def test_a_sync_client_and_an_async_client_share_one_redis_cache(
    redis_url: str, threaded_server: FakeServer
) -> None:
    tokens = [t["address"] for t in threaded_server.exchange.tokens[:3]]
    base, testnet = threaded_server.base_url, threaded_server.testnet_base_url
    async with (
        RedisCache(redis_url, name="sync-and-async", redis_timeout=REDIS_TIMEOUT) as cache,
        Client(base_url=base, testnet_base_url=testnet, cache=cache, coalesce=False) as client,
    ):
        with SyncClient(
            base_url=base, testnet_base_url=testnet, cache=cache, coalesce=False
        ) as sync:

            async def calls() -> None:
                for n in range(CALLS):
                    await (client.token_markets(tokens[n % 3]) if n % 2 else client.tokens())

            blocking = asyncio.to_thread(in_threads, [caller(sync, tokens)] * 2)
            async with asyncio.timeout(BOUND):
                *_, errors = await asyncio.gather(calls(), calls(), blocking)
            assert errors == []
    per_path = Counter(r.path for r in threaded_server.requests)
    assert set(per_path.values()) == {1}, per_path
    assert redis_connections(redis_url) == 0
