"""The span of a cached operation says where its value came from: ``asyncapi_client.cache``,
seen through the real OpenTelemetry SDK's in-memory exporter (tests/_telemetry.py, which
sets the SDK's providers once per process for every module that looks at spans)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from asyncapi_client import Client, MemoryCache, NotFoundError
from asyncapi_client.testing import FakeExchange, FakeServer, RecordedRequest, Reply
from tests._telemetry import EXPORTER, install_providers, spans


@pytest.fixture(scope="session", autouse=True)
def _tracing() -> None:
    install_providers()


@pytest.fixture(autouse=True)
def _fresh() -> None:
    EXPORTER.clear()


ETAG = '"t1"'


@pytest.fixture
async def server() -> AsyncIterator[FakeServer]:
    async with FakeServer(FakeExchange.generate(seed=9)) as started:
        yield started


def revalidating(request: RecordedRequest) -> Reply:
    headers = {"ETag": ETAG, "Cache-Control": "no-cache"}
    if request.headers.get("If-None-Match") == ETAG:
        return Reply(304, body=b"", headers=headers)
    return Reply(200, headers=headers)


async def test_each_span_says_miss_hit_or_revalidated(server: FakeServer) -> None:
    server.script("token_markets", revalidating, repeat=True)
    token = server.exchange.tokens[0]["address"]
    async with Client(
        base_url=server.base_url,
        testnet_base_url=server.testnet_base_url,
        telemetry=True,
        cache=MemoryCache(),
    ) as client:
        await client.tokens()
        await client.tokens()
        await client.with_response.tokens()
        await client.token_markets(token)
        await client.token_markets(token)
        pool_id = next(iter(server.exchange.pools))
        await client.pool(pool_id)
    found = [(s.name, (s.attributes or {}).get("asyncapi_client.cache")) for s in spans()]
    assert found == [
        ("asyncapi_client.tokens", "miss"),
        ("asyncapi_client.tokens", "hit"),
        ("asyncapi_client.tokens", "hit"),
        ("asyncapi_client.token_markets", "miss"),
        ("asyncapi_client.token_markets", "revalidated"),
        ("asyncapi_client.pool", None),  # not cached: no attribute
    ]
    hit = spans()[1]
    assert (hit.attributes or {}).get("asyncapi_client.attempts") == 0


async def test_a_stale_answer_is_said_so_and_a_failure_is_an_error_span(
    server: FakeServer,
) -> None:
    async with Client(
        base_url=server.base_url,
        telemetry=True,
        cache=MemoryCache({"tokens": 0.0}, stale_if_error=60.0),
        max_retries=0,
    ) as client:
        server.script("tokens", Reply(200, headers={"ETag": ETAG}), Reply(503), Reply(404))
        await client.tokens()
        await client.tokens()
        with pytest.raises(NotFoundError):
            await client.tokens()
    found = [(s.attributes or {}).get("asyncapi_client.cache") for s in spans()]
    assert found == ["miss", "stale", None]
    assert (spans()[2].attributes or {}).get("error.type") == "NotFoundError"
