"""Telemetry shows what the server's rate-limit headers last said: the gauges
``asyncapi_client.ratelimit.remaining`` and ``asyncapi_client.ratelimit.limit`` per network."""

from __future__ import annotations

from typing import Any

import pytest

from asyncapi_client import Client
from asyncapi_client.testing import FakeExchange, FakeServer, Quota
from tests._telemetry import READER, install_providers


@pytest.fixture(scope="session", autouse=True)
def _providers() -> None:
    install_providers()


def gauges() -> dict[str, list[Any]]:
    """The gauges' data points as the reader collects them now."""
    data = READER.get_metrics_data()
    found: dict[str, list[Any]] = {}
    for resource in data.resource_metrics if data is not None else ():
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                if metric.name.startswith("asyncapi_client.ratelimit."):
                    found.setdefault(metric.name, []).extend(metric.data.data_points)
    return found


async def test_the_gauges_show_the_remaining_quota_and_the_limit() -> None:
    async with (
        FakeServer(
            FakeExchange.generate(seed=3), quota=Quota(50, 60.0), rate_limit_headers="split"
        ) as server,
        Client(base_url=server.base_url, telemetry=True) as client,
    ):
        for n in range(3):
            await client.tokens(search=f"t{n}")
        found = gauges()
    main = {"asyncapi_client.network": "mainnet"}
    remaining = found["asyncapi_client.ratelimit.remaining"]
    limit = found["asyncapi_client.ratelimit.limit"]
    assert [p.value for p in remaining if dict(p.attributes) == main] == [47]
    assert [p.value for p in limit if dict(p.attributes) == main] == [50]
