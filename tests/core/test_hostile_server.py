"""Hostile servers: whatever a server sends, only an ApiError (or a value) comes out of a
call. Raw sockets (tests/_rawserver.py) write the bytes aiohttp.web would not."""

from __future__ import annotations

import asyncio
import gzip
import json
import zlib
from collections.abc import AsyncIterator

import aiohttp
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from asyncapi_client import (
    ApiError,
    Client,
    NotFoundError,
    Pool,
    RateLimitError,
    ServerError,
    StatusError,
    TransportError,
)
from tests._checks import settled, stray_tasks
from tests._oracle import pool_json
from tests._pages import serve_pools, serving
from tests._rawserver import RawServer, raw


@pytest.fixture(autouse=True)
async def _no_stray_tasks() -> AsyncIterator[None]:
    yield
    assert await settled(lambda: not stray_tasks()), stray_tasks()


def answer(status: int, headers: list[tuple[str, bytes]], body: bytes = b"") -> bytes:
    """A whole response as bytes, headers as given (any bytes), then ``Connection: close``."""
    head = b"".join(name.encode() + b": " + value + b"\r\n" for name, value in headers)
    return b"HTTP/1.1 %d X\r\n" % status + head + b"Connection: close\r\n\r\n" + body


# --- the charset of an error body -------------------------------------------------------------

HOSTILE_CHARSETS = ["idna", "undefined", "punycode", "unicode_escape", "rot13", "utf\\x00"]


@pytest.mark.parametrize("charset", HOSTILE_CHARSETS)
@pytest.mark.parametrize(("status", "error"), [(500, ServerError), (404, NotFoundError)])
async def test_an_error_body_in_a_hostile_charset_is_still_a_status_error(
    charset: str, status: int, error: type[StatusError]
) -> None:
    body = "bad \u2603 \\x41 -abc-".encode() + b" \xff"
    content_type = b"text/plain; charset=" + charset.encode()
    async with (
        RawServer(default=raw(answer(status, [("Content-Type", content_type)], body))) as server,
        Client(base_url=server.base_url, max_retries=0) as client,
    ):
        with pytest.raises(error) as caught:
            await client.pool("p1")
    assert caught.value.status == status
    # UTF-8 with a replacement character: the escapes are not read, the bytes not lost
    assert caught.value.body == "bad \u2603 \\x41 -abc- \ufffd"


async def test_an_error_body_in_a_known_charset_is_decoded_in_it() -> None:
    body = "caf\u00e9".encode("latin-1")
    head = [("Content-Type", b"text/plain; charset=iso-8859-1")]
    async with (
        RawServer(default=raw(answer(404, head, body))) as server,
        Client(base_url=server.base_url, max_retries=0) as client,
    ):
        with pytest.raises(NotFoundError) as caught:
            await client.pool("p1")
    assert caught.value.body == "caf\u00e9"


# --- a Retry-After --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "value",
    [
        b"Mon, 01 Jan 99999999999999999999 00:00:00 GMT",
        b"Mon, 01 Jan 2024 99999999999999999999:00:00 GMT",
        b"Mon, 01 Jan 2024 00:00:00 +99999999999999999999",
        b"\xff\xfe",
        b"1e400",
    ],
)
async def test_a_429_whose_retry_after_cannot_be_read_is_a_rate_limit_error_without_one(
    value: bytes,
) -> None:
    async with (
        RawServer(default=raw(answer(429, [("Retry-After", value)]))) as server,
        Client(base_url=server.base_url, max_retries=0) as client,
    ):
        with pytest.raises(RateLimitError) as caught:
            await client.pool("p1")
    assert caught.value.retry_after is None


# --- a redirect's Location ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "location",
    [b"http://xn--ls8h-/", b"http://xn--a.xn--/x", b"https://xn--ls8h-/", b"//xn--a.xn--/"],
)
async def test_a_location_whose_host_does_not_decode_is_refused(location: bytes) -> None:
    async with (
        RawServer(default=raw(answer(302, [("Location", location)]))) as server,
        Client(base_url=server.base_url, max_retries=2) as client,
    ):
        with pytest.raises(StatusError, match="was refused") as caught:
            await client.pool("p1")
    assert caught.value.status == 302
    assert server.count == 1  # refused, so not retried


# --- anything at all -----------------------------------------------------------------------

_CHARSETS = st.one_of(
    st.sampled_from(["utf-8", "latin-1", "utf-16", "utf-7", "cp1252", "ascii", *HOSTILE_CHARSETS]),
    st.text(st.characters(codec="latin-1", exclude_characters="\r\n"), max_size=12),
)
_TYPES = st.sampled_from(
    [b"application/json", b"text/plain", b"text/html", b"", b";;", b"application/problem+json"]
)
_ENCODINGS = st.sampled_from(
    [None, "gzip", "deflate", "br", "zstd", "identity", "gzip, gzip", "x-unknown", "compress"]
)
_BODIES = st.one_of(
    st.binary(max_size=300),
    st.just(json.dumps(pool_json()).encode()),
    st.sampled_from(
        [
            b'{"poolId": "p", "price": 1e400}',
            b'{"poolId": "\\ud800"}',
            b"[" * 5000,
            b'{"a": ' * 2000,
            b'"\xed\xa0\x80"',
            b"",
        ]
    ),
)
_HEADER_VALUES = st.one_of(
    st.binary(max_size=40).map(lambda value: value.replace(b"\r", b"").replace(b"\n", b"")),
    st.sampled_from(
        [
            b"http://xn--ls8h-/",
            b"/\xff\xfe",
            b"Mon, 01 Jan 0001 00:00:00 +2359",
            b"Fri, 31 Dec 9999 23:59:59 -2359",
            b"Mon, 01 Jan 99999999999999999999 00:00:00 GMT",
            b"1e400",
            b"-1",
            b"9" * 5000,
            b"nan",
        ]
    ),
)
_EXTRA = st.lists(
    st.tuples(
        st.sampled_from(
            ["Retry-After", "Location", "Content-Length", "Set-Cookie", "Transfer-Encoding", "X-A"]
        ),
        _HEADER_VALUES,
    ),
    max_size=3,
)
_STATUSES = st.sampled_from([200, 201, 204, 301, 302, 304, 307, 400, 404, 418, 429, 500, 503, 599])


def _encode(body: bytes, encoding: str | None, garbage: bool) -> bytes:
    if garbage or encoding not in ("gzip", "deflate"):
        return body
    return gzip.compress(body) if encoding == "gzip" else zlib.compress(body)


@given(
    status=_STATUSES,
    content_type=_TYPES,
    charset=st.none() | _CHARSETS,
    encoding=_ENCODINGS,
    garbage=st.booleans(),
    body=_BODIES,
    extra=_EXTRA,
)
@settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
def test_whatever_a_server_sends_only_an_api_error_or_a_value_comes_out(
    status: int,
    content_type: bytes,
    charset: str | None,
    encoding: str | None,
    garbage: bool,
    body: bytes,
    extra: list[tuple[str, bytes]],
) -> None:
    if charset is not None:
        content_type += b"; charset=" + charset.encode("latin-1")
    headers = [("Content-Type", content_type)]
    if encoding is not None:
        headers.append(("Content-Encoding", encoding.encode()))
    headers += extra
    data = answer(status, headers, _encode(body, encoding, garbage))

    async def call() -> object:
        async with (
            RawServer(default=raw(data)) as server,
            Client(base_url=server.base_url, max_retries=0, timeout=5) as client,
        ):
            try:
                return await client.pool("p1")
            except ApiError as exc:
                return exc

    outcome = asyncio.run(call())
    assert isinstance(outcome, Pool | ApiError), outcome


async def test_an_unexpected_error_reading_the_answer_is_a_final_api_error() -> None:
    """The last resort: an exception no rule expects while the answer is read (here a
    caller's middleware reading a server's header with a codec that refuses it) still
    leaves the call as an ApiError, keeps its cause, and is not retried."""

    async def middleware(
        request: aiohttp.ClientRequest, handler: aiohttp.ClientHandlerType
    ) -> aiohttp.ClientResponse:
        response = await handler(request)
        response.headers.get("X-Name", "").encode("ascii")  # the server sent UTF-8
        return response

    head = [("X-Name", "caf\u00e9".encode())]
    async with (
        RawServer(default=raw(answer(200, head, json.dumps(pool_json()).encode()))) as server,
        aiohttp.ClientSession(middlewares=(middleware,)) as session,
        Client(base_url=server.base_url, session=session, max_retries=3) as client,
    ):
        with pytest.raises(TransportError, match="could not be read: UnicodeEncodeError") as caught:
            await client.pool("p1")
    assert isinstance(caught.value.__cause__, UnicodeEncodeError)
    assert server.count == 1


# --- max_connections --------------------------------------------------------------------------


@pytest.mark.parametrize("own_session", [True, False], ids=["own-session", "callers-session"])
async def test_max_connections_bounds_requests_in_flight_whatever_the_session(
    own_session: bool,
) -> None:
    """8 calls at max_connections=2: the server sees 2 at once, never more, also when the
    session is the caller's (whose own pool would open 8 connections)."""
    async with (
        serving(pool=serve_pools()) as server,
        aiohttp.ClientSession() as session,
        Client(
            base_url=server.base_url, max_connections=2, session=None if own_session else session
        ) as client,
        server.gate("pool") as gate,
    ):
        fetching = asyncio.gather(*(client.pool(f"p{i}") for i in range(8)))
        await gate.arrived(2)
        # time for a third to arrive, if one could come (the old code let all 8 through)
        assert not await settled(lambda: gate.arrivals > 2, turns=1000)
        assert (gate.arrivals, server.in_flight) == (2, 2)  # the other 6 really queued
        gate.release()
        pools = await fetching
    assert [p.pool_id for p in pools] == [f"p{i}" for i in range(8)]
    assert len(server.requests) == 8
    assert server.max_in_flight == 2
