"""The session layer (``asyncapi_client/_http.py``): what goes on the wire per attempt.

Redirects, one request per attempt, failures that cannot heal, cookies. Wire faults are
played by the raw-socket :class:`~tests._rawserver.RawServer`, TLS by a throwaway CA.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import socket
import ssl
from collections.abc import AsyncIterator
from urllib.parse import quote, unquote

import aiohttp
import attrs
import pytest
import trustme
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from yarl import URL

from asyncapi_client import (
    Client,
    Network,
    NotFoundError,
    RateLimitError,
    RequestTimeoutError,
    Response,
    RetryEvent,
    ServerError,
    StatusError,
    TransportError,
)
from asyncapi_client._http import CALLER_MIDDLEWARES, AiohttpSender
from asyncapi_client._network import HostConfigError
from asyncapi_client._operations import POOL, encode_segment, identifier
from asyncapi_client.testing import FakeExchange, FakeServer, Reply
from tests._checks import settled, stray_tasks
from tests._oracle import pool_json
from tests._rawserver import RawServer, close, forward, raw, reserve_port, respond

KEY = "X-Api-Key"
SECRET = "k-s3cr3t"


@pytest.fixture(autouse=True)
async def _no_stray_tasks() -> AsyncIterator[None]:
    yield
    assert await settled(lambda: not stray_tasks()), stray_tasks()


@pytest.fixture(scope="module")
def ca() -> trustme.CA:
    """A throwaway certificate authority, made for this test module only."""
    return trustme.CA()


@pytest.fixture(scope="module")
def server_tls(ca: trustme.CA) -> ssl.SSLContext:
    """A server context with a certificate for 127.0.0.1 signed by ``ca``."""
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("127.0.0.1").configure_cert(context)
    return context


@pytest.fixture(scope="module")
def client_tls(ca: trustme.CA) -> ssl.SSLContext:
    context = ssl.create_default_context()
    ca.configure_trust(context)
    return context


# --- redirects (security) -----------------------------------------------------------------


@pytest.mark.parametrize("status", [301, 302, 303, 307, 308])
async def test_a_same_origin_redirect_is_followed_with_the_callers_headers(status: int) -> None:
    script = [respond(status, b"", headers={"Location": "/api/clob/pools/moved"})]
    async with (
        RawServer(script, default=respond(200, pool_json("moved"))) as server,
        Client(base_url=server.base_url, headers={KEY: SECRET}) as client,
    ):
        pool = await client.pool("p1")
    assert pool.pool_id == "moved"
    assert [c.target for c in server.conns] == ["/api/clob/pools/p1", "/api/clob/pools/moved"]
    assert [c.headers[KEY.lower()] for c in server.conns] == [SECRET, SECRET]


@pytest.mark.parametrize("status", [301, 302, 307, 308])
@pytest.mark.parametrize("other", ["port", "host"])
async def test_a_redirect_to_another_origin_is_refused_and_nothing_reaches_it(
    status: int, other: str
) -> None:
    async with RawServer(default=respond(200, pool_json("theirs"))) as first:
        # another port on the same host, or the same port on another loopback address
        sock = reserve_port() if other == "port" else reserve_port("127.0.0.2", first.port)
        async with RawServer(default=respond(200, pool_json("theirs")), sock=sock) as elsewhere:
            location = f"{elsewhere.base_url}/api/clob/pools/p1"
            async with (
                RawServer(default=respond(status, b"", headers={"Location": location})) as api,
                Client(base_url=api.base_url, headers={KEY: SECRET}, max_retries=3) as client,
            ):
                with pytest.raises(StatusError) as caught:
                    await client.pool("p1")
            assert elsewhere.accepted == 0  # neither the key nor anything else went there
    assert api.count == 1  # not retried
    assert caught.value.status == status
    assert location in str(caught.value)
    assert "redirect" in str(caught.value)


@pytest.mark.parametrize(
    "location",
    ["ftp://127.0.0.1/x", "file:///etc/passwd", "data:,{}", "http://[::1", "//127.0.0.2/x"],
)
async def test_a_redirect_to_another_scheme_or_a_malformed_location_is_refused(
    location: str,
) -> None:
    async with (
        RawServer(default=respond(302, b"", headers={"Location": location})) as api,
        Client(base_url=api.base_url, max_retries=3) as client,
    ):
        with pytest.raises(StatusError, match="redirect") as caught:
            await client.pool("p1")
    assert api.count == 1
    assert caught.value.status == 302
    assert location in str(caught.value)


async def test_https_to_http_is_refused_and_the_key_never_goes_in_clear(
    server_tls: ssl.SSLContext, client_tls: ssl.SSLContext
) -> None:
    async with RawServer(default=respond(200, pool_json("clear"))) as cleartext:
        location = f"{cleartext.base_url}/api/clob/pools/p1"
        async with (
            RawServer(
                default=respond(301, b"", headers={"Location": location}), tls=server_tls
            ) as api,
            aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=client_tls)) as session,
            Client(base_url=api.base_url, headers={KEY: SECRET}, session=session) as client,
        ):
            with pytest.raises(StatusError, match="refused") as caught:
                await client.pool("p1")
    assert api.base_url.startswith("https://")
    assert api.count == 1
    assert api.conns[0].headers[KEY.lower()] == SECRET
    assert cleartext.accepted == 0
    assert caught.value.status == 301


async def test_http_to_https_on_the_same_host_is_followed(
    server_tls: ssl.SSLContext, client_tls: ssl.SSLContext
) -> None:
    async with RawServer(default=respond(200, pool_json("secure")), tls=server_tls) as secure:
        location = f"{secure.base_url}/api/clob/pools/p1"
        async with (
            RawServer(default=respond(308, b"", headers={"Location": location})) as api,
            aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=client_tls)) as session,
            Client(base_url=api.base_url, headers={KEY: SECRET}, session=session) as client,
        ):
            pool = await client.pool("p1")
    assert pool.pool_id == "secure"
    assert secure.conns[0].headers[KEY.lower()] == SECRET


async def test_at_most_five_redirects_are_followed() -> None:
    hops = [respond(302, b"", headers={"Location": f"/api/clob/pools/h{i}"}) for i in range(9)]
    async with RawServer(hops) as api, Client(base_url=api.base_url, max_retries=3) as client:
        with pytest.raises(StatusError, match="too many redirects") as caught:
            await client.pool("p1")
    assert api.count == 6  # the request and five hops, not retried
    assert caught.value.status == 302
    async with (
        RawServer(hops[:5]) as api,
        Client(base_url=api.base_url, max_retries=3) as client,
    ):
        assert (await client.pool("p1")).pool_id == "p1"  # five hops are fine
    assert api.count == 6


async def test_a_redirect_loop_is_a_status_error_and_not_retried() -> None:
    loop = respond(302, b"", headers={"Location": "/api/clob/pools/p1"})
    async with RawServer(default=loop) as api, Client(base_url=api.base_url) as client:
        with pytest.raises(StatusError, match="too many redirects") as caught:
            await client.pool("p1")
    assert caught.value.status == 302
    assert api.count == 6  # one attempt's request and five hops; retries would make 24


async def test_a_redirect_without_location_is_a_status_error() -> None:
    async with (
        RawServer(default=respond(302, b"")) as api,
        Client(base_url=api.base_url, max_retries=3) as client,
    ):
        with pytest.raises(StatusError) as caught:
            await client.pool("p1")
    assert caught.value.status == 302
    assert api.count == 1


# --- one attempt, one request ---------------------------------------------------------------


@pytest.mark.parametrize("own_session", [True, False])
async def test_a_server_that_drops_every_connection_sees_one_request_per_attempt(
    own_session: bool,
) -> None:
    if not own_session and not CALLER_MIDDLEWARES:
        pytest.skip("no public twin of session._middlewares: aiohttp's resend is not stopped")
    async with RawServer(default=close()) as server:
        session = None if own_session else aiohttp.ClientSession()
        try:
            async with Client(base_url=server.base_url, max_retries=3, session=session) as client:
                client.set_testing(True)
                with pytest.raises(TransportError, match="closed the connection"):
                    await client.pool("p1")
        finally:
            if session is not None:
                await session.close()
    assert server.count == 4
    assert server.accepted == 4


async def test_a_callers_session_keeps_its_own_middlewares() -> None:
    seen: list[str] = []

    async def middleware(
        request: aiohttp.ClientRequest, handler: aiohttp.ClientHandlerType
    ) -> aiohttp.ClientResponse:
        seen.append(str(request.url))
        return await handler(request)

    async with (
        RawServer([close()]) as server,
        aiohttp.ClientSession(middlewares=(middleware,)) as session,
        Client(base_url=server.base_url, session=session) as client,
    ):
        client.set_testing(True)
        assert (await client.pool("p1")).pool_id == "p1"
    assert server.count == 2
    assert seen == [f"{server.base_url}/api/clob/pools/p1"] * 2


@pytest.mark.parametrize(
    ("status", "retried", "error"),
    [(503, True, None), (429, True, None), (404, False, NotFoundError)],
    ids=["503", "429", "404"],
)
async def test_a_callers_session_with_raise_for_status_keeps_our_status_handling(
    status: int, retried: bool, error: type[StatusError] | None
) -> None:
    """aiohttp's ``raise_for_status=True`` on the caller's session must not turn a 503 or a
    429 into a final "malformed HTTP response", nor lose the status of a 404."""
    async with (
        FakeServer(FakeExchange.generate(seed=1)) as server,
        aiohttp.ClientSession(raise_for_status=True) as session,
        Client(base_url=server.base_url, session=session, max_retries=2) as client,
    ):
        client.set_testing(True)
        server.script("tokens", Reply(status), Reply(200))
        if error is None:
            assert await client.tokens()
        else:
            with pytest.raises(error) as caught:
                await client.tokens()
            assert caught.value.status == status
            assert caught.value.attempts == 1
        assert len(server.requests) == (2 if retried else 1)


# --- failures that cannot heal ----------------------------------------------------------------

HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
MALFORMED = {
    "bad status line": b"HTTP/1.1 2OO OK\r\nContent-Length: 2\r\n\r\n{}",
    "not HTTP": b"hello there\r\n\r\n",
    "1 MiB header line": HEAD + b"X-Big: " + b"a" * (1 << 20) + b"\r\nContent-Length: 2\r\n\r\n{}",
    "100k headers": HEAD + b"X-H: 1\r\n" * 100_000 + b"Content-Length: 2\r\n\r\n{}",
    "conflicting lengths": HEAD + b"Content-Length: 2\r\nContent-Length: 3\r\n\r\n{}x",
}


@pytest.mark.parametrize("answer", MALFORMED.values(), ids=MALFORMED.keys())
async def test_a_malformed_response_is_raised_at_once(answer: bytes) -> None:
    async with (
        RawServer(default=raw(answer)) as server,
        Client(base_url=server.base_url, max_retries=3) as client,
    ):
        with pytest.raises(TransportError, match="malformed HTTP response"):
            await client.pool("p1")
    assert server.count == 1


async def test_a_certificate_that_does_not_verify_is_raised_at_once(
    server_tls: ssl.SSLContext,
) -> None:
    async with (
        RawServer(default=respond(200, pool_json()), tls=server_tls) as server,
        Client(base_url=server.base_url, max_retries=3) as client,
    ):
        with pytest.raises(TransportError, match="certificate") as caught:
            await client.pool("p1")
    assert server.accepted == 1
    assert server.count == 0
    assert isinstance(caught.value.__cause__, aiohttp.ClientConnectorCertificateError)


# --- cookies ------------------------------------------------------------------------------------


async def test_the_clients_own_session_keeps_no_cookies() -> None:
    set_cookie = {"Set-Cookie": "session=abc; Path=/"}
    # Host names, not IP addresses: aiohttp's default jar ignores cookies of IP hosts.
    async with (
        RawServer(default=respond(200, pool_json(), headers=set_cookie)) as main,
        RawServer(default=respond(200, {"markets": []}, headers=set_cookie)) as test,
        Client(
            base_url=f"http://localhost:{main.port}",
            testnet_base_url=f"http://localhost:{test.port}",
        ) as client,
    ):
        await client.pool("p1")
        await client.token_markets("t")
        await client.pool("p2")
    assert [c.headers.get("cookie") for c in main.conns + test.conns] == [None] * 3


# --- per-call results -------------------------------------------------------------------------


def _answer(body: bytes, *headers: tuple[str, str]) -> bytes:
    head = [b"HTTP/1.1 200 OK", b"Content-Type: application/json"]
    head += [f"{name}: {value}".encode() for name, value in headers]
    head += [f"Content-Length: {len(body)}".encode(), b"Connection: close"]
    return b"\r\n".join(head) + b"\r\n\r\n" + body


async def test_with_response_gives_the_value_and_the_answer_it_came_from() -> None:
    body = json.dumps(pool_json("p1"), indent=1).encode()  # exactly as sent, spaces and all
    answer = _answer(body, ("X-Request-Id", "r-1"), ("Link", "<a>"), ("Link", "<b>"))
    async with (
        RawServer([respond(503)], default=raw(answer)) as server,
        Client(base_url=server.base_url) as client,
    ):
        client.set_testing(True)
        response = await client.with_response.pool("p1")
        plain = await client.pool("p1")
    assert isinstance(response, Response)
    assert response.value == plain
    assert response.value.pool_id == "p1"
    assert response.status == 200
    assert response.content == body
    assert response.headers["x-request-id"] == "r-1"
    assert response.headers.getall("LINK") == ["<a>", "<b>"]  # type: ignore[attr-defined]
    assert response.url == f"{server.base_url}/api/clob/pools/p1"
    assert response.network is Network.MAINNET
    assert response.attempts == 2
    assert response.elapsed > 0
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        response.status = 201  # type: ignore[misc]


async def test_with_response_offers_every_operation_with_the_same_arguments(
    server: FakeServer, client: Client
) -> None:
    tokens = await client.with_response.tokens(search="ETH")
    markets = await client.with_response.token_markets("0xabc")
    pool = await client.with_response.pool("0xpool", network="testnet")
    user = await client.with_response.user("0xuser")
    orders = await client.with_response.orders("0xuser", status="open", limit=2, cursor="c")
    board = await client.with_response.leaderboard(page=2, limit=3, deadline=5.0)
    assert tokens.value == await client.tokens(search="ETH")
    assert markets.network is Network.TESTNET  # token_markets goes to the test network
    assert pool.network is Network.TESTNET
    assert user.value.address == "0xuser"
    assert orders.url.endswith("/api/clob/users/0xuser/orders?status=OPEN&limit=2&cursor=c")
    assert board.value.page == 2
    assert [r.status for r in (tokens, markets, pool, user, orders, board)] == [200] * 6
    with pytest.raises(ValueError, match="pool_id"):
        await client.with_response.pool("")


async def test_coalesced_callers_each_get_a_response_for_the_shared_request(
    server: FakeServer,
) -> None:
    async with Client(base_url=server.base_url) as client, server.gate("pool") as gate:
        calls = asyncio.gather(
            client.with_response.pool("p1"),
            client.with_response.pool("p1"),
            client.pool("p1"),
        )
        await gate.arrived(1)  # all three are in flight: the answer is held
        gate.release()
        first, second, value = await calls
    assert len(server.requests) == 1
    assert first.value is second.value is value
    assert first.status == second.status == 200
    assert first.attempts == second.attempts == 1


async def test_a_redirected_response_says_where_it_came_from() -> None:
    script = [respond(302, b"", headers={"Location": "/api/clob/pools/moved"})]
    async with (
        RawServer(script, default=respond(200, pool_json("moved"))) as server,
        Client(base_url=server.base_url) as client,
    ):
        response = await client.with_response.pool("p1")
    assert response.url == f"{server.base_url}/api/clob/pools/moved"
    assert response.attempts == 1


# --- attempts in errors -----------------------------------------------------------------------


async def test_an_error_before_any_request_made_no_attempt() -> None:
    async with (
        RawServer([respond(429, headers={"Retry-After": "120"})]) as server,
        Client(base_url=server.base_url) as client,
    ):
        with pytest.raises(RateLimitError) as first:
            await client.pool("p1")
        with pytest.raises(RequestTimeoutError, match="429 hold") as second:
            await client.pool("p2", deadline=1.0)  # the network is held 60 s: not sent
    assert first.value.attempts == 1
    assert second.value.attempts == 0
    assert server.count == 1


# --- retry events ---------------------------------------------------------------------------


async def test_on_retry_sees_each_retry_before_its_wait() -> None:
    events: list[RetryEvent] = []
    script = [respond(503, headers={"Retry-After": "0.05"}), close()]
    async with (
        RawServer(script) as server,
        Client(base_url=server.base_url, on_retry=events.append) as client,
    ):
        await client.pool("p1")
    url = f"{server.base_url}/api/clob/pools/p1"
    assert [(e.operation, e.network, e.url, e.attempt) for e in events] == [
        ("pool", Network.MAINNET, url, 1),
        ("pool", Network.MAINNET, url, 2),
    ]
    assert events[0].wait == 0.05
    assert isinstance(events[0].error, ServerError)
    assert isinstance(events[1].error, TransportError)
    assert 0 <= events[1].wait <= 1.0
    assert server.count == 3


async def test_an_on_retry_that_raises_is_logged_and_ignored(
    caplog: pytest.LogCaptureFixture,
) -> None:
    def broken(event: RetryEvent) -> None:
        raise RuntimeError("hook bug")

    async with (
        RawServer([respond(503)]) as server,
        Client(base_url=server.base_url, on_retry=broken) as client,
    ):
        client.set_testing(True)
        assert (await client.pool("p1")).pool_id == "p1"
    (record,) = [r for r in caplog.records if r.name == "asyncapi_client"]
    assert record.levelno == logging.WARNING
    assert "on_retry" in record.getMessage()
    assert record.exc_info is not None


@pytest.mark.parametrize("hook", [42, "print", asyncio.sleep])
def test_on_retry_must_be_a_plain_function(hook: object) -> None:
    with pytest.raises(ValueError, match="on_retry"):
        Client(base_url="http://h.example", on_retry=hook)  # type: ignore[arg-type]


# --- testing mode ---------------------------------------------------------------------------


async def test_testing_mode_leaves_the_clients_settings_alone() -> None:
    async with (
        RawServer(default=respond(503)) as server,
        Client(base_url=server.base_url, max_retries=3) as client,
    ):
        client.set_testing(True, max_retries=0)
        with pytest.raises(ServerError) as once:
            await client.pool("p1")
        client.set_testing(False)
        client.set_testing(True)  # testing again, without max_retries: the client's own 3
        with pytest.raises(ServerError) as again:
            await client.pool("p2")
    assert once.value.attempts == 1
    assert again.value.attempts == 4
    assert server.count == 5


# --- lifecycle ------------------------------------------------------------------------------


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


# --- proxy, TLS and the environment -------------------------------------------------------------


async def test_a_proxy_carries_every_request() -> None:
    async with (
        RawServer(default=respond(200, pool_json("p1"))) as api,
        RawServer(default=forward()) as proxy,
        Client(base_url=api.base_url, proxy=proxy.base_url, headers={KEY: SECRET}) as client,
    ):
        await client.pool("p1")
        await client.pool("p2")
    assert [c.target for c in proxy.conns] == [
        f"{api.base_url}/api/clob/pools/p1",
        f"{api.base_url}/api/clob/pools/p2",
    ]
    assert [c.target for c in api.conns] == ["/api/clob/pools/p1", "/api/clob/pools/p2"]
    assert api.conns[0].headers[KEY.lower()] == SECRET


async def test_trust_env_reads_http_proxy_from_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name in ("NO_PROXY", "no_proxy", "HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    async with (
        RawServer(default=respond(200, pool_json("p1"))) as api,
        RawServer(default=forward()) as proxy,
    ):
        monkeypatch.setenv("HTTP_PROXY", proxy.base_url)
        monkeypatch.setenv("http_proxy", proxy.base_url)
        async with Client(base_url=api.base_url) as ignoring:
            await ignoring.pool("p1")  # trust_env=False, the default: straight to the API
        assert proxy.count == 0
        async with Client(base_url=api.base_url, trust_env=True) as trusting:
            await trusting.pool("p1")
    assert [c.target for c in proxy.conns] == [f"{api.base_url}/api/clob/pools/p1"]
    assert api.count == 2


async def test_ssl_takes_a_context_that_trusts_your_own_ca(
    server_tls: ssl.SSLContext, client_tls: ssl.SSLContext
) -> None:
    async with (
        RawServer(default=respond(200, pool_json("p1")), tls=server_tls) as api,
        Client(base_url=api.base_url, ssl=client_tls) as trusting,
        Client(base_url=api.base_url, max_retries=0) as default,
    ):
        assert (await trusting.pool("p1")).pool_id == "p1"
        with pytest.raises(TransportError, match="certificate"):
            await default.pool("p1")  # the system's trust store does not know the CA
    assert api.base_url.startswith("https://")
    assert api.count == 1


async def test_ssl_false_turns_verification_off(server_tls: ssl.SSLContext) -> None:
    async with (
        RawServer(default=respond(200, pool_json("p1")), tls=server_tls) as api,
        Client(base_url=api.base_url, ssl=False) as client,
    ):
        assert (await client.pool("p1")).pool_id == "p1"


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"proxy": "socks5://127.0.0.1:1080"}, "proxy"),
        ({"proxy": 8080}, "proxy"),
        ({"proxy": "http://[::1"}, "proxy"),
        ({"ssl": "verify"}, "ssl"),
        ({"ssl": 1}, "ssl"),
        ({"trust_env": "yes"}, "trust_env"),
        ({"trust_env": None}, "trust_env"),
    ],
)
def test_invalid_session_options_are_refused(kwargs: dict[str, object], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        Client(base_url="http://h.example", **kwargs)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "kwargs", [{"proxy": "http://127.0.0.1:3128"}, {"ssl": False}, {"trust_env": True}]
)
async def test_session_options_are_not_for_a_callers_session(kwargs: dict[str, object]) -> None:
    async with aiohttp.ClientSession() as session:
        with pytest.raises(ValueError, match="configure your session instead"):
            Client(base_url="http://h.example", session=session, **kwargs)  # type: ignore[arg-type]


# --- the URL of an attempt ------------------------------------------------------------------

_HOSTS = st.sampled_from(
    [
        "127.0.0.1",
        "[::1]",
        "main.example",
        "Main.EXAMPLE",
        "xn--bcher-kva.example",
        "b\u00fccher.example",
    ]
)
_PORTS = st.sampled_from(["", ":80", ":443", ":8080", ":1"])
#: Text of a base's path prefix or of a caller's id: anything, even what must be encoded.
_TEXT = st.text(st.characters(codec="utf-8"), max_size=12)


@given(
    scheme=st.sampled_from(["http", "https"]),
    host=_HOSTS,
    port=_PORTS,
    prefix=st.lists(_TEXT, max_size=3),
    segment=_TEXT.filter(lambda text: text not in ("", ".", "..")),
    query=st.lists(st.tuples(st.sampled_from(["cursor", "limit"]), _TEXT), max_size=2),
)
@settings(max_examples=150)
def test_an_attempt_goes_to_the_url_of_its_request(
    scheme: str, host: str, port: str, prefix: list[str], segment: str, query: list[tuple[str, str]]
) -> None:
    """The URL object an attempt sends to is built from the network's base, not parsed
    from the request's URL (a third of the cost): it must be that URL, part for part."""
    base = f"{scheme}://{host}{port}/" + "/".join(quote(part, safe="") for part in prefix)
    try:
        client = Client(base_url=base)
    except HostConfigError:
        assume(False)
    path = "/clob/pools/" + encode_segment(segment)
    text = "&".join(f"{key}={quote(value, safe='')}" for key, value in query)
    request = client._request(POOL, Network.MAINNET, None, encode_segment(segment), text)
    sender = client._sender
    assert isinstance(sender, AiohttpSender)
    assert sender._origins[Network.MAINNET] is not None  # built, not parsed
    target = sender._target(request.url, request.network)
    parsed = URL(request.url, encoded=True)
    assert target == parsed
    assert (target.scheme, target.raw_host, target.port, target.raw_path_qs) == (
        parsed.scheme,
        parsed.raw_host,
        parsed.port,
        parsed.raw_path_qs,
    )
    assert str(target) == str(parsed)
    assert target.raw_path.endswith(path)


_SEGMENT_TEXT = st.text(
    st.one_of(st.sampled_from("aZ09._~-%/?#é١ "), st.characters(codec="utf-8")), max_size=12
)


@given(_SEGMENT_TEXT)
@settings(max_examples=300)
def test_an_id_is_sent_as_is_exactly_when_it_is_unreserved(value: str) -> None:
    """An id goes out as it is exactly when it is made of RFC 3986's unreserved characters
    (the client's fast path); anything else, non-ASCII letters and digits too, is
    percent-encoded, and the fast path and the general one agree."""
    unreserved = re.fullmatch(r"[A-Za-z0-9._~-]+", value) is not None
    expected = quote(value, safe="")
    if expected in (".", ".."):
        expected = expected.replace(".", "%2E")
    assert encode_segment(value) == expected
    try:
        sent = identifier(value, "pool_id")
    except ValueError:  # empty, or a dot segment once decoded: tested in test_requests
        assert not value or set(unquote(unquote(value))) <= {"."} or "%" in value
        return
    assert sent == expected
    assert (sent == value) == unreserved


def test_a_url_off_its_networks_base_is_parsed() -> None:
    client = Client(base_url="http://127.0.0.1:9")
    client._request(POOL, Network.MAINNET, None, "p")  # the base is known
    sender = client._sender
    assert isinstance(sender, AiohttpSender)
    target = sender._target("https://elsewhere.example:8443/x?y=1", Network.MAINNET)
    assert str(target) == "https://elsewhere.example:8443/x?y=1"
