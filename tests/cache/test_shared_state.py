"""State a cache shares: between deployments (the key holds the full URL), between clients
on several event loops (two SyncClients on their own threads), and in memory (``max_bytes``
bounds the stored bodies)."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest

from asyncapi_client import Client, MemoryCache, SyncClient
from asyncapi_client.fleet import RedisCache
from asyncapi_client.testing import FakeExchange, FakeServer

pytest_plugins = ("tests._redis",)


@pytest.fixture
async def deployments() -> AsyncIterator[tuple[FakeServer, FakeServer]]:
    """Two deployments of the API (production and staging) with different tokens."""
    async with (
        FakeServer(FakeExchange.generate(seed=1)) as production,
        FakeServer(FakeExchange.generate(seed=2)) as staging,
    ):
        yield production, staging


def symbols(tokens: Any) -> list[str]:
    return [t.symbol for t in tokens]


@pytest.mark.parametrize("backend", ["memory", "redis"])
async def test_two_deployments_never_share_an_entry(
    deployments: tuple[FakeServer, FakeServer], backend: str, request: pytest.FixtureRequest
) -> None:
    production, staging = deployments
    async with contextlib.AsyncExitStack() as stack:
        one: MemoryCache | RedisCache
        two: MemoryCache | RedisCache
        if backend == "memory":
            one = two = MemoryCache()
        else:
            url = request.getfixturevalue("redis_url")
            one = await stack.enter_async_context(RedisCache(url, name="fleet"))
            two = await stack.enter_async_context(RedisCache(url, name="fleet"))
        misconfigured = await stack.enter_async_context(
            Client(base_url=staging.base_url, cache=one)
        )
        bot = await stack.enter_async_context(Client(base_url=production.base_url, cache=two))
        staged = await misconfigured.with_response.tokens()
        answer = await bot.with_response.tokens()
        again = await bot.with_response.tokens()
    assert answer.cache == "miss"
    assert answer.url.startswith(production.base_url)
    assert symbols(answer.value) != symbols(staged.value)
    assert again.cache == "hit"
    assert symbols(again.value) == symbols(answer.value)


@pytest.fixture
def threaded_server() -> Iterator[FakeServer]:
    with FakeServer(FakeExchange.generate(seed=4)).in_thread() as server:
        yield server


def test_one_memory_cache_shared_by_two_sync_clients_on_their_threads(
    threaded_server: FakeServer,
) -> None:
    """Entries fresh for no time: every call revalidates, so the calls of both clients meet
    in flight on one key, each client on its own loop."""
    cache = MemoryCache(ttl={"tokens": 0.0})
    errors: list[BaseException] = []
    done = 0
    lock = threading.Lock()

    def run(client: SyncClient) -> None:
        nonlocal done
        for _ in range(150):
            try:
                client.tokens()
            except Exception as exc:  # every failure is counted, none may happen
                errors.append(exc)
            with lock:
                done += 1

    with (
        SyncClient(base_url=threaded_server.base_url, cache=cache) as first,
        SyncClient(base_url=threaded_server.base_url, cache=cache) as second,
    ):
        threads = [threading.Thread(target=run, args=(c,)) for c in (first, second)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=120)
    assert done == 300
    assert errors == []


async def test_the_stored_bodies_stay_within_max_bytes(deployments: Any) -> None:
    production, _ = deployments
    body = len(await _one_body(production))
    cache = MemoryCache(ttl={"tokens": 60.0}, max_bytes=body * 8 * 3)
    async with Client(base_url=production.base_url, cache=cache) as client:
        for n in range(40):
            await client.tokens(search=f"x{n}")
            assert cache.bytes <= cache.max_bytes
    assert 0 < len(cache) <= 40
    assert cache.bytes == sum(len(e.body) for e, _ in cache._entries.values())


async def test_an_answer_larger_than_an_eighth_of_max_bytes_is_not_stored(
    deployments: Any,
) -> None:
    production, _ = deployments
    body = len(await _one_body(production))
    cache = MemoryCache(ttl={"tokens": 60.0}, max_bytes=body * 8 - 8)
    async with Client(base_url=production.base_url, cache=cache) as client:
        first = await client.with_response.tokens()
        second = await client.with_response.tokens()
    assert (first.cache, second.cache) == ("miss", "miss")
    assert len(cache) == 0
    assert cache.bytes == 0


async def _one_body(server: FakeServer) -> bytes:
    async with Client(base_url=server.base_url) as client:
        return (await client.with_response.tokens()).content
