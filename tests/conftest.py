"""Shared test configuration: the independent contract server and a client of it.

Servers live in their own modules under tests/; a module that needs a differently
configured ``client`` defines its own fixture, which overrides this one.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from asyncapi_client import Client
from tests._contract_server import ContractServer


@pytest.fixture
async def server() -> AsyncIterator[ContractServer]:
    """The contract server: both networks on loopback, every request recorded."""
    async with ContractServer() as srv:
        yield srv


@pytest.fixture
async def client(server: ContractServer) -> AsyncIterator[Client]:
    """A client of the contract server that fails at once: no retries, no waits."""
    async with Client(base_url=server.base_url, testnet_base_url=server.testnet_base_url) as c:
        c.set_testing(True, max_retries=0)
        yield c
