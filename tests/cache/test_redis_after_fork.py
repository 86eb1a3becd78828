"""A RedisCache in a child forked after the parent used it, even while another thread of the
parent held one of its locks at the fork: the child reads the parent's entries and stores
its own over connections of its own, and the parent's cache goes on working."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterator

import pytest

from asyncapi_client import Client
from asyncapi_client.fleet import RedisCache
from asyncapi_client.testing import FakeExchange, FakeServer
from tests._fork import Outcome, in_forked_child

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork (POSIX)")
pytest_plugins = ("tests._redis",)


@pytest.fixture
def threaded_server() -> Iterator[FakeServer]:
    with FakeServer(FakeExchange.generate(seed=13)).in_thread() as server:
        yield server


def test_a_redis_cache_works_in_a_forked_child_and_still_in_the_parent(
    redis_url: str, threaded_server: FakeServer
) -> None:
    cache = RedisCache(redis_url, name="forked", redis_timeout=5.0)

    async def calls(*searches: str) -> list[str]:
        async with Client(base_url=threaded_server.base_url, cache=cache) as client:
            return [str((await client.with_response.tokens(search=s)).cache) for s in searches]

    def in_child() -> Outcome:
        return {"states": asyncio.run(calls("parent", "child", "child"))}

    loop = asyncio.new_event_loop()  # the parent's loop, with its connections to Redis
    try:
        assert loop.run_until_complete(calls("parent")) == ["miss"]
        loop.run_until_complete(cache._written())  # the entry is stored before the fork
        with cache._on_loops_lock:  # held by a thread of the parent at the fork
            outcome = in_forked_child(in_child)
        assert outcome == {"states": ["hit", "miss", "hit"]}
        assert loop.run_until_complete(calls("parent", "child")) == ["hit", "hit"]
        loop.run_until_complete(cache.aclose())
    finally:
        loop.run_until_complete(loop.shutdown_asyncgens())
        loop.close()
