"""Cached reference data (``Client(cache=MemoryCache(...))``), one test per contract line,
against the fake exchange over loopback; the server's own record counts the requests.

Freshness is driven by a clock the test moves (the cache's ``time`` replaced), never by
sleeping; concurrency by the fake's gates.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest
from hypothesis import given
from hypothesis import strategies as st
from multidict import CIMultiDict

import asyncapi_client
from asyncapi_client import (
    Client,
    LocalLimiter,
    MemoryCache,
    NotFoundError,
    Rate,
    RequestTimeoutError,
    ServerError,
)
from asyncapi_client import _cache as cache_module
from asyncapi_client._cache import _TOKEN as _is_token
from asyncapi_client._cache import freshness, may_serve_stale, validators, vary_names
from asyncapi_client.testing import FakeExchange, FakeServer, RecordedRequest, Reply
from tests._checks import settled

ETAG = '"v1"'
MODIFIED = "Wed, 25 Nov 2026 10:00:00 GMT"


class Clock:
    """The cache's ``time`` module, moved by the test: ``time()`` and ``monotonic()``."""

    def __init__(self) -> None:
        self.now = 1_800_000_000.0

    def time(self) -> float:
        return self.now

    def monotonic(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    fake = Clock()
    monkeypatch.setattr(cache_module, "time", fake)
    return fake


@pytest.fixture
async def server() -> AsyncIterator[FakeServer]:
    async with FakeServer(FakeExchange.generate(seed=3)) as started:
        yield started


def client_for(server: FakeServer, cache: Any, **options: Any) -> Client:
    options.setdefault("max_retries", 0)
    return Client(
        base_url=server.base_url,
        testnet_base_url=server.testnet_base_url,
        cache=cache,
        **options,
    )


def sent(server: FakeServer, operation: str = "tokens") -> list[RecordedRequest]:
    return [r for r in server.requests if r.operation == operation]


def validating(headers: dict[str, str]) -> Any:
    """A scripted responder: 304 when the request carries the validators we handed out,
    else the normal answer with ``headers`` (an ETag, a Cache-Control...)."""

    def respond(request: RecordedRequest) -> Reply:
        if "ETag" in headers and request.headers.get("If-None-Match") == headers["ETag"]:
            return Reply(304, body=b"", headers=headers)
        modified = headers.get("Last-Modified")
        if modified is not None and request.headers.get("If-Modified-Since") == modified:
            return Reply(304, body=b"", headers=headers)
        return Reply(200, headers=headers)

    return respond


# --- fresh entries --------------------------------------------------------------------


async def test_a_fresh_entry_is_served_with_no_request(server: FakeServer, clock: Clock) -> None:
    async with client_for(server, MemoryCache()) as client:
        first = await client.with_response.tokens()
        clock.advance(299)
        second = await client.with_response.tokens()
        plain = await client.tokens()
    assert len(sent(server)) == 1
    assert (first.cache, first.attempts) == ("miss", 1)
    assert (second.cache, second.attempts) == ("hit", 0)
    assert second.value == first.value == plain
    assert second.content == first.content
    assert second.status == 200
    assert second.headers["Content-Type"] == first.headers["Content-Type"]


async def test_an_entry_goes_stale_after_its_ttl(server: FakeServer, clock: Clock) -> None:
    async with client_for(server, MemoryCache({"tokens": 10.0})) as client:
        await client.tokens()
        clock.advance(10.5)
        again = await client.with_response.tokens()
    assert len(sent(server)) == 2
    assert again.cache == "revalidated"  # the fake's ETag, confirmed by a 304


async def test_only_the_operations_the_ttl_names_are_cached(
    server: FakeServer, clock: Clock
) -> None:
    pool_id = next(iter(server.exchange.pools))
    async with client_for(server, MemoryCache()) as client:
        first = await client.with_response.pool(pool_id)
        second = await client.with_response.pool(pool_id)
        await client.tokens()
        assert (await client.with_response.tokens()).cache == "hit"
    assert len(sent(server, "pool")) == 2
    assert first.cache is second.cache is None
    assert second.attempts == 1


async def test_the_key_is_network_path_and_query(server: FakeServer, clock: Clock) -> None:
    async with client_for(server, MemoryCache()) as client:
        await client.tokens()
        await client.tokens(search="a")
        await client.tokens(network="testnet")
        await client.tokens(search="a")
        await client.tokens(network="testnet")
        await client.tokens()
    assert len(sent(server)) == 3


async def test_clients_sharing_a_cache_share_its_entries(server: FakeServer, clock: Clock) -> None:
    cache = MemoryCache()
    async with client_for(server, cache) as one, client_for(server, cache) as two:
        await one.tokens()
        answer = await two.with_response.tokens()
    assert answer.cache == "hit"
    assert len(sent(server)) == 1


async def test_a_hit_takes_no_limiter_slot(server: FakeServer, clock: Clock) -> None:
    # one request an hour: a second trip through the limiter would wait past the deadline
    limiter = LocalLimiter([Rate(1, 3600.0)])
    async with client_for(server, MemoryCache(), limiter=limiter) as client:
        await client.tokens()
        answer = await client.with_response.tokens(deadline=1.0)
        with pytest.raises(RequestTimeoutError):
            await client.tokens(search="x", deadline=1.0)  # a miss does wait for its slot
    assert answer.cache == "hit"


async def test_a_closed_client_serves_no_hit(server: FakeServer, clock: Clock) -> None:
    client = client_for(server, MemoryCache())
    await client.tokens()
    await client.close()
    with pytest.raises(RuntimeError, match="closed"):
        await client.tokens()


# --- revalidation -----------------------------------------------------------------------


async def test_a_stale_entry_with_an_etag_is_revalidated_by_a_304(
    server: FakeServer, clock: Clock
) -> None:
    server.script("tokens", validating({"ETag": ETAG}), repeat=True)
    async with client_for(server, MemoryCache({"tokens": 10.0})) as client:
        first = await client.with_response.tokens()
        clock.advance(11)
        second = await client.with_response.tokens()
        clock.advance(9)  # fresh again for a whole ttl after the 304
        third = await client.with_response.tokens()
    requests = sent(server)
    assert [r.status for r in requests] == [200, 304]
    assert "If-None-Match" not in requests[0].headers
    assert requests[1].headers["If-None-Match"] == ETAG
    assert (second.cache, second.attempts, second.status) == ("revalidated", 1, 200)
    assert second.value == first.value
    assert second.content == first.content
    assert third.cache == "hit"


async def test_last_modified_is_sent_back_as_if_modified_since(
    server: FakeServer, clock: Clock
) -> None:
    server.script("tokens", validating({"Last-Modified": MODIFIED}), repeat=True)
    async with client_for(server, MemoryCache({"tokens": 10.0})) as client:
        await client.tokens()
        clock.advance(11)
        second = await client.with_response.tokens()
    requests = sent(server)
    assert requests[1].headers["If-Modified-Since"] == MODIFIED
    assert second.cache == "revalidated"


async def test_a_200_to_a_revalidation_is_a_miss_and_replaces_the_entry(
    server: FakeServer, clock: Clock
) -> None:
    server.script("tokens", Reply(200, headers={"ETag": ETAG}), Reply(200, json={"tokens": []}))
    async with client_for(server, MemoryCache({"tokens": 10.0})) as client:
        first = await client.tokens()
        clock.advance(11)
        second = await client.with_response.tokens()
        third = await client.with_response.tokens()
    assert first
    assert second.cache == "miss"
    assert list(second.value) == list(third.value) == []
    assert third.cache == "hit"


async def test_a_304_nobody_asked_for_is_an_error(server: FakeServer, clock: Clock) -> None:
    server.script("tokens", Reply(304, body=b""))
    async with client_for(server, MemoryCache()) as client:
        with pytest.raises(asyncapi_client.StatusError) as caught:
            await client.tokens()
    assert caught.value.status == 304


async def test_a_malformed_etag_is_not_used_to_revalidate(server: FakeServer, clock: Clock) -> None:
    server.script("tokens", Reply(200, headers={"ETag": "no-quotes"}), repeat=True)
    async with client_for(server, MemoryCache({"tokens": 10.0})) as client:
        await client.tokens()
        clock.advance(11)
        again = await client.with_response.tokens()
    assert "If-None-Match" not in sent(server)[1].headers
    assert again.cache == "miss"


# --- Cache-Control ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "directives",
    [
        "no-store",
        "max-age=abc",
        "max-age=-1",
        "max-age=1e3",
        "max-age=99999999999",
        "max-age=60, max-age=0",
        'max-age="60',
        "max-age=60, no-store",
        "max-age=60;x",
        "max-age=60, " * 400,
    ],
)
async def test_no_store_and_hostile_cache_control_are_not_stored(
    server: FakeServer, clock: Clock, directives: str
) -> None:
    server.script("tokens", Reply(200, headers={"Cache-Control": directives}), repeat=True)
    async with client_for(server, MemoryCache()) as client:
        first = await client.with_response.tokens()
        second = await client.with_response.tokens()
    assert len(sent(server)) == 2
    assert first.cache == second.cache == "miss"
    assert first.value == second.value


async def test_vary_star_is_not_stored(server: FakeServer, clock: Clock) -> None:
    server.script("tokens", Reply(200, headers={"Vary": "*"}), repeat=True)
    server.script("token_markets", Reply(200, headers={"Vary": "Accept-Encoding"}), repeat=True)
    token = server.exchange.tokens[0]["address"]
    async with client_for(server, MemoryCache()) as client:
        await client.tokens()
        await client.tokens()
        await client.token_markets(token)
        assert (await client.with_response.token_markets(token)).cache == "hit"
    assert len(sent(server)) == 2


def speaking(server: FakeServer, cache: MemoryCache, language: str) -> Client:
    """A client of ``cache`` that sends ``Accept-Language: language``, the tokens answered
    with ``Vary: Accept-Language``."""
    server.script("tokens", Reply(200, headers={"Vary": "Accept-Language"}), repeat=True)
    return client_for(server, cache, headers={"Accept-Language": language})


async def test_an_answer_is_used_only_by_clients_sending_what_it_varies_on(
    server: FakeServer, clock: Clock
) -> None:
    cache = MemoryCache()
    async with (
        speaking(server, cache, "de") as german,
        speaking(server, cache, "fr") as french,
        client_for(server, cache, headers={"accept-language": "de"}) as also_german,
        client_for(server, cache) as neither,
    ):
        assert (await german.with_response.tokens()).cache == "miss"
        assert (await also_german.with_response.tokens()).cache == "hit"  # any case
        assert (await french.with_response.tokens()).cache == "miss"  # not the German one
        assert (await french.with_response.tokens()).cache == "hit"  # its own now
        assert (await german.with_response.tokens()).cache == "miss"
        assert (await neither.with_response.tokens()).cache == "miss"  # sends none
    assert [r.headers.get("Accept-Language") for r in sent(server)] == ["de", "fr", "de", None]


@pytest.mark.parametrize(
    "vary",
    [
        "Accept-Language, *",
        "Accept-Language;q=1",
        "a" * 5000,
        ", ".join(f"X-{i}" for i in range(17)),
    ],
)
async def test_a_vary_that_does_not_parse_is_not_stored(
    server: FakeServer, clock: Clock, vary: str
) -> None:
    server.script("tokens", Reply(200, headers={"Vary": vary}), repeat=True)
    async with client_for(server, MemoryCache()) as client:
        answers = [(await client.with_response.tokens()).cache for _ in range(2)]
    assert answers == ["miss", "miss"]


@pytest.mark.parametrize("directives", ["no-cache", "max-age=0", "private, max-age=0"])
async def test_no_cache_and_max_age_0_are_revalidated_on_every_use(
    server: FakeServer, clock: Clock, directives: str
) -> None:
    server.script("tokens", validating({"ETag": ETAG, "Cache-Control": directives}), repeat=True)
    async with client_for(server, MemoryCache()) as client:
        answers = [await client.with_response.tokens() for _ in range(3)]
    assert [a.cache for a in answers] == ["miss", "revalidated", "revalidated"]
    assert [r.status for r in sent(server)] == [200, 304, 304]


async def test_freshness_is_the_smaller_of_ttl_and_max_age(
    server: FakeServer, clock: Clock
) -> None:
    server.script("tokens", Reply(200, headers={"Cache-Control": "max-age=5"}), repeat=True)
    server.script(
        "token_markets", Reply(200, headers={"Cache-Control": "max-age=500"}), repeat=True
    )
    token = server.exchange.tokens[0]["address"]
    async with client_for(server, MemoryCache({"tokens": 300.0, "token_markets": 10.0})) as c:
        await c.tokens()
        await c.token_markets(token)
        clock.advance(4)
        assert (await c.with_response.tokens()).cache == "hit"
        clock.advance(2)  # 6 s: past max-age=5, well inside ttl=300
        assert (await c.with_response.tokens()).cache == "miss"
        assert (await c.with_response.token_markets(token)).cache == "hit"
        clock.advance(5)  # 11 s: past ttl=10, well inside max-age=500
        assert (await c.with_response.token_markets(token)).cache == "miss"


async def test_the_age_a_cache_on_the_way_gives_counts_against_freshness(
    server: FakeServer, clock: Clock
) -> None:
    # A CDN answers with an entry it has held 50 s: max-age=60 leaves 10 s, not 60.
    server.script(
        "tokens", Reply(200, headers={"Cache-Control": "max-age=60", "Age": "50"}), repeat=True
    )
    async with client_for(server, MemoryCache({"tokens": 300.0})) as client:
        await client.tokens()
        clock.advance(9)
        assert (await client.with_response.tokens()).cache == "hit"
        clock.advance(2)  # 11 s: past what was left of max-age=60
        assert (await client.with_response.tokens()).cache == "miss"
    assert len(sent(server)) == 2


async def test_an_age_past_the_freshness_is_revalidated_on_every_use(
    server: FakeServer, clock: Clock
) -> None:
    headers = {"ETag": ETAG, "Cache-Control": "max-age=60", "Age": "3600"}
    server.script("tokens", validating(headers), repeat=True)
    async with client_for(server, MemoryCache()) as client:
        answers = [await client.with_response.tokens() for _ in range(3)]
    assert [a.cache for a in answers] == ["miss", "revalidated", "revalidated"]


async def test_a_304_without_age_is_fresh_for_its_whole_max_age(
    server: FakeServer, clock: Clock
) -> None:
    # The 200 came through a CDN (Age: 50); the origin's 304 has no Age: after it the
    # entry is as fresh as max-age says, not max-age - 50 for ever.
    def respond(request: RecordedRequest) -> Reply:
        if request.headers.get("If-None-Match") == ETAG:
            return Reply(304, body=b"", headers={"ETag": ETAG, "Cache-Control": "max-age=60"})
        return Reply(200, headers={"ETag": ETAG, "Cache-Control": "max-age=60", "Age": "50"})

    server.script("tokens", respond, repeat=True)
    async with client_for(server, MemoryCache()) as client:
        await client.tokens()
        clock.advance(11)
        assert (await client.with_response.tokens()).cache == "revalidated"
        clock.advance(59)
        assert (await client.with_response.tokens()).cache == "hit"
    assert [r.status for r in sent(server)] == [200, 304]


@pytest.mark.parametrize("directives", ["max-age=10, must-revalidate", "no-cache"])
async def test_a_stale_entry_that_must_be_revalidated_is_never_served_on_an_error(
    server: FakeServer, clock: Clock, directives: str
) -> None:
    headers = {"ETag": ETAG, "Cache-Control": directives}
    server.script("tokens", Reply(200, headers=headers))
    cache = MemoryCache({"tokens": 10.0}, stale_if_error=60.0)
    async with client_for(server, cache) as client:
        client.set_testing(True, max_retries=0)
        assert (await client.with_response.tokens()).cache == "miss"
        server.script("tokens", Reply(503), repeat=True)
        clock.advance(11)  # stale by 1 s, well inside stale_if_error
        with pytest.raises(ServerError):
            await client.tokens()
    assert [r.status for r in sent(server)] == [200, 503]


# --- errors -------------------------------------------------------------------------------


async def test_errors_are_never_stored(server: FakeServer, clock: Clock) -> None:
    server.script("tokens", Reply(404), Reply(503))
    async with client_for(server, MemoryCache()) as client:
        with pytest.raises(NotFoundError):
            await client.tokens()
        with pytest.raises(ServerError):
            await client.tokens()
        answer = await client.with_response.tokens()
        again = await client.with_response.tokens()
    assert [r.status for r in sent(server)] == [404, 503, 200]
    assert (answer.cache, again.cache) == ("miss", "hit")


async def test_stale_if_error_serves_a_recent_stale_entry(server: FakeServer, clock: Clock) -> None:
    cache = MemoryCache({"tokens": 10.0}, stale_if_error=60.0)
    async with client_for(server, cache, max_retries=1) as client:
        client.set_testing(True)
        first = await client.with_response.tokens()
        server.script("tokens", Reply(503), repeat=True)
        clock.advance(10 + 59)  # stale by 59 s
        stale = await client.with_response.tokens()
        clock.advance(2)  # stale by 61 s
        with pytest.raises(ServerError):
            await client.tokens()
    assert (stale.cache, stale.attempts) == ("stale", 2)  # after its retries
    assert stale.value == first.value
    assert [r.status for r in sent(server)] == [200, 503, 503, 503, 503]


@pytest.mark.parametrize(
    "failure", [Reply(500), Reply(429, headers={"Retry-After": "0"}), Reply(drop=True)]
)
async def test_stale_if_error_covers_5xx_429_and_connection_failures(
    server: FakeServer, clock: Clock, failure: Reply
) -> None:
    cache = MemoryCache({"tokens": 10.0}, stale_if_error=60.0)
    async with client_for(server, cache) as client:
        client.set_testing(True, max_retries=0)
        await client.tokens()
        # Every answer fails: a drop on the kept-alive connection is resent once as stale.
        server.script("tokens", failure, repeat=True)
        clock.advance(30)
        assert (await client.with_response.tokens()).cache == "stale"


async def test_stale_if_error_covers_a_timeout(server: FakeServer, clock: Clock) -> None:
    cache = MemoryCache({"tokens": 10.0}, stale_if_error=60.0)
    async with client_for(server, cache, timeout=0.3) as client:
        await client.tokens()
        with server.gate("tokens"):  # held until the block ends: the attempt times out
            clock.advance(30)
            assert (await client.with_response.tokens()).cache == "stale"


async def test_stale_if_error_raises_a_404(server: FakeServer, clock: Clock) -> None:
    cache = MemoryCache({"tokens": 10.0}, stale_if_error=60.0)
    async with client_for(server, cache) as client:
        client.set_testing(True, max_retries=0)
        await client.tokens()
        server.script("tokens", Reply(503), Reply(404))
        clock.advance(30)
        assert (await client.with_response.tokens()).cache == "stale"
        with pytest.raises(NotFoundError):
            await client.tokens()


async def test_without_stale_if_error_a_failed_refresh_raises(
    server: FakeServer, clock: Clock
) -> None:
    async with client_for(server, MemoryCache({"tokens": 10.0})) as client:
        client.set_testing(True, max_retries=0)
        await client.tokens()
        server.script("tokens", Reply(503))
        clock.advance(11)
        with pytest.raises(ServerError):
            await client.tokens()


# --- the bound -----------------------------------------------------------------------------


async def test_the_least_recently_used_entry_goes_first(server: FakeServer, clock: Clock) -> None:
    a, b, c = (t["address"] for t in server.exchange.tokens[:3])
    cache = MemoryCache({"token_markets": 60.0}, max_entries=2)
    async with client_for(server, cache) as client:
        for token in (a, b, a, c):  # a used again: b is the least recently used when c comes
            await client.token_markets(token)
        assert len(cache) == 2
        hit_a = await client.with_response.token_markets(a)
        miss_b = await client.with_response.token_markets(b)
    assert (hit_a.cache, miss_b.cache) == ("hit", "miss")
    assert [r.param for r in sent(server, "token_markets")] == [a, b, c, b]


async def test_clear_drops_every_entry(server: FakeServer, clock: Clock) -> None:
    cache = MemoryCache()
    async with client_for(server, cache) as client:
        await client.tokens()
        await cache.clear()
        assert (await client.with_response.tokens()).cache == "miss"
    assert len(sent(server)) == 2


# --- shared misses ---------------------------------------------------------------------------


async def test_identical_concurrent_misses_share_one_request_without_coalescing(
    server: FakeServer, clock: Clock
) -> None:
    async with client_for(server, MemoryCache(), coalesce=False) as client:
        with server.gate("tokens") as gate:
            calls = [asyncio.create_task(client.with_response.tokens()) for _ in range(5)]
            await gate.arrived(1)
            gate.release()
            answers = await asyncio.gather(*calls)
    assert len(sent(server)) == 1
    assert {a.cache for a in answers} == {"miss"}
    assert all(a.value == answers[0].value for a in answers)


async def test_a_shared_miss_is_not_taken_by_a_client_sending_another_varied_value(
    server: FakeServer, clock: Clock
) -> None:
    cache = MemoryCache()
    async with speaking(server, cache, "de") as german, speaking(server, cache, "fr") as french:
        with server.gate("tokens") as gate:
            first = asyncio.create_task(german.with_response.tokens())
            await gate.arrived(1)  # the German fetch is in flight; these join it
            joined = [
                asyncio.create_task(client.with_response.tokens())
                for client in (german, french, german)
            ]
            await settled(lambda: False, turns=20)  # let them reach the shared fetch
            gate.release()
            answers = await asyncio.gather(first, *joined)
    assert [a.cache for a in answers] == ["miss", "miss", "miss", "miss"]
    assert [r.headers.get("Accept-Language") for r in sent(server)] == ["de", "fr"]


async def test_when_the_fetcher_is_cancelled_a_waiting_call_fetches(
    server: FakeServer, clock: Clock
) -> None:
    async with client_for(server, MemoryCache(), coalesce=False) as client:
        with server.gate("tokens") as gate:
            leader = asyncio.create_task(client.tokens())
            await gate.arrived(1)
            follower = asyncio.create_task(client.with_response.tokens())
            await asyncio.sleep(0)  # let it join the leader's fetch
            leader.cancel()
            await gate.arrived(2)
            gate.release()
            answer = await follower
    assert answer.cache == "miss"
    assert len(sent(server)) == 2
    with pytest.raises(asyncio.CancelledError):
        await leader


async def test_a_shared_failure_reaches_every_waiting_call(
    server: FakeServer, clock: Clock
) -> None:
    server.script("tokens", Reply(404))
    async with client_for(server, MemoryCache(), coalesce=False) as client:
        with server.gate("tokens") as gate:
            calls = [asyncio.create_task(client.tokens()) for _ in range(3)]
            await gate.arrived(1)
            gate.release()
            results = await asyncio.gather(*calls, return_exceptions=True)
    assert all(isinstance(r, NotFoundError) for r in results)
    assert len(sent(server)) == 1


# --- arguments and parsing -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"ttl": {"prices": 1.0}}, "unknown operation"),
        ({"ttl": {"tokens": -1.0}}, "ttl"),
        ({"ttl": {"tokens": float("inf")}}, "ttl"),
        ({"ttl": {"tokens": True}}, "ttl"),
        ({"ttl": ["tokens"]}, "ttl must map"),
        ({"max_entries": 0}, "max_entries"),
        ({"max_entries": 1.5}, "max_entries"),
        ({"stale_if_error": -1}, "stale_if_error"),
        ({"stale_if_error": float("nan")}, "stale_if_error"),
    ],
)
def test_bad_arguments_are_refused(kwargs: dict[str, Any], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        MemoryCache(**kwargs)


def test_client_refuses_what_is_not_a_cache() -> None:
    with pytest.raises(ValueError, match="cache must be"):
        Client(base_url="http://127.0.0.1:1", cache={"tokens": 1.0})  # type: ignore[arg-type]


def test_the_default_ttl_caches_only_tokens_and_token_markets() -> None:
    cache = MemoryCache()
    assert dict(cache.ttl) == {"tokens": 300.0, "token_markets": 60.0}
    assert "MemoryCache(" in repr(cache)


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        ({}, 300.0),
        ({"Cache-Control": "public, max-age=60"}, 60.0),
        ({"Cache-Control": "max-age=5,,"}, 5.0),
        ({"Cache-Control": "public"}, 300.0),
        ({"Cache-Control": 'max-age="30"'}, 30.0),
        ({"Cache-Control": "max-age=600"}, 300.0),
        ({"Cache-Control": "no-cache"}, 0.0),
        ({"Cache-Control": "no-store"}, None),
        ({"Cache-Control": "max-age=\\1"}, None),
        ({"Cache-Control": "max-age"}, None),
        ({"Cache-Control": "=5"}, None),
        ({"Cache-Control": 'x="a\\"b"'}, None),
        ({"Cache-Control": "max-age=60", "Age": "20"}, 40.0),
        ({"Age": "100"}, 200.0),
        ({"Cache-Control": "max-age=60", "Age": "600"}, 0.0),
        ({"Age": "-1"}, None),
        ({"Age": "1.5"}, None),
    ],
)
def test_freshness_reads_cache_control_without_trusting_it(
    headers: dict[str, str], expected: float | None
) -> None:
    assert freshness(headers, 300.0) == expected


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        ({"ETag": '"abc"', "Last-Modified": MODIFIED}, ('"abc"', MODIFIED)),
        ({"ETag": 'W/"abc"'}, ('W/"abc"', None)),
        ({"ETag": '"a"b"'}, (None, None)),
        ({"ETag": '"' + "a" * 600 + '"'}, (None, None)),
        ({"ETag": '"é"'}, (None, None)),
        ({"Last-Modified": "yesterday"}, (None, None)),
        ({"Last-Modified": "Wed, 25 Nov 2026 10:00:00 GMT\x00"}, (None, None)),
        ({"Last-Modified": "Wed, 99 Nov 2026 10:00:00 GMT"}, (None, None)),
    ],
)
def test_validators_are_used_only_when_well_formed(
    headers: dict[str, str], expected: tuple[str | None, str | None]
) -> None:
    assert validators(headers) == expected


async def test_a_callers_session_sends_the_validators_too(server: FakeServer, clock: Clock) -> None:
    server.script("tokens", validating({"ETag": ETAG}), repeat=True)
    async with (
        aiohttp.ClientSession() as session,
        client_for(server, MemoryCache({"tokens": 10.0}), session=session) as client,
    ):
        await client.tokens()
        clock.advance(11)
        again = await client.with_response.tokens()
        other = await session.get(f"{server.base_url}/api/tokens")  # the session, unchanged
        other.release()
    assert again.cache == "revalidated"
    assert sent(server)[1].headers["If-None-Match"] == ETAG
    assert "If-None-Match" not in sent(server)[2].headers


async def test_a_no_store_answer_drops_the_entry_it_refreshes(
    server: FakeServer, clock: Clock
) -> None:
    server.script(
        "tokens",
        Reply(200, headers={"ETag": ETAG}),
        Reply(200, headers={"Cache-Control": "no-store"}),
    )
    async with client_for(server, MemoryCache({"tokens": 10.0})) as client:
        await client.tokens()
        clock.advance(11)
        await client.tokens()
        assert (await client.with_response.tokens()).cache == "miss"
    requests = sent(server)
    assert requests[1].headers["If-None-Match"] == ETAG
    assert "If-None-Match" not in requests[2].headers


async def test_a_304_saying_no_store_confirms_once_and_drops_the_entry(
    server: FakeServer, clock: Clock
) -> None:
    server.script(
        "tokens",
        Reply(200, headers={"ETag": ETAG}),
        Reply(304, body=b"", headers={"Cache-Control": "no-store"}),
    )
    async with client_for(server, MemoryCache({"tokens": 10.0})) as client:
        first = await client.with_response.tokens()
        clock.advance(11)
        second = await client.with_response.tokens()
        third = await client.with_response.tokens()
    assert (second.cache, third.cache) == ("revalidated", "miss")
    assert second.value == first.value
    assert second.headers["Cache-Control"] == "no-store"
    assert "If-None-Match" not in sent(server)[2].headers


async def test_an_entry_fresh_for_no_time_without_validators_is_dropped(
    server: FakeServer, clock: Clock
) -> None:
    server.script("tokens", Reply(200, headers={"ETag": ETAG}), Reply(200, json={"tokens": []}))
    async with client_for(server, MemoryCache({"tokens": 0.0})) as client:
        await client.tokens()
        await client.tokens()  # a 200 without validators: nothing left to revalidate
        assert (await client.with_response.tokens()).cache == "miss"
    assert "If-None-Match" not in sent(server)[2].headers


async def test_with_ttl_0_every_call_asks_and_a_failure_falls_back_to_the_last_answer(
    server: FakeServer, clock: Clock
) -> None:
    cache = MemoryCache({"tokens": 0.0}, stale_if_error=600.0)
    async with client_for(server, cache) as client:
        client.set_testing(True)
        first = await client.with_response.tokens()
        second = await client.with_response.tokens()
        server.script("tokens", Reply(503))
        clock.advance(599)
        third = await client.with_response.tokens()
    assert [a.cache for a in (first, second, third)] == ["miss", "revalidated", "stale"]
    assert third.value == first.value
    assert len(sent(server)) == 3


@given(
    st.lists(st.text(max_size=80), max_size=3),
    st.lists(st.text(max_size=80), max_size=2),
    st.lists(st.text(max_size=80), max_size=2),
    st.lists(st.text(max_size=40), max_size=2),
)
def test_no_header_value_makes_the_parsers_raise(
    cache_control: list[str], etags: list[str], dates: list[str], vary: list[str]
) -> None:
    headers: CIMultiDict[str] = CIMultiDict()
    for name, values in (
        ("Cache-Control", cache_control),
        ("ETag", etags),
        ("Last-Modified", dates),
        ("Vary", vary),
        ("Age", dates),
    ):
        for value in values:
            headers.add(name, value)
    lifetime = freshness(headers, 60.0)
    assert lifetime is None or 0.0 <= lifetime <= 60.0
    assert may_serve_stale(headers) in (True, False)
    names = vary_names(headers)
    assert names is None or all(_is_token(name) for name in names)
    etag, modified = validators(headers)
    assert etag is None or (etag.isascii() and etag.isprintable() and len(etag) <= 512)
    assert modified is None or (modified.isascii() and modified.isprintable())


async def test_stale_if_error_raises_a_body_over_max_response_bytes(
    server: FakeServer, clock: Clock
) -> None:
    cache = MemoryCache({"tokens": 10.0}, stale_if_error=60.0)
    async with client_for(server, cache, max_response_bytes=64 * 1024) as client:
        await client.tokens()
        server.script("tokens", Reply(200, body=b" " * 100_000))
        clock.advance(30)
        with pytest.raises(asyncapi_client.ResponseTooLargeError):
            await client.tokens()
