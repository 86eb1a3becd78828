"""The client against a real aiohttp.web server on loopback.

Hosts, environment, path prefix, sessions, lifecycle, concurrency, and the error classes.
"""

from __future__ import annotations

import asyncio
import email.utils
import gc
import time
import warnings
from collections.abc import Awaitable, Callable
from typing import Any

import aiohttp
import orjson
import pytest

from asyncapi_client import (
    ApiError,
    BadRequestError,
    Client,
    Network,
    NotFoundError,
    RateLimitError,
    ServerError,
    StatusError,
    TransportError,
)
from asyncapi_client._decode import to_wire
from asyncapi_client.testing import FakeServer, Reply
from tests._oracle import canned, oracle_server


@pytest.fixture(autouse=True)
def _no_env_hosts(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ASYNCAPI_BASE_URL", raising=False)
    monkeypatch.delenv("ASYNCAPI_TESTNET_BASE_URL", raising=False)


def make_client(server: FakeServer, **kwargs: Any) -> Client:
    return Client(base_url=server.base_url, testnet_base_url=server.testnet_base_url, **kwargs)


def operations(server: FakeServer) -> list[tuple[str, str | None]]:
    """(network, operation) of every request, in arrival order."""
    return [(r.network.value, r.operation) for r in server.requests]


def always(server: FakeServer, reply: Reply) -> None:
    """Answer every request with ``reply`` instead of the oracle."""
    server.script("*", reply, repeat=True)


# name -> (call with a network keyword, the operation's path parameter, the query it sends)
OPERATIONS: dict[
    str, tuple[Callable[[Client, Any], Awaitable[Any]], str | None, dict[str, str]]
] = {
    "tokens": (lambda c, n: c.tokens(search="eth", network=n), None, {"search": "eth"}),
    "token_markets": (lambda c, n: c.token_markets("0xtok", network=n), "0xtok", {}),
    "pool": (lambda c, n: c.pool("pool-7", network=n), "pool-7", {}),
    "user": (lambda c, n: c.user("0xuser", network=n), "0xuser", {}),
    "orders": (
        lambda c, n: c.orders("0xuser", status="open", side="sell", limit=3, network=n),
        "0xuser",
        {"status": "OPEN", "side": "SELL", "limit": "3"},
    ),
    "leaderboard": (
        lambda c, n: c.leaderboard(page=2, limit=10, network=n),
        None,
        {"page": "2", "limit": "10"},
    ),
}


def as_wire(operation: str, result: Any) -> Any:
    """The decoded result in wire form, for comparison with what the server sent."""
    if operation == "tokens":
        return {"tokens": to_wire(result)}
    if operation == "token_markets":
        return {"markets": to_wire(result)}
    return to_wire(result)


@pytest.mark.parametrize("network", ["mainnet", "testnet"])
@pytest.mark.parametrize("operation", sorted(OPERATIONS))
async def test_every_operation_on_both_networks(
    server: FakeServer, operation: str, network: str
) -> None:
    call, param, query = OPERATIONS[operation]
    async with make_client(server) as client:
        result = await call(client, network)
    (seen,) = server.requests
    assert (seen.network, seen.method, seen.operation) == (network, "GET", operation)
    assert seen.param == param
    assert seen.query == query
    expected = canned(operation, param, query, network)
    assert orjson.dumps(as_wire(operation, result), option=orjson.OPT_SORT_KEYS) == orjson.dumps(
        expected, option=orjson.OPT_SORT_KEYS
    )


@pytest.mark.parametrize("client_network", ["mainnet", "testnet", "TESTNET", Network.MAINNET])
async def test_client_network_picks_the_host_and_token_markets_defaults_to_testnet(
    server: FakeServer, client_network: str
) -> None:
    async with make_client(server, network=client_network) as client:
        await client.pool("p")
        await client.token_markets("t")
        await client.token_markets("t", network="mainnet")
    want = client_network.lower()
    assert operations(server) == [
        (want, "pool"),
        ("testnet", "token_markets"),
        ("mainnet", "token_markets"),
    ]


async def test_hosts_from_the_environment(
    server: FakeServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ASYNCAPI_BASE_URL", server.base_url)
    monkeypatch.setenv("ASYNCAPI_TESTNET_BASE_URL", server.testnet_base_url + "/")
    async with Client() as client:
        await client.pool("p")
        await client.token_markets("t")
        await client.leaderboard(network="testnet")
    assert operations(server) == [
        ("mainnet", "pool"),
        ("testnet", "token_markets"),
        ("testnet", "leaderboard"),
    ]


async def test_arguments_win_over_the_environment(
    server: FakeServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Port 9 on loopback: nothing listens there; a request to it would fail.
    monkeypatch.setenv("ASYNCAPI_BASE_URL", "http://127.0.0.1:9")
    monkeypatch.setenv("ASYNCAPI_TESTNET_BASE_URL", "http://127.0.0.1:9")
    async with make_client(server) as client:
        await client.pool("p")
        await client.token_markets("t")
    assert operations(server) == [("mainnet", "pool"), ("testnet", "token_markets")]


@pytest.mark.parametrize("trailing", ["", "/"])
async def test_path_prefix_is_kept(trailing: str) -> None:
    async with (
        oracle_server(prefix="/gw/v2") as server,
        Client(
            base_url=server.base_url + trailing,
            testnet_base_url=server.testnet_base_url + trailing,
        ) as client,
    ):
        pool = await client.pool("p")
        markets = await client.token_markets("t")
        page = await client.orders("u", limit=2)
    assert pool.pool_id == "p"
    assert markets[0].token0.address == "t"
    assert len(page.orders) == 2
    # The server strips its prefix before routing: every request carried it.
    assert [r.operation for r in server.requests] == ["pool", "token_markets", "orders"]


async def test_a_request_without_the_prefix_is_not_routed() -> None:
    """Guard for the test above: the prefixed server refuses un-prefixed paths."""
    async with oracle_server(prefix="/gw/v2") as server:
        base = server.base_url.removesuffix("/gw/v2")
        async with Client(base_url=base, max_retries=0) as client:
            with pytest.raises(NotFoundError):
                await client.pool("p")


# --- sessions and lifecycle ----------------------------------------------------------------


async def test_caller_session_is_used_and_left_open(server: FakeServer) -> None:
    async with aiohttp.ClientSession(headers={"X-Session": "mine"}) as session:
        client = make_client(server, session=session, headers={"X-Client": "c"})
        pool = await client.pool("p")
        await client.close()
        await client.close()
        assert not session.closed
        assert client.closed
        # The session still works for the caller.
        async with session.get(server.base_url + "/api/tokens") as response:
            assert response.status == 200
            assert "tokens" in await response.json()
        with pytest.raises(RuntimeError):
            await client.pool("p")
    assert pool.pool_id == "p"
    first = server.requests[0]
    assert first.headers["X-Session"] == "mine"
    assert first.headers["X-Client"] == "c"
    assert first.headers["User-Agent"].startswith("asyncapi-client/")
    assert len(server.requests) == 2


async def test_fifty_concurrent_calls_on_one_client(server: FakeServer) -> None:
    ids = [f"pool-{i}" for i in range(50)]
    async with make_client(server, max_retries=0) as client, server.gate("pool") as gate:
        calls = asyncio.gather(*(client.pool(i) for i in ids))
        await gate.arrived(50)  # no answer until all 50 are at the server: they are concurrent
        assert server.in_flight == 50
        gate.release()
        pools = await calls
    assert [p.pool_id for p in pools] == ids
    assert server.max_in_flight == 50
    assert sorted(r.param or "" for r in server.requests) == sorted(ids)


async def test_close_twice_and_use_after_close(server: FakeServer) -> None:
    client = make_client(server)
    await client.pool("p")
    states = [client.closed]
    await client.close()
    await client.close()
    states.append(client.closed)
    assert states == [False, True]
    with pytest.raises(RuntimeError, match="closed"):
        await client.pool("p")
    with pytest.raises(RuntimeError):
        await client.tokens()
    assert len(server.requests) == 1


async def test_async_with_closes(server: FakeServer) -> None:
    async with make_client(server) as client:
        await client.user("u")
    assert client.closed
    with pytest.raises(RuntimeError):
        await client.user("u")


async def test_close_without_any_call_is_fine(server: FakeServer) -> None:
    client = make_client(server)
    await client.close()
    assert client.closed
    assert server.requests == []


def test_client_constructed_outside_a_running_loop_works_inside_one() -> None:
    """No session (and no loop) is needed to construct a client: the session is made on use."""
    with pytest.raises(RuntimeError):
        asyncio.get_running_loop()
    with oracle_server().in_thread() as server:  # on a loop of its own: the addresses are known
        client = make_client(server)

        async def use() -> str:
            async with client:
                return (await client.pool("p")).pool_id

        assert asyncio.run(use()) == "p"
    assert client.closed
    assert len(server.requests) == 1


async def test_no_session_exists_before_the_first_call(server: FakeServer) -> None:
    """An unused client holds no aiohttp session: dropping it unclosed warns about nothing."""
    client = make_client(server)
    assert client._sender.session is None
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        del client
        gc.collect()
    assert [w for w in caught if issubclass(w.category, ResourceWarning)] == []
    used = make_client(server)
    await used.pool("p")
    assert used._sender.session is not None
    await used.close()


# --- errors --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("status", "cls"),
    [
        (400, BadRequestError),
        (404, NotFoundError),
        (429, RateLimitError),
        (500, ServerError),
        (502, ServerError),
        (503, ServerError),
        (504, ServerError),
        (599, ServerError),
        (418, StatusError),
        (409, StatusError),
        (401, StatusError),
    ],
)
async def test_status_maps_to_its_error_class(
    server: FakeServer, status: int, cls: type[StatusError]
) -> None:
    body = f'{{"error": "nope", "code": {status}}}'
    always(server, Reply(status, body=body, headers={"X-Trace": "abc-123"}))
    async with make_client(server, max_retries=0) as client:
        with pytest.raises(StatusError) as info:
            await client.pool("p-1")
    error = info.value
    assert type(error) is cls
    assert isinstance(error, ApiError)
    assert error.status == status
    assert error.url == server.base_url + "/api/clob/pools/p-1"
    assert error.body == body
    assert error.headers["X-Trace"] == "abc-123"
    assert error.network == "mainnet"
    assert len(server.requests) == 1


async def test_retryable_statuses_in_testing_mode_do_not_wait(server: FakeServer) -> None:
    """set_testing(True) keeps the attempts but not the waits: 4 quick attempts, then the error."""
    always(server, Reply(503, body="down", headers={"Retry-After": "30"}))
    async with make_client(server, max_retries=3) as client:
        client.set_testing(True)
        started = time.monotonic()
        with pytest.raises(ServerError):
            await client.pool("p")
        assert time.monotonic() - started < 10
    assert len(server.requests) == 4


def http_date(offset: float) -> str:
    return email.utils.formatdate(time.time() + offset, usegmt=True)


@pytest.mark.parametrize(
    ("header", "low", "high"),
    [
        ("7", 7.0, 7.0),
        ("0", 0.0, 0.0),
        ("2.5", 2.5, 2.5),
        (" 12 ", 12.0, 12.0),
        ("-3", 0.0, 0.0),
        ("DATE+30", 20.0, 31.0),
        ("DATE-30", 0.0, 0.0),
        ("DATE+3600", 3500.0, 3601.0),
    ],
)
async def test_rate_limit_error_parses_retry_after(
    server: FakeServer, header: str, low: float, high: float
) -> None:
    if header.startswith("DATE"):
        header = http_date(float(header[4:]))
    always(server, Reply(429, body="slow down", headers={"Retry-After": header}))
    async with make_client(server, max_retries=0) as client:
        with pytest.raises(RateLimitError) as info:
            await client.tokens()
    retry_after = info.value.retry_after
    assert retry_after is not None
    assert low <= retry_after <= high
    assert info.value.headers["Retry-After"] == header.strip()


@pytest.mark.parametrize("header", [None, "soon", "", "nan", "inf", "Mon, 99 Foo 2024"])
async def test_rate_limit_error_without_a_usable_retry_after(
    server: FakeServer, header: str | None
) -> None:
    headers = {} if header is None else {"Retry-After": header}
    always(server, Reply(429, body="", headers=headers))
    async with make_client(server, max_retries=0) as client:
        with pytest.raises(RateLimitError) as info:
            await client.tokens()
    assert info.value.retry_after is None


async def test_long_error_body_is_truncated(server: FakeServer) -> None:
    body = "".join(f"line {i:06d} of a very long error page\n" for i in range(5000))  # ~180 kB
    always(server, Reply(500, body=body, headers={"Content-Type": "text/plain"}))
    async with make_client(server, max_retries=0) as client:
        with pytest.raises(ServerError) as info:
            await client.user("u")
    error = info.value
    assert 100 <= len(error.body) <= 8192
    assert body.startswith(error.body.rstrip("…"))
    assert len(str(error)) <= 1000


async def test_error_names_network_and_url(server: FakeServer) -> None:
    always(server, Reply(404, body="no such pool"))
    async with make_client(server, max_retries=0) as client:
        with pytest.raises(NotFoundError) as main:
            await client.pool("gone")
        with pytest.raises(NotFoundError) as test:
            await client.pool("gone", network="testnet")
    for info, network in ((main, "mainnet"), (test, "testnet")):
        error = info.value
        url = server.url_of(network) + "/api/clob/pools/gone"
        assert error.url == url
        assert error.network == network
        assert url in str(error)
        assert network in str(error)
        assert "404" in str(error)


async def test_error_body_with_unknown_charset_is_still_text(server: FakeServer) -> None:
    always(
        server,
        Reply(
            400,
            body="bad ☃".encode(),
            headers={"Content-Type": "text/plain; charset=x-no-such-charset"},
        ),
    )
    async with make_client(server, max_retries=0) as client:
        with pytest.raises(BadRequestError) as info:
            await client.leaderboard()
    assert info.value.body == "bad ☃"


async def test_connection_refused_is_a_transport_error() -> None:
    """A closed port: a TransportError naming the url, not an aiohttp exception."""
    async with oracle_server() as server:
        base = server.base_url
    async with Client(base_url=base, max_retries=0) as client:
        with pytest.raises(TransportError) as info:
            await client.pool("p")
    assert info.value.url == base + "/api/clob/pools/p"


# --- the streams end to end (their internals are tested with _streams) ---------------------


async def test_streams_walk_every_page_with_the_client_arguments(server: FakeServer) -> None:
    async with make_client(server) as client:
        orders = [o async for o in client.iter_orders("0xu", status="open", page_size=2)]
        pages = [p async for p in client.iter_order_pages("0xu", side="buy", network="testnet")]
        capped = [o async for o in client.iter_orders("0xu", page_size=2, max_items=3)]
        entries = [e async for e in client.iter_leaderboard(page_size=10, concurrency=2)]
        boards = [b async for b in client.iter_leaderboard_pages(page_size=10)]
        first_five = [e async for e in client.iter_leaderboard(page_size=10, max_items=5)]
    assert [o.transaction_id for o in orders] == ["tx-0", "tx-1", "tx-2", "tx-3"]
    assert {o.status for o in orders} == {"OPEN"}
    assert [p.cursor for p in pages] == ["cursor-2", None]
    assert len(capped) == 3
    assert [e.rank for e in entries] == list(range(1, 26))
    assert [b.page for b in boards] == [1, 2, 3]
    assert [e.rank for e in first_five] == [1, 2, 3, 4, 5]
    order_queries = [(r.network, r.query) for r in server.requests if r.operation == "orders"][:4]
    assert order_queries == [
        ("mainnet", {"status": "OPEN", "limit": "2"}),
        ("mainnet", {"status": "OPEN", "limit": "2", "cursor": "cursor-2"}),
        ("testnet", {"side": "BUY"}),
        ("testnet", {"side": "BUY", "cursor": "cursor-2"}),
    ]
    boards_seen = [r.query for r in server.requests if r.operation == "leaderboard"]
    assert {int(query["page"]) for query in boards_seen} == {1, 2, 3}
    assert all(query.get("limit") == "10" for query in boards_seen)
