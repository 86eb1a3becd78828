"""The session layer (``asyncapi_client/_transport.py``): what goes on the wire per attempt.

Redirects, one request per attempt, failures that cannot heal, cookies. Wire faults are
played by the raw-socket :class:`~tests._faultserver.FaultServer`, TLS by a throwaway CA.
"""

from __future__ import annotations

import ssl
from collections.abc import AsyncIterator

import aiohttp
import pytest
import trustme

from asyncapi_client import Client, StatusError, TransportError
from tests._faultserver import (
    FaultServer,
    close,
    pool_json,
    raw,
    reserve_port,
    respond,
    settled,
    stray_tasks,
)

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
        FaultServer(script, default=respond(200, pool_json("moved"))) as server,
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
    async with FaultServer(default=respond(200, pool_json("theirs"))) as first:
        # another port on the same host, or the same port on another loopback address
        sock = reserve_port() if other == "port" else reserve_port("127.0.0.2", first.port)
        async with FaultServer(default=respond(200, pool_json("theirs")), sock=sock) as elsewhere:
            location = f"{elsewhere.base_url}/api/clob/pools/p1"
            async with (
                FaultServer(default=respond(status, b"", headers={"Location": location})) as api,
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
        FaultServer(default=respond(302, b"", headers={"Location": location})) as api,
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
    async with FaultServer(default=respond(200, pool_json("clear"))) as cleartext:
        location = f"{cleartext.base_url}/api/clob/pools/p1"
        async with (
            FaultServer(
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
    async with FaultServer(default=respond(200, pool_json("secure")), tls=server_tls) as secure:
        location = f"{secure.base_url}/api/clob/pools/p1"
        async with (
            FaultServer(default=respond(308, b"", headers={"Location": location})) as api,
            aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=client_tls)) as session,
            Client(base_url=api.base_url, headers={KEY: SECRET}, session=session) as client,
        ):
            pool = await client.pool("p1")
    assert pool.pool_id == "secure"
    assert secure.conns[0].headers[KEY.lower()] == SECRET


async def test_at_most_five_redirects_are_followed() -> None:
    hops = [respond(302, b"", headers={"Location": f"/api/clob/pools/h{i}"}) for i in range(9)]
    async with FaultServer(hops) as api, Client(base_url=api.base_url, max_retries=3) as client:
        with pytest.raises(StatusError, match="too many redirects") as caught:
            await client.pool("p1")
    assert api.count == 6  # the request and five hops, not retried
    assert caught.value.status == 302
    async with (
        FaultServer(hops[:5]) as api,
        Client(base_url=api.base_url, max_retries=3) as client,
    ):
        assert (await client.pool("p1")).pool_id == "p1"  # five hops are fine
    assert api.count == 6


async def test_a_redirect_without_location_is_a_status_error() -> None:
    async with (
        FaultServer(default=respond(302, b"")) as api,
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
    async with FaultServer(default=close()) as server:
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
        FaultServer([close()]) as server,
        aiohttp.ClientSession(middlewares=(middleware,)) as session,
        Client(base_url=server.base_url, session=session) as client,
    ):
        client.set_testing(True)
        assert (await client.pool("p1")).pool_id == "p1"
    assert server.count == 2
    assert seen == [f"{server.base_url}/api/clob/pools/p1"] * 2


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
        FaultServer(default=raw(answer)) as server,
        Client(base_url=server.base_url, max_retries=3) as client,
    ):
        with pytest.raises(TransportError, match="malformed HTTP response"):
            await client.pool("p1")
    assert server.count == 1


async def test_a_certificate_that_does_not_verify_is_raised_at_once(
    server_tls: ssl.SSLContext,
) -> None:
    async with (
        FaultServer(default=respond(200, pool_json()), tls=server_tls) as server,
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
        FaultServer(default=respond(200, pool_json(), headers=set_cookie)) as main,
        FaultServer(default=respond(200, {"markets": []}, headers=set_cookie)) as test,
        Client(
            base_url=f"http://localhost:{main.port}",
            testnet_base_url=f"http://localhost:{test.port}",
        ) as client,
    ):
        await client.pool("p1")
        await client.token_markets("t")
        await client.pool("p2")
    assert [c.headers.get("cookie") for c in main.conns + test.conns] == [None] * 3
