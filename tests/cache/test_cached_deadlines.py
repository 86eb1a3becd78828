"""A cached call that shares another call's fetch (in this process, or another process's
through Redis) ends by its own deadline: it raises its own ``RequestTimeoutError`` when its
deadline passes while the shared fetch goes on for the others, and it is never handed the
error of another call's deadline (it then fetches for itself).

The server holds requests at a gate, so calls are in flight together by construction.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest

from asyncapi_client import Client, MemoryCache, RequestTimeoutError
from asyncapi_client.fleet import RedisCache
from asyncapi_client.testing import FakeExchange, FakeServer

pytest_plugins = ("tests._redis",)

SLACK = 0.35  # how much later than its deadline a call may end on a loaded machine


@pytest.fixture
async def server() -> AsyncIterator[FakeServer]:
    async with FakeServer(FakeExchange.generate(seed=5)) as started:
        yield started


def client_for(server: FakeServer, cache: Any, **options: Any) -> Client:
    return Client(base_url=server.base_url, cache=cache, max_retries=0, **options)


def tokens_requests(server: FakeServer) -> int:
    return sum(1 for r in server.requests if r.operation == "tokens")


async def ends(call: Any) -> tuple[BaseException | None, float]:
    started = time.monotonic()
    try:
        await call
    except Exception as exc:
        return exc, time.monotonic() - started
    return None, time.monotonic() - started


async def test_a_joined_call_ends_by_its_own_deadline_and_the_fetch_goes_on(
    server: FakeServer,
) -> None:
    cache = MemoryCache()
    async with client_for(server, cache) as client:
        with server.gate("tokens") as gate:
            leader = asyncio.ensure_future(client.tokens())
            await gate.arrived(1)
            error, took = await ends(client.tokens(deadline=0.5))
            assert not leader.done()  # the shared fetch goes on
            gate.release()
            tokens = await leader
    assert isinstance(error, RequestTimeoutError)
    assert 0.45 <= took < 0.5 + SLACK
    assert tokens
    assert tokens_requests(server) == 1


async def test_a_joined_call_is_not_handed_the_leaders_deadline_error(server: FakeServer) -> None:
    cache = MemoryCache()
    async with client_for(server, cache) as client:
        with server.gate("tokens") as gate:
            leader = asyncio.ensure_future(client.tokens(deadline=0.4))
            await gate.arrived(1)
            follower = asyncio.ensure_future(client.tokens())  # no deadline
            with pytest.raises(RequestTimeoutError):
                await leader
            await gate.arrived(2, timeout=5)  # the follower fetches for itself
            gate.release()
            tokens = await follower
    assert tokens


async def test_a_caller_waiting_for_another_process_s_fetch_ends_by_its_deadline(
    server: FakeServer, redis_url: str
) -> None:
    async with (
        RedisCache(redis_url, name="bots") as one,
        RedisCache(redis_url, name="bots") as two,
        client_for(server, one) as first,
        client_for(server, two, timeout=5.0) as second,
    ):
        with server.gate("tokens") as gate:
            leader = asyncio.ensure_future(first.tokens())
            await gate.arrived(1)
            error, took = await ends(second.tokens(deadline=1.0))
            gate.release()
            await leader
    assert isinstance(error, RequestTimeoutError)
    assert "deadline of 1s" in str(error)
    assert 0.95 <= took < 1.0 + SLACK
