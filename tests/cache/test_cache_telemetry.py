"""The span of a cached operation says where its value came from: ``asyncapi_client.cache``,
seen through the real OpenTelemetry SDK's in-memory exporter. The SDK's tracer provider can
be set once per process: this module uses the exporter of tests/test_telemetry.py, on the
provider that module sets, or sets one with that exporter itself when it runs first."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

from asyncapi_client import Client, MemoryCache, NotFoundError
from asyncapi_client.testing import FakeExchange, FakeServer, RecordedRequest, Reply
from tests.test_telemetry import EXPORTER


@pytest.fixture(scope="session", autouse=True)
def _tracing() -> None:
    if not isinstance(trace.get_tracer_provider(), TracerProvider):
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(EXPORTER))
        trace.set_tracer_provider(provider)


@pytest.fixture(autouse=True)
def _fresh() -> None:
    EXPORTER.clear()


def spans() -> list[ReadableSpan]:
    return list(EXPORTER.get_finished_spans())


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
