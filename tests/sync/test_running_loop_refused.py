"""A SyncClient call made on a thread whose event loop is running would block that loop (and
with the fake on the same loop, hang until its timeout): it is refused at once, before any
request, with the fix in the message."""

from __future__ import annotations

import asyncio
import time

import pytest

from asyncapi_client import SyncClient
from asyncapi_client.testing import FakeExchange, FakeServer


def test_a_call_inside_a_running_loop_is_refused_at_once() -> None:
    exchange = FakeExchange.generate(seed=2)

    async def main() -> None:
        async with FakeServer(exchange) as server:
            with SyncClient(base_url=server.base_url, timeout=30.0) as client:
                started = time.monotonic()
                with pytest.raises(RuntimeError, match="await") as caught:
                    client.pool(next(iter(exchange.pools)))
                assert time.monotonic() - started < 1.0
                assert "async Client" in str(caught.value)
            assert server.requests == []  # refused before any request

    asyncio.run(main())


def test_a_call_from_a_plain_thread_still_works() -> None:
    exchange = FakeExchange.generate(seed=2)
    with (
        FakeServer(exchange).in_thread() as server,
        SyncClient(base_url=server.base_url) as client,
    ):
        assert client.pool(next(iter(exchange.pools))).pool_id
