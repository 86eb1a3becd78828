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

# No per-example time limit: on a shared 2-core machine (CI, the matrix) one example of a
# pure function can take 300 ms when the scheduler looks away; hypothesis's 200 ms deadline
# then fails a correct test. The example counts still bound each test.
settings.register_profile("suite", deadline=None)
settings.load_profile("suite")


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
