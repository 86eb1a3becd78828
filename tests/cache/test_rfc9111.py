"""HTTP caching details of RFC 9111 the cache keeps: a 304 that names another strong
validator than the stored one confirms nothing (4.3.4), and a past or invalid ``Expires``
without ``max-age`` makes an answer stale at once (5.3)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from email.utils import formatdate

import pytest

from asyncapi_client import Client, MemoryCache
from asyncapi_client.testing import FakeExchange, FakeServer, RecordedRequest, Reply


@pytest.fixture
async def server() -> AsyncIterator[FakeServer]:
    async with FakeServer(FakeExchange.generate(seed=3)) as started:
        yield started


def tokens_sent(server: FakeServer) -> list[RecordedRequest]:
    return [r for r in server.requests if r.operation == "tokens"]


async def test_a_304_with_another_strong_etag_is_not_taken_as_confirming_the_entry(
    server: FakeServer,
) -> None:
    server.script(
        "tokens",
        Reply(200, json={"tokens": []}, headers={"ETag": '"v1"', "Cache-Control": "no-cache"}),
        Reply(304, body=b"", headers={"ETag": '"v2"'}),  # "v2" is not what we hold
    )
    cache = MemoryCache()  # no-cache: stored, and revalidated on every use
    async with Client(base_url=server.base_url, cache=cache, max_retries=0) as client:
        first = await client.with_response.tokens()
        second = await client.with_response.tokens()
    assert first.value == ()
    assert second.cache == "miss"  # fetched whole, not "revalidated" on another's word
    assert len(second.value) > 0  # the current representation, not the stored empty one
    sent = tokens_sent(server)
    assert [r.headers.get("If-None-Match") for r in sent] == [None, '"v1"', None]


async def test_a_304_with_the_same_etag_still_confirms(server: FakeServer) -> None:
    server.script(
        "tokens",
        Reply(200, json={"tokens": []}, headers={"ETag": '"v1"', "Cache-Control": "no-cache"}),
        Reply(304, body=b"", headers={"ETag": '"v1"'}),
    )
    cache = MemoryCache()
    async with Client(base_url=server.base_url, cache=cache, max_retries=0) as client:
        await client.tokens()
        second = await client.with_response.tokens()
    assert second.cache == "revalidated"
    assert second.value == ()


@pytest.mark.parametrize(
    "expires",
    ["past", "same-as-date", "zero"],
)
async def test_an_expires_not_after_the_date_makes_the_answer_stale_at_once(
    server: FakeServer, expires: str
) -> None:
    date = formatdate(usegmt=True)
    value = {"past": "Thu, 01 Jan 1970 00:00:00 GMT", "same-as-date": date, "zero": "0"}[expires]
    server.script("tokens", Reply(200, headers={"Date": date, "Expires": value}), repeat=True)
    cache = MemoryCache(ttl={"tokens": 300.0})
    async with Client(base_url=server.base_url, cache=cache) as client:
        await client.tokens()
        second = await client.with_response.tokens()
    assert second.cache == "miss"
    assert len(tokens_sent(server)) == 2


async def test_a_future_expires_leaves_the_ttl_in_charge(server: FakeServer) -> None:
    server.script(
        "tokens",
        Reply(200, headers={"Expires": "Fri, 31 Dec 9999 23:59:59 GMT"}),
        repeat=True,
    )
    cache = MemoryCache(ttl={"tokens": 300.0})
    async with Client(base_url=server.base_url, cache=cache) as client:
        await client.tokens()
        second = await client.with_response.tokens()
    assert second.cache == "hit"
