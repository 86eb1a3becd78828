"""``asyncapi_client.fleet.RedisCache`` against a real redis-server, in one process: each
``RedisCache`` object stands for a process of the fleet (its own flights, its own waits).
The processes test is tests/cache/test_cache_fleet.py."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any, cast

import orjson
import pytest
import redis.asyncio as aredis

from asyncapi_client import Client, NotFoundError
from asyncapi_client import _rediscache as rediscache_module
from asyncapi_client.fleet import RedisCache
from asyncapi_client.testing import FakeExchange, FakeServer, RecordedRequest, Reply
from tests._rediscache import keys_and_ttls, until_waiting

if TYPE_CHECKING:
    from tests._redis import RedisServer

pytest_plugins = ("tests._redis",)

ETAG = '"e1"'
#: A stored-at time far enough ahead to keep an entry fresh through the test.
FAR = time.time()


@pytest.fixture
async def server() -> AsyncIterator[FakeServer]:
    async with FakeServer(FakeExchange.generate(seed=5)) as started:
        yield started


def client_for(server: FakeServer, cache: RedisCache, **options: Any) -> Client:
    options.setdefault("max_retries", 0)
    return Client(
        base_url=server.base_url, testnet_base_url=server.testnet_base_url, cache=cache, **options
    )


def sent(server: FakeServer, operation: str = "tokens") -> list[RecordedRequest]:
    return [r for r in server.requests if r.operation == operation]


async def test_a_fresh_entry_is_shared_by_every_process(server: FakeServer, redis_url: str) -> None:
    async with (
        RedisCache(redis_url, name="bots") as one,
        RedisCache(redis_url, name="bots") as two,
        client_for(server, one) as first,
        client_for(server, two) as second,
    ):
        a = await first.with_response.tokens()
        b = await second.with_response.tokens()
        c = await second.tokens()
    assert (a.cache, b.cache, b.attempts) == ("miss", "hit", 0)
    assert a.value == b.value == c
    assert b.content == a.content
    assert b.headers["Content-Type"] == a.headers["Content-Type"]
    assert len(sent(server)) == 1
    ttls = await keys_and_ttls(redis_url)
    assert ttls
    assert all(ttl > 0 for ttl in ttls.values()), ttls


async def test_processes_sending_other_values_of_a_vary_header_do_not_share_an_answer(
    server: FakeServer, redis_url: str
) -> None:
    server.script("tokens", Reply(200, headers={"Vary": "Accept, X-Region"}), repeat=True)
    async with (
        RedisCache(redis_url, name="vary") as one,
        RedisCache(redis_url, name="vary") as two,
        RedisCache(redis_url, name="vary") as three,
        client_for(server, one, headers={"X-Region": "eu"}) as eu,
        client_for(server, two, headers={"X-Region": "us"}) as us,
        client_for(server, three, headers={"X-Region": "eu"}) as eu_too,
    ):
        assert (await eu.with_response.tokens()).cache == "miss"
        assert (await eu_too.with_response.tokens()).cache == "hit"  # read back from Redis
        assert (await us.with_response.tokens()).cache == "miss"
    assert [r.headers.get("X-Region") for r in sent(server)] == ["eu", "us"]


@pytest.mark.parametrize(
    ("varied", "cache"),
    [([], "hit"), ([["x-region", None]], "hit"), ([["x-region", "eu"]], "miss"), (5, "miss")],
    ids=["none", "matches", "another-value", "not-a-list"],
)
async def test_an_entry_s_vary_values_in_redis_are_checked_and_not_trusted(
    server: FakeServer, redis_url: str, varied: object, cache: str
) -> None:
    redis = aredis.Redis.from_url(redis_url)
    key = f"asyncapi_client:cache:{{tamper}}:e:mainnet {server.base_url}/api/tokens"
    async with RedisCache(redis, name="tamper") as one, client_for(server, one) as client:
        await client.tokens()
        await one._written()  # stored in the background
        stored = await redis.hget(key, "m")
        assert isinstance(stored, bytes)
        meta = orjson.loads(stored)
        meta["v"] = varied
        await redis.hset(key, "m", orjson.dumps(meta))
        answer = await client.with_response.tokens()
    await redis.aclose()
    assert answer.cache == cache


async def test_another_name_is_another_cache(server: FakeServer, redis_url: str) -> None:
    async with (
        RedisCache(redis_url, name="bots") as one,
        RedisCache(redis_url, name="others") as two,
        client_for(server, one) as first,
        client_for(server, two) as second,
    ):
        await first.tokens()
        assert (await second.with_response.tokens()).cache == "miss"
        await two.clear()
        assert (await first.with_response.tokens()).cache == "hit"  # not cleared
        assert (await second.with_response.tokens()).cache == "miss"


async def test_the_others_wait_for_the_fetch_of_one(server: FakeServer, redis_url: str) -> None:
    caches = [RedisCache(redis_url, name="bots") for _ in range(3)]
    clients = [client_for(server, cache, coalesce=False) for cache in caches]
    try:
        with server.gate("tokens") as gate:
            leader = asyncio.create_task(clients[0].with_response.tokens())
            await gate.arrived(1)
            others = [asyncio.create_task(c.with_response.tokens()) for c in clients[1:]]
            await until_waiting(redis_url, 2)
            gate.release()
            answers = [await leader, *await asyncio.gather(*others)]
    finally:
        for client, cache in zip(clients, caches, strict=True):
            await client.close()
            await cache.aclose()
    assert len(sent(server)) == 1
    assert [a.cache for a in answers] == ["miss", "hit", "hit"]
    assert all(a.value == answers[0].value for a in answers)
    ttls = await keys_and_ttls(redis_url)
    assert all(ttl > 0 for ttl in ttls.values()), ttls


async def test_a_waiter_fetches_itself_after_its_attempt_timeout(
    server: FakeServer, redis_url: str
) -> None:
    async with (
        RedisCache(redis_url, name="bots") as one,
        RedisCache(redis_url, name="bots") as two,
        client_for(server, one) as first,
        client_for(server, two, timeout=0.5) as second,
    ):
        with server.gate("tokens") as gate:
            leader = asyncio.create_task(first.tokens())
            await gate.arrived(1)
            started = time.monotonic()
            waiter = asyncio.create_task(second.with_response.tokens())
            await gate.arrived(2)  # its own request, after it gave up waiting
            waited = time.monotonic() - started
            gate.release()
            answer = await waiter
            await leader
    assert answer.cache == "miss"
    assert waited >= 0.4  # it did wait for the other fetch first, about its timeout


async def test_when_the_fetch_fails_the_waiters_fetch_themselves(
    server: FakeServer, redis_url: str
) -> None:
    server.script("tokens", Reply(404))
    async with (
        RedisCache(redis_url, name="bots") as one,
        RedisCache(redis_url, name="bots") as two,
        client_for(server, one) as first,
        client_for(server, two) as second,
    ):
        with server.gate("tokens") as gate:
            leader = asyncio.create_task(first.tokens())
            await gate.arrived(1)
            waiter = asyncio.create_task(second.with_response.tokens())
            await until_waiting(redis_url, 1)
            gate.release()
            with pytest.raises(NotFoundError):
                await leader
            answer = await waiter
    assert answer.cache == "miss"
    assert [r.status for r in sent(server)] == [404, 200]


async def test_an_etag_is_revalidated_through_redis(server: FakeServer, redis_url: str) -> None:
    def respond(request: RecordedRequest) -> Reply:
        if request.headers.get("If-None-Match") == ETAG:
            return Reply(304, body=b"", headers={"ETag": ETAG, "Cache-Control": "no-cache"})
        return Reply(200, headers={"ETag": ETAG, "Cache-Control": "no-cache"})

    server.script("tokens", respond, repeat=True)
    async with (
        RedisCache(redis_url, name="bots") as one,
        RedisCache(redis_url, name="bots") as two,
        client_for(server, one) as first,
        client_for(server, two) as second,
    ):
        a = await first.with_response.tokens()
        b = await second.with_response.tokens()
    assert (a.cache, b.cache) == ("miss", "revalidated")
    assert b.value == a.value
    assert sent(server)[1].headers["If-None-Match"] == ETAG


@pytest.mark.parametrize(
    "stored",
    [
        {"b": b"{}", "m": b"not json"},
        {"b": b"{}", "m": b'{"s": "200"}'},
        {"b": b"{}", "m": b'{"s":200,"h":[[1,2]],"u":"x","e":null,"l":null,"t":0,"f":1}'},
        {"m": b"{}"},
        {"b": b"{}", "m": b'{"s":"200","h":[],"u":"x","e":null,"l":null,"t":0,"f":1}'},
        {
            "b": b"not json",
            "m": f'{{"s":200,"h":[],"u":"x","e":null,"l":null,"t":{FAR},"f":1e9}}'.encode(),
        },
    ],
)
async def test_what_is_not_an_entry_in_redis_is_a_miss(
    server: FakeServer, redis_url: str, stored: dict[str, bytes]
) -> None:
    redis = aredis.Redis.from_url(redis_url)
    async with RedisCache(redis, name="bots") as cache, client_for(server, cache) as client:
        await redis.hset(
            "asyncapi_client:cache:{bots}:e:mainnet /tokens", mapping=cast("Any", stored)
        )
        answer = await client.with_response.tokens()
        again = await client.with_response.tokens()
    await redis.aclose()
    assert (answer.cache, again.cache) == ("miss", "hit")


async def test_a_fresh_entry_that_does_not_decode_is_not_revalidated(
    server: FakeServer, redis_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Written by someone else between this process's read and its lock: its validators
    # would only buy a 304 for a body that cannot be used, so the body is fetched whole.
    def respond(request: RecordedRequest) -> Reply:
        if request.headers.get("If-None-Match") == ETAG:
            return Reply(304, body=b"", headers={"ETag": ETAG})
        return Reply(200, headers={"ETag": ETAG})

    server.script("tokens", respond, repeat=True)
    meta = orjson.dumps({"s": 200, "h": [], "u": "x", "e": ETAG, "l": None, "t": FAR, "f": 1e9})
    redis = aredis.Redis.from_url(redis_url)
    async with RedisCache(redis, name="bots") as cache, client_for(server, cache) as client:
        take_lock = cache._lock

        async def after_someone_wrote(key: str, bound: float) -> object | None:
            await redis.hset(
                "asyncapi_client:cache:{bots}:e:mainnet /tokens",
                mapping={"b": b"not json", "m": meta},
            )
            return await take_lock(key, bound)

        monkeypatch.setattr(cache, "_lock", after_someone_wrote)
        answer = await client.with_response.tokens()
    await redis.aclose()
    assert answer.cache == "miss"
    assert [r.headers.get("If-None-Match") for r in sent(server)] == [None]


async def test_redis_killed_mid_run_calls_are_still_answered(
    server: FakeServer, own_redis: RedisServer, caplog: pytest.LogCaptureFixture
) -> None:
    tokens = [t["address"] for t in server.exchange.tokens[:4]]
    caplog.set_level(logging.WARNING, logger="asyncapi_client")
    async with (
        RedisCache(own_redis.url, name="bots") as cache,
        client_for(server, cache, timeout=2.0) as client,
    ):
        before = [await client.with_response.token_markets(t) for t in tokens]
        await cache._written()  # stored: not read back from this process's pending writes
        own_redis.kill()
        after = [await client.with_response.token_markets(t) for t in tokens * 2]
    assert [a.cache for a in before] == ["miss"] * 4
    assert [a.cache for a in after] == ["miss"] * 8
    assert [a.value for a in after] == [a.value for a in before] * 2
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1  # once, not once per call
    assert "calls go to the server uncached" in warnings[0].getMessage()


async def test_redis_killed_while_a_process_waits(
    server: FakeServer, own_redis: RedisServer
) -> None:
    async with (
        RedisCache(own_redis.url, name="bots") as one,
        RedisCache(own_redis.url, name="bots") as two,
        client_for(server, one) as first,
        client_for(server, two) as second,
    ):
        with server.gate("tokens") as gate:
            leader = asyncio.create_task(first.tokens())
            await gate.arrived(1)
            waiter = asyncio.create_task(second.with_response.tokens())
            await until_waiting(own_redis.url, 1)
            own_redis.kill()
            await gate.arrived(2)  # the waiter went to the server itself
            gate.release()
            answer = await waiter
            await leader
    assert answer.cache == "miss"


async def test_calls_use_redis_again_once_it_is_back(
    server: FakeServer, own_redis: RedisServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(rediscache_module, "PAUSE_AFTER_FAILURE", 0.0)
    async with (
        RedisCache(own_redis.url, name="bots") as cache,
        client_for(server, cache) as client,
    ):
        own_redis.kill()
        assert (await client.with_response.tokens()).cache == "miss"
        own_redis.restart()
        assert (await client.with_response.tokens()).cache == "miss"
        assert (await client.with_response.tokens()).cache == "hit"


async def test_a_borrowed_client_is_not_closed(redis_url: str) -> None:
    redis = aredis.Redis.from_url(redis_url)
    cache = RedisCache(redis, name="bots")
    assert not cache.owns_client
    await cache.aclose()
    await cache.aclose()
    assert await redis.ping()
    await redis.aclose()
    with pytest.raises(RuntimeError, match="closed"):
        await cache.clear()
    with pytest.raises(RuntimeError, match="closed"):
        async with cache:
            pass


@pytest.mark.parametrize(
    ("args", "kwargs", "match"),
    [
        (("http://127.0.0.1",), {"name": "x"}, "redis://"),
        (("redis://",), {"name": "x"}, "host"),
        (("redis://127.0.0.1:99999",), {"name": "x"}, "not a valid Redis URL"),
        ((3,), {"name": "x"}, "redis:// URL"),
        (("redis://127.0.0.1",), {"name": ""}, "name"),
        (("redis://127.0.0.1",), {"name": "a b"}, "name"),
        (("redis://127.0.0.1",), {"name": "x", "ttl": {"nope": 1.0}}, "unknown operation"),
        (("redis://127.0.0.1",), {"name": "x", "stale_if_error": -1}, "stale_if_error"),
    ],
)
def test_bad_arguments_are_refused(
    args: tuple[Any, ...], kwargs: dict[str, Any], match: str
) -> None:
    with pytest.raises(ValueError, match=match):
        RedisCache(*args, **kwargs)


async def test_a_client_decoding_responses_is_refused() -> None:
    redis = aredis.Redis(decode_responses=True)
    with pytest.raises(ValueError, match="decode_responses"):
        RedisCache(redis, name="x")
    await redis.aclose()


async def test_the_repr_names_no_password() -> None:
    async with RedisCache("redis://user:secret@127.0.0.1:1/2?x=y", name="x") as cache:
        assert "secret" not in repr(cache)
        assert "redis://127.0.0.1:1/2" in repr(cache)
        assert cache.owns_client


async def test_a_no_store_answer_drops_the_entry_from_redis(
    server: FakeServer, redis_url: str
) -> None:
    server.script(
        "tokens",
        Reply(200, headers={"ETag": ETAG, "Cache-Control": "no-cache"}),
        Reply(200, headers={"Cache-Control": "no-store"}),
    )
    async with RedisCache(redis_url, name="bots") as cache, client_for(server, cache) as client:
        await client.tokens()
        await cache._written()  # the store goes on in the background: until it is done
        assert await keys_and_ttls(redis_url)
        await client.tokens()
        await cache._written()  # the drop and the fetch lock's release, likewise
        assert await keys_and_ttls(redis_url) == {}
        assert (await client.with_response.tokens()).cache == "miss"


async def test_a_closed_cache_is_refused(server: FakeServer, redis_url: str) -> None:
    cache = RedisCache(redis_url, name="bots")
    await cache.aclose()
    async with client_for(server, cache) as client:
        with pytest.raises(RuntimeError, match="closed"):
            await client.tokens()


async def test_unix_socket_addresses_are_named() -> None:
    async with RedisCache("unix:///tmp/no-such.sock", name="x") as by_url:
        assert "unix:///tmp/no-such.sock" in repr(by_url)
    client = aredis.Redis(unix_socket_path="/tmp/no-such.sock")
    assert "unix:///tmp/no-such.sock" in repr(RedisCache(client, name="x"))
    await client.aclose()


async def test_an_entry_stored_between_the_read_and_the_lock_is_not_fetched_again(
    server: FakeServer, redis_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with (
        RedisCache(redis_url, name="bots") as one,
        RedisCache(redis_url, name="bots") as two,
        client_for(server, one) as first,
        client_for(server, two) as second,
    ):
        take_lock = two._lock

        async def after_the_other_process_stored(key: str, bound: float) -> object | None:
            await first.tokens()  # the other process fetches and stores meanwhile
            return await take_lock(key, bound)

        monkeypatch.setattr(two, "_lock", after_the_other_process_stored)
        answer = await second.with_response.tokens()
    assert answer.cache == "hit"
    assert len(sent(server)) == 1


async def test_two_processes_waiting_on_each_others_fetches_of_many_keys_do_not_stall(
    server: FakeServer, redis_url: str
) -> None:
    keys = 40  # more than the connections of either cache's pool
    # a generous redis_timeout: 160 calls at once open every connection of both pools, which
    # on a loaded machine may take longer than the default
    async with (
        RedisCache(redis_url, name="bots", redis_timeout=15.0) as one,
        RedisCache(redis_url, name="bots", redis_timeout=15.0) as two,
        client_for(server, one, timeout=15.0, coalesce=False) as first,
        client_for(server, two, timeout=15.0, coalesce=False) as second,
    ):
        with server.gate("tokens") as gate:
            mine = [f"a{i}" for i in range(keys)]
            theirs = [f"b{i}" for i in range(keys)]
            calls: list[asyncio.Task[Any]] = [
                asyncio.create_task(first.tokens(search=s)) for s in mine
            ]
            calls += [asyncio.create_task(second.tokens(search=s)) for s in theirs]
            await gate.arrived(2 * keys)  # each process fetches its own keys...
            calls += [asyncio.create_task(first.with_response.tokens(search=s)) for s in theirs]
            calls += [asyncio.create_task(second.with_response.tokens(search=s)) for s in mine]
            await until_waiting(redis_url, 2 * keys)  # ...and waits for the other's
            gate.release()
            async with asyncio.timeout(10.0):  # well before the waits' own bound (15 s)
                answers = await asyncio.gather(*calls)
    assert len(sent(server)) == 2 * keys
    assert {a.cache for a in answers[2 * keys :]} == {"hit"}
