"""Entries in Redis that the cache cannot use heal: one whose validator is not a valid header
value (a CR/LF in its ETag or Last-Modified), or a key of the wrong Redis type where an entry,
a fetch lock or a list of waiters belongs, is a miss when used, and is replaced at once."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator

import orjson
import pytest
import redis.asyncio as aredis

from asyncapi_client.fleet import RedisCache
from asyncapi_client.testing import FakeExchange, FakeServer, RecordedRequest, Reply
from tests._cache_redis import client_for, entry_key

pytest_plugins = ("tests._redis",)

#: Generous: a question to Redis that ran out of time on a loaded machine would send the
#: calls of the next second to the server uncached, which is not what is tested here.
REDIS_TIMEOUT = 5.0

ETAG = '"v1"'
MODIFIED = "Tue, 01 Sep 2026 10:00:00 GMT"


@pytest.fixture
async def server() -> AsyncIterator[FakeServer]:
    async with FakeServer(FakeExchange.generate(seed=9)) as started:
        yield started


@pytest.fixture
async def redis(redis_url: str) -> AsyncIterator[aredis.Redis]:
    client = aredis.Redis.from_url(redis_url)
    yield client
    await client.aclose()


def revalidating(server: FakeServer) -> None:
    """Answers stale at once (``no-cache``) with both validators; a 304 when they match."""

    def respond(request: RecordedRequest) -> Reply:
        headers = {"ETag": ETAG, "Last-Modified": MODIFIED, "Cache-Control": "no-cache"}
        if request.headers.get("If-None-Match") == ETAG:
            return Reply(304, body=b"", headers=headers)
        return Reply(200, headers=headers)

    server.script("tokens", respond, repeat=True)


@pytest.mark.parametrize(
    ("field", "value"),
    [("e", '"v1"\r\nX-Injected: 1'), ("l", MODIFIED + "\r\nX-Injected: 1"), ("e", '"v1\n"')],
    ids=["etag", "last-modified", "etag-lf"],
)
async def test_an_entry_whose_validator_is_not_a_header_value_is_a_miss_and_replaced(
    server: FakeServer, redis_url: str, redis: aredis.Redis, field: str, value: str
) -> None:
    revalidating(server)
    key = entry_key("heal", server)
    async with (
        RedisCache(redis_url, name="heal", redis_timeout=REDIS_TIMEOUT) as cache,
        client_for(server, cache) as client,
    ):
        await client.tokens()
        await cache._written()  # stored in the background
        stored = await redis.hget(key, "m")
        assert isinstance(stored, bytes)
        await redis.hset(key, "m", orjson.dumps({**orjson.loads(stored), field: value}))
        tampered = await client.with_response.tokens()
        healed = await client.with_response.tokens()
    assert (tampered.cache, healed.cache) == ("miss", "revalidated")
    asked = [
        (r.headers.get("If-None-Match"), r.headers.get("If-Modified-Since"))
        for r in server.requests
    ]
    assert asked == [(None, None), (None, None), (ETAG, MODIFIED)]


@pytest.mark.parametrize("kind", ["entry-string", "entry-list", "lock-hash", "waiters-string"])
async def test_a_key_of_the_wrong_type_is_a_miss_and_replaced(
    server: FakeServer,
    redis_url: str,
    redis: aredis.Redis,
    kind: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger="asyncapi_client")
    entry = entry_key("heal", server)
    lock = entry.replace(":e:", ":l:", 1)
    waiters = entry.replace(":e:", ":w:", 1)
    # written by someone else, without an expiry
    if kind == "entry-string":
        await redis.set(entry, b"not a hash")
    elif kind == "entry-list":
        await redis.rpush(entry, b"not a hash")
    elif kind == "lock-hash":
        await redis.hset(lock, "not", "a lock")
    else:  # and a fetch lock of someone else's, for a moment: the caller registers there
        await redis.set(waiters, b"not a list")
        await redis.set(lock, b"someone", px=300)
    async with (
        RedisCache(redis_url, name="heal", redis_timeout=REDIS_TIMEOUT) as cache,
        client_for(server, cache) as client,
        asyncio.timeout(5.0),  # no wait for a lock that is not one
    ):
        first = await client.with_response.tokens()
        second = await client.with_response.tokens()
    assert (first.cache, second.cache) == ("miss", "hit")
    assert len(server.requests) == 1
    assert await redis.type(entry) == b"hash"
    # not a failure of Redis: no warning (and no pause of the cache)
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]
