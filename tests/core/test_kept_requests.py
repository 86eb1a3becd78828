"""A polled identifier's request is made once and kept, not built again on every call.

``token_markets``, ``pool`` and ``user`` keep the Request of their latest identifiers, and
the client's own session keeps the URL objects of short query-less URLs, so that a bot
polling the same pools pays for checking, encoding and building a request once. What a
user relies on: a kept request never stands for another network or deadline, a bad
identifier is refused every time, and polling ever new identifiers keeps memory bounded.
"""

from __future__ import annotations

import gc
import tracemalloc

import pytest

from asyncapi_client import Client, Network, RequestTimeoutError
from asyncapi_client.testing import FakeServer
from tests._oracle import oracle_reply
from tests._pages import serve_pools, serving

pytestmark = pytest.mark.asyncio


def _networks(server: FakeServer) -> list[Network]:
    return [r.network for r in server.requests]


async def test_a_kept_request_does_not_stand_for_another_network() -> None:
    async with (
        serving(pool=serve_pools(), token_markets=oracle_reply) as server,
        Client(base_url=server.base_url, testnet_base_url=server.testnet_base_url) as client,
    ):
        assert (await client.pool("p1")).pool_id == "p1"
        assert (await client.pool("p1", network="testnet")).pool_id == "p1"
        assert (await client.pool("p1")).pool_id == "p1"
        response = await client.with_response.pool("p1", network=Network.TESTNET)
        assert response.value.pool_id == "p1"
        assert _networks(server) == [
            Network.MAINNET,
            Network.TESTNET,
            Network.MAINNET,
            Network.TESTNET,
        ]
        # token_markets goes to the test network by default, kept or not
        for _ in range(2):
            await client.token_markets("0xabc")
        assert _networks(server)[-2:] == [Network.TESTNET, Network.TESTNET]


async def test_a_kept_request_does_not_stand_for_a_call_with_a_deadline() -> None:
    async with (
        serving(pool=serve_pools()) as server,
        Client(base_url=server.base_url) as client,
    ):
        await client.pool("p1")  # kept, with the client's deadline (none)
        server.script("pool", serve_pools(delay=30.0), repeat=True)
        with pytest.raises(RequestTimeoutError, match=r"deadline of 0\.2s"):
            await client.pool("p1", deadline=0.2)


async def test_a_bad_identifier_is_refused_every_time_and_an_encoded_one_is_sent_alike() -> None:
    async with (
        serving(user=oracle_reply) as server,
        Client(base_url=server.base_url) as client,
    ):
        for _ in range(2):
            with pytest.raises(ValueError, match="dot segment"):
                await client.pool("..")
            with pytest.raises(ValueError, match="non-empty string"):
                await client.user("")
        assert server.requests == []
        for _ in range(2):
            await client.user("a/b c")
        assert [r.raw_path for r in server.requests] == ["/api/clob/users/a%2Fb%20c"] * 2


@pytest.mark.waits
async def test_polling_ever_new_identifiers_keeps_memory_bounded() -> None:
    """1,600 pools of 200-character ids: what is kept stays under its bounds (512 requests
    and 512 URL objects), so the last 800 calls add at most one bound's worth, not 800
    requests' (about 0.9 MB were they all kept)."""
    ids = [f"{n:0200d}" for n in range(1600)]
    async with (
        serving(pool=serve_pools()) as server,
        Client(base_url=server.base_url) as client,
    ):
        for pool_id in ids[:800]:
            await client.pool(pool_id)
        server.requests.clear()
        gc.collect()
        tracemalloc.start(1)
        try:
            before = tracemalloc.get_traced_memory()[0]
            for pool_id in ids[800:]:
                await client.pool(pool_id)
                server.requests.clear()  # the fake's own record, in this process too
            gc.collect()
            growth = tracemalloc.get_traced_memory()[0] - before
        finally:
            tracemalloc.stop()
    assert growth < 450_000, f"{growth:,} B for 800 new ids"
