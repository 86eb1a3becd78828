"""Shared test configuration: the fake exchange answering from the oracle, and a client of it.

The ``server`` fixture is our own FakeServer with every operation scripted from the spec's
literal bodies (tests/_oracle.py); a module that needs a differently configured ``client``
defines its own fixture, which overrides this one.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from hypothesis import settings

from asyncapi_client import Client
from asyncapi_client.testing import FakeServer
from tests._oracle import oracle_server
from tests._schedule import waiting_first

# No per-example time limit: on a shared 2-core machine (CI, the matrix) one example of a
# pure function can take 300 ms when the scheduler looks away; hypothesis's 200 ms deadline
# then fails a correct test. The example counts still bound each test.
settings.register_profile("suite", deadline=None)
settings.load_profile("suite")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "waits: the test spends seconds waiting and little CPU; it runs first, on half the"
        " workers, while the others use the cores (tests/_schedule.py)",
    )


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Run the tests marked ``waits`` first, at the heads of half the workers' shares."""
    workers = getattr(config, "workerinput", {}).get("workercount", 1)
    items[:] = waiting_first(
        items, workers, lambda item: item.get_closest_marker("waits") is not None
    )


@pytest.fixture
async def server() -> AsyncIterator[FakeServer]:
    """The fake exchange, both networks on loopback, answering from the oracle; all recorded."""
    async with oracle_server() as srv:
        yield srv


@pytest.fixture
async def client(server: FakeServer) -> AsyncIterator[Client]:
    """A client of the oracle server that fails at once: no retries, no waits."""
    async with Client(base_url=server.base_url, testnet_base_url=server.testnet_base_url) as c:
        c.set_testing(True, max_retries=0)
        yield c
