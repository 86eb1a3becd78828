"""Scripted replies on the fake server: exact answers in order, then normal service."""

from __future__ import annotations

import asyncio
import contextlib
import re
from typing import Any

import aiohttp
import orjson
import pytest

from asyncapi_client import (
    Client,
    DecodeError,
    NotFoundError,
    RateLimitError,
    ServerError,
    StatusError,
    TransportError,
)
from asyncapi_client.testing import FakeExchange, FakeServer, Fault, RecordedRequest, Reply


def pool_of(server: FakeServer) -> str:
    return next(iter(server.exchange.pools))


def statuses(server: FakeServer, operation: str) -> list[int | None]:
    return [r.status for r in server.requests if r.operation == operation]


async def test_replies_are_used_in_order_then_normal_service(
    fake_server: FakeServer, fake_client: Client
) -> None:
    pool_id = pool_of(fake_server)
    fake_server.script(
        "pool",
        Reply(503),
        Reply(429, headers={"Retry-After": "0"}),
        Reply(body=b"not json"),
    )
    assert fake_server.pending_replies("pool") == 3
    fake_client.set_testing(True, max_retries=0)
    with pytest.raises(ServerError):
        await fake_client.pool(pool_id)
    with pytest.raises(RateLimitError) as limited:
        await fake_client.pool(pool_id)
    assert limited.value.retry_after == 0.0
    with pytest.raises(DecodeError):
        await fake_client.pool(pool_id)
    assert fake_server.pending_replies("pool") == 0
    pool = await fake_client.pool(pool_id)  # the script is used up: the normal answer
    assert pool.pool_id == pool_id
    records = fake_server.requests
    assert [r.status for r in records] == [503, 429, 200, 200]
    assert [r.reply for r in records] == [
        Reply(503),
        Reply(429, headers={"Retry-After": "0"}),
        Reply(body=b"not json"),
        None,
    ]


async def test_drop_closes_the_connection_without_an_answer(
    fake_server: FakeServer, fake_client: Client
) -> None:
    fake_server.script("pool", Reply(drop=True), repeat=True)
    fake_client.set_testing(True, max_retries=1)
    with pytest.raises(TransportError):
        await fake_client.pool(pool_of(fake_server))
    assert fake_server.requests
    assert all((r.status, r.reply) == (None, Reply(drop=True)) for r in fake_server.requests)


async def test_first_call_503_second_200_is_deterministic(
    fake_server: FakeServer, fake_client: Client
) -> None:
    """The retry sees the 503 every time: a script is not a rate."""
    pool_id = pool_of(fake_server)
    for _ in range(5):
        fake_server.script("pool", Reply(503))
        pool = await fake_client.pool(pool_id)
        assert pool.pool_id == pool_id
    assert statuses(fake_server, "pool") == [503, 200] * 5


async def test_scripts_are_per_operation_and_star_is_the_fallback(
    fake_server: FakeServer, fake_client: Client
) -> None:
    fake_client.set_testing(True, max_retries=0)
    fake_server.script("*", Reply(500), Reply(502))
    fake_server.script("tokens", Reply(404))
    with pytest.raises(NotFoundError):
        await fake_client.tokens()  # its own script first
    with pytest.raises(ServerError) as first:
        await fake_client.tokens()  # then "*"
    with pytest.raises(ServerError) as second:
        await fake_client.leaderboard()
    assert (first.value.status, second.value.status) == (500, 502)
    assert (await fake_client.leaderboard()).leaderboard


async def test_json_body_and_headers_and_content_type(
    fake_server: FakeServer, fake_client: Client
) -> None:
    oracle = {
        "poolId": "p-1",
        "baseToken": fake_server.exchange.tokens[0],
        "quoteToken": fake_server.exchange.tokens[1],
        "price": 2.5,
        "priceChange24h": 0,
        "volume24h": 1,
        "tvl": 3,
    }
    fake_server.script("pool", Reply(json=oracle), Reply(json=oracle, headers={"X-Trace": "t"}))
    assert (await fake_client.pool("p-1")).pool_id == "p-1"
    async with (
        aiohttp.ClientSession() as session,
        session.get(fake_server.base_url + "/api/clob/pools/p-1") as response,
    ):
        assert await response.json() == oracle
        assert response.headers["X-Trace"] == "t"
        assert response.headers["Content-Type"] == "application/json"
    fake_server.script("pool", Reply(418, body="teapot", headers={"Content-Type": "text/plain"}))
    with pytest.raises(StatusError) as caught:
        await fake_client.pool("p-1")
    assert (caught.value.status, caught.value.body) == (418, "teapot")
    assert caught.value.headers["Content-Type"].startswith("text/plain")


async def test_a_200_without_a_body_is_the_normal_answer_with_headers(
    fake_server: FakeServer, fake_client: Client
) -> None:
    fake_server.script("tokens", Reply(headers={"X-Extra": "1"}), Reply(404))
    async with (
        aiohttp.ClientSession() as session,
        session.get(fake_server.base_url + "/api/tokens") as response,
    ):
        assert await response.json() == {"tokens": fake_server.exchange.tokens}
        assert response.headers["X-Extra"] == "1"
    fake_client.set_testing(True, max_retries=0)
    with pytest.raises(NotFoundError) as caught:
        await fake_client.tokens()
    assert "scripted reply: HTTP 404" in caught.value.body


async def test_repeat_answers_every_request_until_cleared(
    fake_server: FakeServer, fake_client: Client
) -> None:
    fake_client.set_testing(True, max_retries=2)
    fake_server.script("user", Reply(500), Reply(503), repeat=True)
    with pytest.raises(ServerError):
        await fake_client.user("0xnobody")
    assert statuses(fake_server, "user") == [500, 503, 500]
    fake_server.script("user", Reply(404))  # a one-off goes before the cycle
    with pytest.raises(NotFoundError):
        await fake_client.user("0xnobody")
    with pytest.raises(ServerError) as caught:
        await fake_client.user("0xnobody")
    assert statuses(fake_server, "user")[4:] == [503, 500, 503]  # the cycle resumed
    assert caught.value.status == 503
    fake_server.clear_scripts("user")
    address = next(iter(fake_server.exchange.users))
    assert (await fake_client.user(address)).address == address


async def test_a_function_picks_the_reply_from_the_request(
    fake_server: FakeServer, fake_client: Client
) -> None:
    seen: list[RecordedRequest] = []

    def echo(request: RecordedRequest) -> Reply:
        seen.append(request)
        return Reply(json={**fake_server.exchange.users[address], "address": request.param})

    address = next(iter(fake_server.exchange.users))
    fake_server.script("user", echo, repeat=True)
    profile = await fake_client.user("0x/any thing", network="testnet")
    assert profile.address == "0x/any thing"
    (request,) = seen
    assert (request.operation, request.network, request.status) == ("user", "testnet", None)
    assert request.answered_at is None  # handed over on arrival, before the answer


@pytest.mark.parametrize("made", [ValueError("boom"), "not a reply"])
async def test_a_broken_function_answers_500_saying_why(
    fake_server: FakeServer, fake_client: Client, made: object
) -> None:
    def broken(_: RecordedRequest) -> Any:
        if isinstance(made, Exception):
            raise made
        return made

    fake_client.set_testing(True, max_retries=0)
    fake_server.script("tokens", broken)
    with pytest.raises(ServerError) as caught:
        await fake_client.tokens()
    assert "scripted function" in caught.value.body
    assert repr(made) in caught.value.body


async def test_a_script_takes_the_place_of_a_fault(
    fake_server: FakeServer, fake_client: Client
) -> None:
    fake_server.set_fault("tokens", Fault(error_rate=1.0, error_status=500))
    fake_server.script("tokens", Reply())
    assert await fake_client.tokens()
    (record,) = fake_server.requests
    assert (record.status, record.fault, record.reply) == (200, None, Reply())


async def test_delay_then_answer_is_recorded_with_its_times(fake_server: FakeServer) -> None:
    fake_server.script("leaderboard", Reply(delay=0.05))
    async with Client(base_url=fake_server.base_url) as client:
        await client.leaderboard()
    (record,) = fake_server.requests
    assert record.answered_at is not None
    assert record.answered_at - record.time >= 0.05


async def test_scripts_apply_to_operations_only() -> None:
    """Unrouted paths and other methods keep their 404 and 405 whatever is scripted."""
    async with FakeServer(FakeExchange.generate(seed=1, users=1, pools=1)) as server:
        server.script("*", Reply(500), repeat=True)
        async with Client(base_url=server.base_url + "/nowhere", max_retries=0) as client:
            with pytest.raises(NotFoundError):
                await client.tokens()
        assert [r.status for r in server.requests] == [404]
        assert server.requests[0].reply is None


def test_bad_replies_and_scripts_are_refused() -> None:
    with pytest.raises(ValueError, match="status"):
        Reply(199)
    with pytest.raises(ValueError, match="status"):
        Reply(True)
    with pytest.raises(ValueError, match="body or json"):
        Reply(body=b"x", json={})
    with pytest.raises(TypeError, match="body"):
        Reply(body=123)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="delay"):
        Reply(delay=-1)
    with pytest.raises(TypeError, match="headers"):
        Reply(headers={"X": 1})
    with pytest.raises(ValueError, match="at most one of drop, reset and truncate"):
        Reply(drop=True, reset=True)
    with pytest.raises(ValueError, match="at most one of drop, reset and truncate"):
        Reply(reset=True, truncate=True)
    with pytest.raises(TypeError, match="truncate must be a bool"):
        Reply(truncate=1)  # type: ignore[arg-type]
    server = FakeServer(FakeExchange.generate(seed=1, users=1, pools=1))
    with pytest.raises(ValueError, match="unknown operation 'pools'"):
        server.script("pools", Reply())
    with pytest.raises(TypeError, match="Reply or a function"):
        server.script("pool", 503)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="at least one"):
        server.script("pool", repeat=True)
    with pytest.raises(ValueError, match="unknown operation"):
        server.pending_replies("nope")
    server.script("pool", Reply())
    server.clear_scripts()
    assert server.pending_replies("pool") == 0


# --- wire faults: a reset, a body cut short ------------------------------------------------


async def raw_get(server: FakeServer, path: str) -> tuple[bytes, BaseException | None]:
    """Send one GET on a raw socket; what came back before the end, and how it ended."""
    reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
    try:
        writer.write(f"GET {path} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
        received = b""
        try:
            while chunk := await reader.read(65536):
                received += chunk
        except ConnectionResetError as error:
            return received, error
        return received, None
    finally:
        writer.close()
        with contextlib.suppress(ConnectionError):
            await writer.wait_closed()


async def test_reset_ends_the_connection_with_a_tcp_rst(
    fake_server: FakeServer, fake_client: Client
) -> None:
    fake_server.script("pool", Reply(reset=True), Reply(drop=True))
    received, ended = await raw_get(fake_server, "/api/clob/pools/p")
    assert (received, type(ended)) == (b"", ConnectionResetError)  # a RST, not an orderly end
    received, ended = await raw_get(fake_server, "/api/clob/pools/p")
    assert (received, ended) == (b"", None)  # drop: an orderly close (FIN) without an answer
    fake_server.script("pool", Reply(reset=True), repeat=True)
    fake_client.set_testing(True, max_retries=1)
    with pytest.raises(TransportError):
        await fake_client.pool(pool_of(fake_server))
    records = fake_server.requests
    assert [(r.status, r.reply) for r in records] == [(None, Reply(reset=True))] + [
        (None, Reply(drop=True))
    ] + [(None, Reply(reset=True))] * 2


@pytest.mark.parametrize(
    "reply", [Reply(truncate=True), Reply(json={"poolId": "x" * 100}, truncate=True)]
)
async def test_truncate_promises_the_whole_body_and_sends_half(
    fake_server: FakeServer, fake_client: Client, reply: Reply
) -> None:
    pool_id = pool_of(fake_server)
    fake_server.script("pool", reply)
    received, ended = await raw_get(fake_server, f"/api/clob/pools/{pool_id}")
    head, _, body = received.partition(b"\r\n\r\n")
    assert ended is None
    assert head.startswith(b"HTTP/1.1 200")
    length = int(re.search(rb"(?i)content-length: *(\d+)", head).group(1))  # type: ignore[union-attr]
    assert len(body) == length // 2 > 0
    whole = (
        orjson.dumps(reply.json)
        if reply.json
        else orjson.dumps(fake_server.exchange.pools[pool_id])
    )
    assert body == whole[: length // 2]
    assert length == len(whole)
    fake_server.script("pool", reply)
    fake_client.set_testing(True, max_retries=0)
    with pytest.raises(TransportError):
        await fake_client.pool(pool_id)
    assert [r.status for r in fake_server.requests] == [200, 200]
