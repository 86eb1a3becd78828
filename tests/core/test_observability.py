"""What a user can see: the ``asyncapi_client`` logger, aiohttp trace configs, error texts."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator

import pytest

from asyncapi_client import Client, DecodeError, NotFoundError, TransportError
from tests._checks import TraceRecorder, settled, stray_tasks
from tests._rawserver import RawServer, reserve_port, reset_mid_body, respond

SECRET = "Bearer s3cr3t-token-value"


@pytest.fixture(autouse=True)
async def _no_stray_tasks() -> AsyncIterator[None]:
    """Every test must leave no task of ours behind."""
    yield
    assert await settled(lambda: not stray_tasks()), stray_tasks()


def ours(caplog: pytest.LogCaptureFixture, level: int) -> list[str]:
    return [
        r.getMessage() for r in caplog.records if r.name == "asyncapi_client" and r.levelno == level
    ]


async def test_each_retry_is_logged_at_info_with_reason_attempt_and_wait(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="asyncapi_client")
    script = [respond(503, headers={"Retry-After": "0.2"}), reset_mid_body()]
    async with (
        RawServer(script) as server,
        Client(base_url=server.base_url, max_retries=3) as client,
    ):
        await client.pool("p1")
    first, second = ours(caplog, logging.INFO)
    url = f"{server.base_url}/api/clob/pools/p1"
    assert url in first
    assert "[mainnet]" in first
    assert "HTTP 503" in first
    assert "attempt 1 of 4" in first
    assert "in 0.200s" in first
    assert "TransportError" in second
    assert "attempt 2 of 4" in second


async def test_each_request_is_logged_at_debug(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="asyncapi_client")
    async with (
        RawServer([respond(500)]) as server,
        Client(base_url=server.base_url) as client,
    ):
        client.set_testing(True)
        await client.pool("p1")
        await client.pool("p2")
    debug = ours(caplog, logging.DEBUG)
    assert len(debug) == 3
    assert "pool attempt 1" in debug[0]
    assert "pool attempt 2" in debug[1]
    assert "/api/clob/pools/p2 [mainnet] pool attempt 1" in debug[2]


async def test_header_values_are_never_logged(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)  # every logger, aiohttp's too
    script = [respond(503), respond(429, headers={"Retry-After": "0"}), respond(404)]
    async with (
        RawServer(script) as server,
        Client(base_url=server.base_url, headers={"Authorization": SECRET}) as client,
    ):
        with pytest.raises(NotFoundError) as caught:
            await client.pool("p1")
    assert server.conns[0].headers["authorization"] == SECRET  # it was sent ...
    assert len(caplog.records) >= 5
    for record in caplog.records:  # ... and never logged
        assert "s3cr3t" not in record.getMessage()
        assert "s3cr3t" not in repr(record.args)
    assert "s3cr3t" not in str(caught.value)


async def test_trace_configs_see_every_attempt_tagged_with_network_operation_and_attempt() -> None:
    trace = TraceRecorder()
    async with (
        RawServer([respond(502)]) as main,
        RawServer([respond(200, {"markets": []})]) as test,
        Client(
            base_url=main.base_url, testnet_base_url=test.base_url, trace_configs=[trace.config]
        ) as client,
    ):
        client.set_testing(True)
        await client.pool("p1")
        await client.token_markets("0xtoken")
        await client.pool("p2", network="testnet")
    assert trace.starts == [
        {"operation": "pool", "network": "mainnet", "attempt": 1},
        {"operation": "pool", "network": "mainnet", "attempt": 2},
        {"operation": "token_markets", "network": "testnet", "attempt": 1},
        {"operation": "pool", "network": "testnet", "attempt": 1},
    ]
    assert trace.urls[2] == f"{test.base_url}/api/aggregated/tokens/0xtoken/markets"
    assert trace.ends == [502, 200, 200, 200]


async def test_errors_say_which_network_and_url_they_came_from() -> None:
    sock = reserve_port()
    refused = f"http://127.0.0.1:{sock.getsockname()[1]}"
    try:
        async with (
            RawServer(default=respond(404)) as main,
            RawServer(default=respond(200, b"not json")) as test,
            Client(base_url=main.base_url, testnet_base_url=test.base_url) as client,
            Client(base_url=refused, max_retries=0) as nowhere,
        ):
            with pytest.raises(NotFoundError) as not_found:
                await client.pool("p1")
            with pytest.raises(DecodeError) as garbage:
                await client.pool("p2", network="testnet")
            with pytest.raises(TransportError) as unreachable:
                await nowhere.user("0xabc")
    finally:
        sock.close()
    for caught, network, url in [
        (not_found.value, "mainnet", f"{main.base_url}/api/clob/pools/p1"),
        (garbage.value, "testnet", f"{test.base_url}/api/clob/pools/p2"),
        (unreachable.value, "mainnet", f"{refused}/api/clob/users/0xabc"),
    ]:
        assert caught.network == network
        assert caught.url == url
        assert f"[{network}]" in str(caught)
        assert url in str(caught)
