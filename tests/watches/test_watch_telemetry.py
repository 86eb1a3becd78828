"""A watch's polls in telemetry: one span per poll holding its requests' spans, and the
changes it saw on the counter ``asyncapi_client.watch.changes``."""

from __future__ import annotations

import asyncio
import copy
from collections.abc import AsyncIterator
from typing import Any

import pytest

from asyncapi_client import Client
from asyncapi_client.testing import FakeExchange, FakeServer
from tests._telemetry import EXPORTER, READER, install_providers, spans


@pytest.fixture(autouse=True)
def _providers() -> None:
    install_providers()
    EXPORTER.clear()
    READER.get_metrics_data()


@pytest.fixture
async def server() -> AsyncIterator[FakeServer]:
    async with FakeServer(FakeExchange.generate(seed=3, users=1, orders_per_user=30)) as srv:
        yield srv


def counted(name: str) -> float:
    data = READER.get_metrics_data()
    total: float = 0
    for resource in data.resource_metrics if data is not None else ():
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                if metric.name == name:
                    total += sum(getattr(p, "value", 0) for p in metric.data.data_points)
    return total


async def test_each_poll_is_a_span_and_its_changes_are_counted(server: FakeServer) -> None:
    exchange = server.exchange
    pool_id = next(iter(exchange.pools))
    async with Client(base_url=server.base_url, telemetry=True) as client:
        watch = client.watch_pool(pool_id, interval=0.02)
        first = asyncio.ensure_future(anext(watch))
        await server.wait_until(lambda: len(server.requests) >= 1)
        pool: dict[str, Any] = copy.deepcopy(exchange.pools[pool_id])
        pool["price"] = pool["price"] * 2
        exchange.pools[pool_id] = pool
        change = await asyncio.wait_for(first, 10)
        await watch.aclose()
    assert "price" in change.changed
    polls = [s for s in spans() if s.name == "asyncapi_client.watch.poll"]
    assert polls
    assert all(
        s.attributes is not None and s.attributes["asyncapi_client.watch"] == "pool" for s in polls
    )
    inner = [s for s in spans() if s.name == "asyncapi_client.pool"]
    poll_ids = {s.context.span_id for s in polls}
    assert any(s.parent is not None and s.parent.span_id in poll_ids for s in inner)
    assert counted("asyncapi_client.watch.changes") == 1
