"""OpenTelemetry (``asyncapi_client/_telemetry.py``): the contract's spans and metrics, seen
through the real SDK's in-memory span exporter and metric reader (no mocks).

The SDK's providers are global and can be set once per process (tests/_telemetry.py sets
them for the whole session); each test clears what the previous one left.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.trace import SpanKind, StatusCode

import asyncapi_client
from asyncapi_client import Client, NotFoundError
from asyncapi_client.testing import FakeServer
from tests._oracle import pool_json
from tests._pages import StaticBoard, serve_board, serving
from tests._rawserver import RawServer, close, respond
from tests._telemetry import EXPORTER, READER, install_providers, spans


@pytest.fixture(scope="session", autouse=True)
def _providers() -> None:
    install_providers()


@pytest.fixture(autouse=True)
def _fresh() -> None:
    EXPORTER.clear()
    READER.get_metrics_data()  # delta temporality: reading empties the window


def points() -> dict[str, list[Any]]:
    """The data points of each metric since the last read (reading empties the window)."""
    data = READER.get_metrics_data()
    found: dict[str, list[Any]] = {}
    for resource in data.resource_metrics if data is not None else ():
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                found.setdefault(metric.name, []).extend(metric.data.data_points)
    return found


async def test_a_retried_call_is_one_span_with_a_retry_event() -> None:
    async with (
        RawServer([respond(503)], default=respond(200, pool_json("p1"))) as server,
        Client(base_url=server.base_url, telemetry=True) as client,
    ):
        client.set_testing(True)
        await client.pool("p1")
    (span,) = spans()
    assert span.name == "asyncapi_client.pool"
    assert span.kind is SpanKind.CLIENT
    assert span.instrumentation_scope is not None
    assert span.instrumentation_scope.name == "asyncapi_client"
    assert span.instrumentation_scope.version == asyncapi_client.__version__
    assert dict(span.attributes or {}) == {
        "asyncapi_client.operation": "pool",
        "asyncapi_client.network": "mainnet",
        "url.template": "/api/clob/pools/{poolId}",
        "server.address": "127.0.0.1",
        "http.response.status_code": 200,
        "asyncapi_client.attempts": 2,
    }
    assert span.status.status_code is StatusCode.UNSET
    (event,) = span.events
    assert event.name == "retry"
    assert dict(event.attributes or {}) == {"attempt": 1, "wait": 0.0, "error.type": "ServerError"}
    metrics_seen = points()
    (retries,) = metrics_seen["asyncapi_client.retries"]
    assert retries.value == 1
    assert dict(retries.attributes) == {
        "asyncapi_client.operation": "pool",
        "asyncapi_client.network": "mainnet",
    }
    (duration,) = metrics_seen["asyncapi_client.operation.duration"]
    assert duration.count == 1
    assert duration.sum > 0


async def test_a_failed_call_is_an_error_span_with_its_type() -> None:
    script = [close(), respond(404)]
    async with (
        RawServer(script) as server,
        Client(base_url=server.base_url, testnet_base_url=server.base_url, telemetry=True) as c,
    ):
        c.set_testing(True)
        with pytest.raises(NotFoundError):
            await c.user("0xu", network="testnet")
    (span,) = spans()
    assert span.name == "asyncapi_client.user"
    assert span.status.status_code is StatusCode.ERROR
    attributes = dict(span.attributes or {})
    assert attributes["error.type"] == "NotFoundError"
    assert attributes["http.response.status_code"] == 404
    assert attributes["asyncapi_client.attempts"] == 2
    assert attributes["asyncapi_client.network"] == "testnet"
    assert attributes["url.template"] == "/api/clob/users/{address}"
    assert [e.name for e in span.events] == ["retry", "exception"]
    assert dict(span.events[0].attributes or {})["error.type"] == "TransportError"
    (duration,) = points()["asyncapi_client.operation.duration"]
    assert dict(duration.attributes) == {
        "asyncapi_client.operation": "user",
        "asyncapi_client.network": "testnet",
        "error.type": "NotFoundError",
    }


async def test_a_coalesced_pair_is_two_spans_of_one_request(server: FakeServer) -> None:
    async with (
        Client(base_url=server.base_url, telemetry=True) as client,
        server.gate("pool") as gate,
    ):
        pair_of_calls = asyncio.gather(client.pool("p1"), client.with_response.pool("p1"))
        await gate.arrived(1)  # both are in flight: the answer is held
        gate.release()
        await pair_of_calls
    assert len(server.requests) == 1
    pair = spans()
    assert [s.name for s in pair] == ["asyncapi_client.pool"] * 2
    assert {dict(s.attributes or {})["asyncapi_client.attempts"] for s in pair} == {1}
    assert len({s.context.span_id for s in pair if s.context is not None}) == 2
    (duration,) = points()["asyncapi_client.operation.duration"]
    assert duration.count == 2


async def test_a_leaderboard_walk_is_one_span_per_page() -> None:
    async with (
        serving(leaderboard=serve_board(StaticBoard(23))) as server,
        Client(base_url=server.base_url, telemetry=True) as client,
    ):
        entries = [entry async for entry in client.iter_leaderboard(page_size=5)]
    assert len(entries) == 23
    pages = spans()
    assert [s.name for s in pages] == ["asyncapi_client.leaderboard"] * 5
    assert {dict(s.attributes or {})["url.template"] for s in pages} == {"/api/dash/leaderboard"}


async def test_a_span_is_the_current_span_of_what_the_call_runs() -> None:
    """Spans nest under the caller's span, so a bot's trace shows its API calls."""
    tracer = trace.get_tracer("bot")
    async with (
        RawServer() as server,
        Client(base_url=server.base_url, telemetry=True) as client,
    ):
        with tracer.start_as_current_span("bot.tick"):
            await client.pool("p1")
    call, tick = spans()
    assert call.parent is not None
    assert tick.context is not None
    assert call.parent.span_id == tick.context.span_id


def test_telemetry_must_be_a_bool() -> None:
    with pytest.raises(ValueError, match="telemetry"):
        Client(base_url="http://h.example", telemetry="yes")  # type: ignore[arg-type]


def _python(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )


def test_without_telemetry_nothing_of_opentelemetry_is_imported() -> None:
    done = _python(
        "import asyncio, sys\n"
        "from asyncapi_client import Client\n"
        "from asyncapi_client.testing import FakeExchange, FakeServer\n"
        "async def main():\n"
        "    exchange = FakeExchange.generate(seed=1)\n"
        "    async with FakeServer(exchange) as server, Client(base_url=server.base_url) as c:\n"
        "        await c.pool(next(iter(exchange.pools)))\n"
        "asyncio.run(main())\n"
        "print(sorted(m for m in sys.modules if m.startswith('opentelemetry')))\n"
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_without_the_extra_telemetry_true_names_it() -> None:
    done = _python(
        "import sys\n"
        "sys.modules['opentelemetry'] = None  # as if opentelemetry-api were not installed\n"
        "from asyncapi_client import Client\n"
        "try:\n"
        "    Client(base_url='http://h.example', telemetry=True)\n"
        "except ValueError as exc:\n"
        "    print(exc)\n"
    )
    assert done.returncode == 0, done.stderr
    assert "asyncapi-client[otel]" in done.stdout
