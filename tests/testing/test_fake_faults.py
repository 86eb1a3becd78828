"""Fault injection on the fake server, seen through the real Client, and the request record."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest

from asyncapi_client import (
    BadRequestError,
    Client,
    DecodeError,
    Network,
    NotFoundError,
    RateLimitError,
    RequestTimeoutError,
    ServerError,
    TransportError,
)
from asyncapi_client.testing import OPERATIONS, FakeExchange, FakeServer, Fault, RecordedRequest


def client_for(server: FakeServer, **options: Any) -> Client:
    return Client(base_url=server.base_url, testnet_base_url=server.testnet_base_url, **options)


@pytest.fixture(scope="module")
def exchange() -> FakeExchange:
    return FakeExchange.generate(seed=5, users=2, orders_per_user=60, tokens=10, pools=3)


@pytest.fixture
async def server(exchange: FakeExchange) -> AsyncIterator[FakeServer]:
    async with FakeServer(exchange, seed=11) as running:
        yield running


@pytest.fixture
def pool_id(exchange: FakeExchange) -> str:
    return next(iter(exchange.pools))


def of(server: FakeServer, operation: str) -> list[RecordedRequest]:
    return [r for r in server.requests if r.operation == operation]


# --- each kind of fault, as the client sees it -------------------------------------------


@pytest.mark.parametrize(
    ("status", "error"), [(500, ServerError), (503, ServerError), (400, BadRequestError)]
)
async def test_an_error_rate_of_one_answers_the_status(
    server: FakeServer, pool_id: str, status: int, error: type[Exception]
) -> None:
    server.set_fault("pool", Fault(error_rate=1.0, error_status=status))
    async with client_for(server, max_retries=0) as client:
        with pytest.raises(error) as caught:
            await client.pool(pool_id)
        assert getattr(caught.value, "status", None) == status
        assert await client.tokens()  # other operations are untouched
    [record] = of(server, "pool")
    assert (record.status, record.fault) == (status, "error")


async def test_server_errors_are_retried_to_success(server: FakeServer, pool_id: str) -> None:
    server.set_fault("pool", Fault(error_rate=0.5, error_status=503))
    async with client_for(server, max_retries=20) as client:
        client.set_testing(True)
        for _ in range(20):
            assert (await client.pool(pool_id)).pool_id == pool_id
    statuses = [r.status for r in of(server, "pool")]
    assert statuses.count(200) == 20
    assert statuses.count(503) > 0
    assert set(statuses) == {200, 503}


async def test_max_in_a_row_bounds_the_faults_on_one_url(
    server: FakeServer, exchange: FakeExchange
) -> None:
    """With every request faulted, one URL meets two faults, then an answer, and again; a
    client with two retries always gets through."""
    first, second = list(exchange.pools)[:2]
    server.set_fault("pool", Fault(error_rate=1.0, error_status=503, max_in_a_row=2))
    async with client_for(server, max_retries=2) as client:
        client.set_testing(True)
        for pool_id in (first, first, second):
            assert (await client.pool(pool_id)).pool_id == pool_id
    assert [(r.param, r.status) for r in of(server, "pool")] == [
        *[(first, 503), (first, 503), (first, 200)] * 2,
        (second, 503),
        (second, 503),
        (second, 200),
    ]


async def test_max_in_a_row_counts_each_url_on_its_own(server: FakeServer, pool_id: str) -> None:
    """Interleaved URLs do not end each other's row; latency is not a fault."""
    other = f"{pool_id}?x=1"
    server.set_fault("pool", Fault(drop_rate=1.0, max_in_a_row=1, latency=0.001))
    for path in (pool_id, other, pool_id, other, pool_id):  # one request a connection
        reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
        writer.write(f"GET /api/clob/pools/{path} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
        await reader.read(65536)  # the answer, or nothing for a drop
        writer.close()
        with contextlib.suppress(ConnectionError):
            await writer.wait_closed()
    assert [r.fault for r in of(server, "pool")] == ["drop", "drop", None, None, "drop"]


async def test_a_client_error_status_is_not_retried(server: FakeServer, pool_id: str) -> None:
    server.set_fault("pool", Fault(error_rate=1.0, error_status=400))
    async with client_for(server, max_retries=5) as client:
        client.set_testing(True)
        with pytest.raises(BadRequestError):
            await client.pool(pool_id)
    assert len(of(server, "pool")) == 1


async def test_a_rate_limit_burst_answers_429_then_recovers(
    server: FakeServer, pool_id: str
) -> None:
    server.set_fault("pool", Fault(rate_limit_burst=2, retry_after=1.0))
    async with client_for(server, max_retries=0) as client:
        client.set_testing(True)  # no retries, and no shared back-off before the next call
        for _ in range(2):
            with pytest.raises(RateLimitError) as caught:
                await client.pool(pool_id)
            assert caught.value.retry_after == 1.0
            assert caught.value.headers["Retry-After"] == "1"
        assert (await client.pool(pool_id)).pool_id == pool_id
    assert [(r.status, r.fault) for r in of(server, "pool")] == [
        (429, "rate_limit"),
        (429, "rate_limit"),
        (200, None),
    ]


async def test_a_rate_limit_burst_is_retried_without_waiting_in_testing_mode(
    server: FakeServer, pool_id: str
) -> None:
    server.set_fault("pool", Fault(rate_limit_burst=3, retry_after=5.0))
    async with client_for(server, max_retries=3) as client:
        client.set_testing(True)
        started = time.monotonic()
        assert (await client.pool(pool_id)).pool_id == pool_id
        # Honouring Retry-After would take 15 s; the bound is loose for a noisy machine.
        assert time.monotonic() - started < 5.0
    assert [r.status for r in of(server, "pool")] == [429, 429, 429, 200]


@pytest.mark.parametrize(
    ("retry_after", "header", "seconds"),
    [
        (0.25, "0.25", 0.25),
        (3, "3", 3.0),
        ("Wed, 21 Oct 2015 07:28:00 GMT", "Wed, 21 Oct 2015 07:28:00 GMT", 0.0),
        (None, None, None),
    ],
)
async def test_retry_after_is_written_as_given(
    server: FakeServer,
    pool_id: str,
    retry_after: float | str | None,
    header: str | None,
    seconds: float | None,
) -> None:
    server.set_fault("pool", Fault(rate_limit_burst=1, retry_after=retry_after))
    async with client_for(server, max_retries=0) as client:
        with pytest.raises(RateLimitError) as caught:
            await client.pool(pool_id)
    assert caught.value.headers.get("Retry-After") == header
    assert caught.value.retry_after == seconds


async def test_a_dropped_connection_is_a_transport_error(server: FakeServer, pool_id: str) -> None:
    server.set_fault("pool", Fault(drop_rate=1.0))
    async with client_for(server, max_retries=0) as client:
        await client.tokens()  # a kept-alive connection, as a bot would have
        with pytest.raises(TransportError, match="closed the connection"):
            await client.pool(pool_id)
    records = of(server, "pool")
    assert records
    assert {(r.status, r.fault) for r in records} == {(None, "drop")}


async def test_dropped_connections_are_retried_to_success(server: FakeServer, pool_id: str) -> None:
    server.set_fault("pool", Fault(drop_rate=0.5))
    async with client_for(server, max_retries=20) as client:
        client.set_testing(True)
        for _ in range(20):
            assert (await client.pool(pool_id)).pool_id == pool_id
    records = of(server, "pool")
    dropped = [r for r in records if r.fault == "drop"]
    assert dropped
    assert len(records) == 20 + len(dropped)


async def test_a_body_cut_short_is_a_transport_error_and_retried(
    server: FakeServer, exchange: FakeExchange
) -> None:
    address = next(iter(exchange.users))
    server.set_fault("user", Fault(truncate_rate=1.0))
    async with client_for(server, max_retries=0) as client:
        with pytest.raises(TransportError, match="cut short"):
            await client.user(address)
        server.set_fault("user", Fault(truncate_rate=0.5))
        client.set_testing(True, max_retries=20)
        for _ in range(10):
            assert (await client.user(address)).address == address
    faults = [r.fault for r in of(server, "user")]
    assert faults.count("truncate") >= 2
    assert faults.count(None) == 10


async def test_a_malformed_body_is_a_decode_error_and_not_retried(
    server: FakeServer, exchange: FakeExchange
) -> None:
    server.set_fault("leaderboard", Fault(malformed_rate=1.0))
    async with client_for(server, max_retries=3) as client:
        client.set_testing(True)
        for _ in range(12):
            with pytest.raises(DecodeError):
                await client.leaderboard()
    records = of(server, "leaderboard")
    assert len(records) == 12  # each call once: a decode error is not retried
    assert {(r.status, r.fault) for r in records} == {(200, "malformed")}


async def test_malformed_bodies_come_in_several_shapes(server: FakeServer) -> None:
    server.set_fault("tokens", Fault(malformed_rate=1.0))
    bodies: set[tuple[str, bytes]] = set()
    async with aiohttp.ClientSession() as session:
        for _ in range(16):
            async with session.get(server.base_url + "/api/tokens") as response:
                assert response.status == 200
                bodies.add((response.content_type, await response.read()))
    assert "text/html" in {kind for kind, _ in bodies}
    assert b"" in {body for _, body in bodies}
    assert any(body.startswith(b'{"tokens":[') for _, body in bodies)
    assert len(bodies) >= 4  # cut at different places


async def test_latency_delays_every_answer(server: FakeServer, pool_id: str) -> None:
    server.set_fault("pool", Fault(latency=0.2))
    async with client_for(server, max_retries=0) as client:
        started = time.monotonic()
        await client.pool(pool_id)
        assert time.monotonic() - started >= 0.2
    assert of(server, "pool")[0].fault is None  # latency alone is not a faulted answer


async def test_latency_past_the_timeout_is_a_request_timeout(
    server: FakeServer, pool_id: str
) -> None:
    server.set_fault("pool", Fault(latency=5.0))
    async with client_for(server, max_retries=0, timeout=0.2) as client:
        with pytest.raises(RequestTimeoutError):
            await client.pool(pool_id)


async def test_closing_does_not_wait_for_injected_latency(
    exchange: FakeExchange, pool_id: str
) -> None:
    server = await FakeServer(exchange).start()
    server.set_fault("pool", Fault(latency=60.0))
    async with client_for(server, max_retries=0, timeout=0.3) as client:
        with pytest.raises(RequestTimeoutError):
            await client.pool(pool_id)
    started = time.monotonic()
    await server.close()
    assert time.monotonic() - started < 10.0
    assert [r.operation for r in server.requests] == ["pool"]


# --- where faults apply ------------------------------------------------------------------


async def test_a_star_fault_covers_operations_without_their_own(
    server: FakeServer, exchange: FakeExchange, pool_id: str
) -> None:
    server.set_fault("*", Fault(error_rate=1.0, error_status=502))
    server.set_fault("tokens", Fault())
    async with client_for(server, max_retries=0) as client:
        assert await client.tokens()
        with pytest.raises(ServerError) as caught:
            await client.pool(pool_id)
        assert caught.value.status == 502
        with pytest.raises(ServerError):
            await client.leaderboard()
        with pytest.raises(ServerError):
            await client.token_markets(exchange.tokens[0]["address"])
        server.set_fault("*", None)
        assert (await client.pool(pool_id)).pool_id == pool_id
        assert set(server.faults) == {"tokens"}
        server.clear_faults()
        assert server.faults == {}
    async with aiohttp.ClientSession() as session:
        server.set_fault("*", Fault(error_rate=1.0))
        async with session.get(server.base_url + "/api/no/such/path") as response:
            assert response.status == 404  # not an operation: no fault applies


async def test_bursts_count_per_operation(server: FakeServer, pool_id: str) -> None:
    server.set_fault("*", Fault(rate_limit_burst=1))
    async with client_for(server, max_retries=0) as client:
        client.set_testing(True)
        with pytest.raises(RateLimitError):
            await client.pool(pool_id)
        with pytest.raises(RateLimitError):
            await client.leaderboard()
        assert (await client.pool(pool_id)).pool_id == pool_id
        assert (await client.leaderboard()).total == 250


def test_bad_faults_are_refused(exchange: FakeExchange) -> None:
    for kwargs in (
        {"error_rate": 1.5},
        {"drop_rate": -0.1},
        {"malformed_rate": "0.5"},
        {"error_status": 200},
        {"error_status": 600},
        {"rate_limit_burst": -1},
        {"rate_limit_burst": 1.5},
        {"latency": -1.0},
        {"retry_after": -2.0},
        {"max_in_a_row": 0},
        {"max_in_a_row": True},
        {"max_in_a_row": 1.5},
    ):
        with pytest.raises(ValueError, match=next(iter(kwargs))):
            Fault(**kwargs)
    server = FakeServer(exchange)
    with pytest.raises(ValueError, match="unknown operation"):
        server.set_fault("pools", Fault())
    with pytest.raises(TypeError):
        server.set_fault("pool", 0.5)  # type: ignore[arg-type]
    for operation in (*OPERATIONS, "*"):
        server.set_fault(operation, Fault())
    assert set(server.faults) == {*OPERATIONS, "*"}


# --- determinism of the schedule ---------------------------------------------------------

MIXED = Fault(
    error_rate=0.3, error_status=503, drop_rate=0.2, truncate_rate=0.2, malformed_rate=0.3
)


async def schedule(
    server: FakeServer, count: int, *, interleave: bool = False
) -> list[tuple[str | None, int | None]]:
    """The (fault, status) of ``count`` leaderboard requests, each on a fresh connection."""
    start = len(server.requests)
    connector = aiohttp.TCPConnector(force_close=True)
    async with aiohttp.ClientSession(connector=connector) as session:
        for _ in range(count):
            for path in ("/api/dash/leaderboard", "/api/tokens")[: 1 + interleave]:
                try:
                    async with session.get(server.base_url + path) as response:
                        await response.read()
                except aiohttp.ClientError:
                    pass
    return [(r.fault, r.status) for r in server.requests[start:] if r.operation == "leaderboard"]


async def test_the_fault_schedule_is_deterministic_under_a_seed(exchange: FakeExchange) -> None:
    async with (
        FakeServer(exchange, seed=3) as one,
        FakeServer(exchange, seed=3) as two,
        FakeServer(exchange, seed=4) as other,
    ):
        for server in (one, two, other):
            server.set_fault("*", MIXED)
        first = await schedule(one, 40)
        # the same seed, other operations interleaved: the leaderboard's schedule is the same
        assert await schedule(two, 40, interleave=True) == first
        assert await schedule(other, 40) != first
        # set_fault restarts the schedule
        one.set_fault("*", MIXED)
        assert await schedule(one, 40) == first
    assert {fault for fault, _ in first} == {None, "error", "drop", "truncate", "malformed"}


# --- the record --------------------------------------------------------------------------


async def test_every_request_is_recorded(server: FakeServer, exchange: FakeExchange) -> None:
    address = next(iter(exchange.users))
    before = time.monotonic()
    async with client_for(server, max_retries=0) as client:
        await client.tokens(search="Eth Coin")
        await client.token_markets(exchange.tokens[0]["symbol"])
        await client.orders(address.upper().replace("0X", "0x"), status="open", limit=5)
        with pytest.raises(NotFoundError):
            await client.pool("id/with slash")
        server.set_fault("user", Fault(drop_rate=1.0))
        with pytest.raises(TransportError):
            await client.user(address)
    after = time.monotonic()
    tokens, markets, orders, pool, *users = server.requests
    assert tokens == RecordedRequest(
        network=Network.MAINNET,
        method="GET",
        path="/api/tokens",
        raw_path="/api/tokens?search=Eth%20Coin",
        query={"search": "Eth Coin"},
        operation="tokens",
        time=tokens.time,
        status=200,
        fault=None,
        answered_at=tokens.answered_at,
    )
    assert tokens.headers["user-agent"].startswith("asyncapi-client/")
    assert tokens.param is None
    assert tokens.answered_at is not None
    assert before <= tokens.time <= tokens.answered_at <= markets.time <= orders.time <= after
    assert markets.param == exchange.tokens[0]["symbol"]
    assert pool.param == "id/with slash"
    assert (markets.network, markets.operation, markets.status) == (
        Network.TESTNET,
        "token_markets",
        200,
    )
    assert orders.query == {"status": "OPEN", "limit": "5"}
    assert orders.operation == "orders"
    assert pool.raw_path == "/api/clob/pools/id%2Fwith%20slash"
    assert (pool.operation, pool.status) == ("pool", 404)
    assert users
    assert all((u.operation, u.status, u.fault) == ("user", None, "drop") for u in users)
    server.requests.clear()
    assert server.requests == []
