"""The fake answers conditional requests: a strong ETag on every 200, a 304 for a matching
``If-None-Match``, so a client's cache revalidates against it; ``X-Poll-Interval`` when set."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator

import aiohttp
import pytest

from asyncapi_client import Client, MemoryCache
from asyncapi_client.testing import FakeExchange, FakeServer, Fault, Reply

STRONG_ETAG = re.compile(r'"[\x21\x23-\x7e]+"').fullmatch


@pytest.fixture
def exchange() -> FakeExchange:
    return FakeExchange.generate(seed=4, users=2, orders_per_user=30, leaderboard_size=20)


@pytest.fixture
async def server(exchange: FakeExchange) -> AsyncIterator[FakeServer]:
    async with FakeServer(exchange) as started:
        yield started


@pytest.fixture
async def session() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession() as opened:
        yield opened


def paths(exchange: FakeExchange) -> list[str]:
    token = exchange.tokens[0]["address"]
    pool = next(iter(exchange.pools))
    user = next(iter(exchange.users))
    return [
        "/api/tokens",
        "/api/tokens?search=eth",
        f"/api/aggregated/tokens/{token}/markets",
        f"/api/clob/pools/{pool}",
        f"/api/clob/users/{user}",
        f"/api/clob/users/{user}/orders?limit=5",
        "/api/dash/leaderboard?limit=7",
    ]


async def fetch(
    session: aiohttp.ClientSession, url: str, if_none_match: str | None = None
) -> tuple[int, str | None, bytes]:
    headers = {} if if_none_match is None else {"If-None-Match": if_none_match}
    async with session.get(url, headers=headers) as response:
        return response.status, response.headers.get("ETag"), await response.read()


async def test_every_200_carries_a_strong_etag_of_its_body(
    server: FakeServer, exchange: FakeExchange, session: aiohttp.ClientSession
) -> None:
    tags = set()
    for path in paths(exchange):
        status, etag, body = await fetch(session, server.base_url + path)
        assert status == 200
        assert etag is not None
        assert STRONG_ETAG(etag), etag
        again = await fetch(session, server.base_url + path)
        assert again == (200, etag, body)  # the same body, the same tag
        tags.add(etag)
    assert len(tags) == len(paths(exchange))  # another body, another tag
    status, etag, _ = await fetch(session, server.base_url + "/api/clob/pools/nope")
    assert (status, etag) == (404, None)


async def test_a_matching_if_none_match_gets_a_304_without_a_body(
    server: FakeServer, exchange: FakeExchange, session: aiohttp.ClientSession
) -> None:
    for path in paths(exchange):
        url = server.base_url + path
        _, etag, _ = await fetch(session, url)
        assert etag is not None
        for header in (etag, f"W/{etag}", f'"other", {etag}', "*"):
            assert await fetch(session, url, header) == (304, etag, b"")
        status, _, body = await fetch(session, url, '"other"')
        assert status == 200
        assert body


async def test_a_change_makes_a_new_etag_and_a_200(
    server: FakeServer, exchange: FakeExchange, session: aiohttp.ClientSession
) -> None:
    pool_id = next(iter(exchange.pools))
    url = f"{server.base_url}/api/clob/pools/{pool_id}"
    _, old, _ = await fetch(session, url)
    assert old is not None
    exchange.pools[pool_id]["price"] = 12.5
    status, new, body = await fetch(session, url, old)
    assert (status, new != old) == (200, True)
    assert b"12.5" in body
    assert await fetch(session, url, new) == (304, new, b"")


async def test_a_client_cache_revalidates_against_the_fake(
    server: FakeServer, exchange: FakeExchange
) -> None:
    pool_id = next(iter(exchange.pools))
    cache = MemoryCache(ttl={"pool": 0.0}, stale_if_error=60.0)  # stale at once, kept
    async with Client(base_url=server.base_url, cache=cache) as client:
        first = await client.with_response.pool(pool_id)
        second = await client.with_response.pool(pool_id)
        exchange.pools[pool_id]["tvl"] = 1234.5
        third = await client.with_response.pool(pool_id)
    assert (first.cache, second.cache, third.cache) == ("miss", "revalidated", "miss")
    assert second.value == first.value
    assert float(third.value.tvl) == 1234.5
    sent = [r for r in server.requests if r.operation == "pool"]
    assert [r.status for r in sent] == [200, 304, 200]
    assert sent[1].headers["If-None-Match"] == first.headers["ETag"]


async def test_scripted_replies_stay_exact(
    server: FakeServer, exchange: FakeExchange, session: aiohttp.ClientSession
) -> None:
    url = f"{server.base_url}/api/tokens"
    _, etag, _ = await fetch(session, url)
    assert etag is not None
    server.script(
        "tokens",
        Reply(200, json={"tokens": []}),
        Reply(200, headers={"ETag": '"mine"'}),
        Reply(200),
    )
    assert await fetch(session, url, etag) == (200, None, b'{"tokens":[]}')
    assert (await fetch(session, url, etag))[:2] == (200, '"mine"')
    status, tag, _ = await fetch(session, url, etag)
    assert (status, tag) == (200, etag)  # the normal answer and its tag, not a 304


async def test_x_poll_interval_is_on_every_answer(
    exchange: FakeExchange, session: aiohttp.ClientSession
) -> None:
    async with FakeServer(exchange, poll_interval=2.5) as server:
        assert server.poll_interval == 2.5
        pool = next(iter(exchange.pools))
        url = f"{server.base_url}/api/clob/pools/{pool}"
        _, etag, _ = await fetch(session, url)
        server.script("tokens", Reply(503))
        server.set_fault("leaderboard", Fault(error_rate=1.0, error_status=502))
        for target, header in (
            (url, None),
            (url, etag),  # a 304
            (f"{server.base_url}/api/nowhere", None),  # a 404
            (f"{server.base_url}/api/tokens", None),  # a scripted 503
            (f"{server.base_url}/api/dash/leaderboard", None),  # an injected 502
            (f"{server.testnet_base_url}/api/tokens", None),
        ):
            headers = {} if header is None else {"If-None-Match": header}
            async with session.get(target, headers=headers) as response:
                assert response.headers["X-Poll-Interval"] == "2.5", (target, response.status)
    for interval, shown in ((5, "5"), (None, None)):
        async with FakeServer(exchange, poll_interval=interval) as server:
            url = f"{server.base_url}/api/tokens"
            async with session.get(url) as response:
                assert response.headers.get("X-Poll-Interval") == shown


@pytest.mark.parametrize("value", [0, -1.0, float("nan"), float("inf"), "5", True])
def test_poll_interval_is_seconds(exchange: FakeExchange, value: object) -> None:
    with pytest.raises(ValueError, match="poll_interval must be seconds"):
        FakeServer(exchange, poll_interval=value)  # type: ignore[arg-type]
