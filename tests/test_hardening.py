"""Edge cases found in review: each test pins a behaviour that was wrong before its fix."""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import AsyncIterator

import aiohttp
import orjson
import pytest
from aiohttp import web
from multidict import CIMultiDict

from asyncapi_client import Client, DecodeError, StatusError, TransportError
from asyncapi_client._decode import TOKENS
from asyncapi_client._errors import status_error
from tests._loopback import serve
from tests.test_resilience import max_in_window, start_recorder

TOKEN = {"address": "0xt", "name": "T", "symbol": "T", "decimals": 18, "totalSupply": "1"}
POOL = {
    "baseToken": TOKEN,
    "quoteToken": TOKEN,
    "price": 1.0,
    "priceChange24h": 0.0,
    "volume24h": 1.0,
    "tvl": 1.0,
}


class Scripted:
    """A loopback server whose pool handler the test sets."""

    def __init__(self) -> None:
        self.count = 0
        self.first = asyncio.Event()
        self.latency = 0.0
        self.rate_limit_first = False
        self.redirect = False

    async def pool(self, request: web.Request) -> web.StreamResponse:
        self.count += 1
        self.first.set()
        if self.redirect:
            raise web.HTTPFound(request.path)
        if self.rate_limit_first and self.count == 1:
            return web.json_response({}, status=429, headers={"Retry-After": "1"})
        if self.latency:
            await asyncio.sleep(self.latency)  # the server's own answer time, not a test wait
        return web.json_response({**POOL, "poolId": request.match_info["pool_id"]})


@pytest.fixture
async def scripted() -> AsyncIterator[tuple[Scripted, str]]:
    server = Scripted()
    app = web.Application()
    app.router.add_get("/api/clob/pools/{pool_id}", server.pool)
    async with serve(app) as base:
        yield server, base


async def test_rate_limit_holds_when_a_429_hold_ends(scripted: tuple[Scripted, str]) -> None:
    """Slots must not pile up during the hold and then fire all at once."""
    server, base = scripted
    server.rate_limit_first = True
    trace, starts = start_recorder()
    async with Client(base_url=base, rate_limit=5, trace_configs=[trace]) as client:
        first = asyncio.ensure_future(client.pool("p0"))
        await server.first.wait()
        rest = [asyncio.ensure_future(client.pool(f"p{i}")) for i in range(1, 11)]
        await asyncio.gather(first, *rest)
    assert server.count == 12
    assert max_in_window(starts) <= 6, sorted(round(t - starts[0], 3) for t in starts)


async def test_waiting_for_a_connection_is_not_part_of_the_attempt_timeout(
    scripted: tuple[Scripted, str],
) -> None:
    server, base = scripted
    server.latency = 0.3
    async with Client(base_url=base, max_connections=2, timeout=0.5, max_retries=0) as client:
        started = time.perf_counter()
        pools = await asyncio.gather(*(client.pool(f"p{i}") for i in range(8)))
        elapsed = time.perf_counter() - started
    assert [p.pool_id for p in pools] == [f"p{i}" for i in range(8)]
    assert server.count == 8
    assert elapsed >= 4 * 0.3 - 0.05  # four rounds of two connections: they really queued


async def test_a_redirect_loop_is_a_status_error_and_not_retried(
    scripted: tuple[Scripted, str],
) -> None:
    server, base = scripted
    server.redirect = True
    async with Client(base_url=base) as client:
        with pytest.raises(StatusError, match="too many redirects") as caught:
            await client.pool("p")
    assert caught.value.status == 302
    assert server.count <= 11  # one attempt's redirects (aiohttp follows up to 10); retries made 40


def test_a_client_used_from_a_second_event_loop_says_so() -> None:
    with socket.socket() as sock:  # a port with nothing listening
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]

    async def first(client: Client, session: aiohttp.ClientSession) -> None:
        with pytest.raises(TransportError):
            await client.pool("p")
        await session.close()

    async def second(client: Client) -> None:
        with pytest.raises(RuntimeError, match="event loop it was first used in"):
            await client.pool("p")

    async def make() -> tuple[Client, aiohttp.ClientSession]:
        session = aiohttp.ClientSession()
        return Client(base_url=f"http://127.0.0.1:{port}", session=session, max_retries=0), session

    loop = asyncio.new_event_loop()
    try:
        client, session = loop.run_until_complete(make())
        loop.run_until_complete(first(client, session))
    finally:
        loop.close()
    asyncio.run(second(client))


@pytest.mark.parametrize(
    "url",
    [
        "http://h\\evil.com/",
        "http://exa mple.com",
        "http://h.example/a\tb",
        "http://user:secret@h.example",
        "http://user@h.example",
    ],
)
def test_base_urls_that_would_fail_later_are_refused_at_construction(url: str) -> None:
    with pytest.raises(ValueError, match="base_url"):
        Client(base_url=url)


@pytest.mark.parametrize(
    "headers",
    [{"Bad Name": "x"}, {"X-Ok": "a\r\nInjected: 1"}, {"X-Ok": "a\nb"}, {"": "x"}],
)
def test_headers_that_are_not_valid_http_are_refused(headers: dict[str, str]) -> None:
    with pytest.raises(ValueError, match="header"):
        Client(base_url="http://h.example", headers=headers)


def test_trace_configs_must_be_trace_configs() -> None:
    with pytest.raises(ValueError, match="TraceConfig"):
        Client(base_url="http://h.example", trace_configs=[1])  # type: ignore[list-item]


async def test_text_without_a_utf8_form_is_a_clear_argument_error() -> None:
    async with Client(base_url="http://127.0.0.1:9") as client:
        with pytest.raises(ValueError, match=r"pool_id .* not valid text"):
            await client.pool("bad\ud800")
        with pytest.raises(ValueError, match="not valid text"):
            await client.tokens(search="bad\ud800")


def test_status_error_headers_are_case_insensitive_and_keep_repeats() -> None:
    headers = CIMultiDict([("X-Request-ID", "abc"), ("Link", "<a>"), ("Link", "<b>")])
    error = status_error(503, url="http://h/api/x", body="", headers=headers)
    assert error.headers["x-request-id"] == "abc"
    assert error.headers.getall("link") == ["<a>", "<b>"]  # type: ignore[attr-defined]


def test_an_integer_too_large_for_a_float_is_refused_not_rounded() -> None:
    body = orjson.dumps({"tokens": [dict(TOKEN, decimals=18.0)]})
    assert TOKENS(body)[0].decimals == 18
    big = b'{"tokens": [{"address": "a", "name": "n", "symbol": "s", "decimals": 1' + b"0" * 30
    with pytest.raises(DecodeError) as caught:
        TOKENS(big + b', "totalSupply": "1"}]}')
    assert caught.value.path == "tokens[0].decimals"
