"""A whole pool of stale keep-alive connections: after a burst and an idle pause longer than
the server's keep-alive timeout, every pooled connection is stale. A request lost on one is
sent again on a new connection, never on the next pooled one (stale too), so sequential
calls with ``max_retries=0`` all succeed; a server that drops every connection still sees
``max_retries + 1`` requests per call.

The stale pool here is one a load balancer forgot without a word (its idle timeout passed:
the next request on any of its connections is answered with a TCP reset), so the client can
tell a connection is stale only by sending on it, one connection at a time. (A server that
closes idle connections itself is in tests/core/test_stale_connections.py: the client sees those
FINs before it picks the next connection.)
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import struct
from collections.abc import AsyncIterator
from typing import Self

import aiohttp
import pytest

from asyncapi_client import Client, TransportError
from asyncapi_client._http import CALLER_MIDDLEWARES
from tests._oracle import pool_json

SESSIONS = ["own-session", "callers-session"]
BURST = 10


_BODY = json.dumps(pool_json()).encode()
_ANSWER = (
    b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
    b"Content-Length: %d\r\n\r\n" % len(_BODY) + _BODY
)


class ForgetfulServer:
    """Keeps connections alive until :meth:`forget`: then a request on any connection made
    before is answered with a TCP reset, never read (a load balancer that dropped its idle
    flows). With ``drop_after_forget``, a request on a new connection is read, then its
    connection closed without a byte of answer (a server that drops every connection).
    ``requests`` counts the requests read; ``connections`` the connections accepted."""

    def __init__(self, *, drop_after_forget: bool = False) -> None:
        self.drop_after_forget = drop_after_forget
        self.requests = 0
        self.connections = 0
        self._epoch = 0
        self._server: asyncio.Server | None = None
        self._open: set[asyncio.StreamWriter] = set()

    @property
    def base_url(self) -> str:
        assert self._server is not None
        host, port = self._server.sockets[0].getsockname()[:2]
        return f"http://{host}:{port}"

    def forget(self) -> None:
        self._epoch += 1

    async def __aenter__(self) -> Self:
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        assert self._server is not None
        self._server.close()
        for writer in self._open:
            writer.transport.abort()
        await self._server.wait_closed()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        self._open.add(writer)
        born = self._epoch
        try:
            while True:
                await reader.readuntil(b"\r\n\r\n")
                if born < self._epoch:  # forgotten: reset, as if it never existed
                    sock = writer.get_extra_info("socket")
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                    writer.transport.abort()
                    return
                self.requests += 1
                if self.drop_after_forget and self._epoch:
                    return  # read, then dropped without a byte of answer
                writer.write(_ANSWER)
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            return
        finally:
            self._open.discard(writer)
            writer.close()


@pytest.mark.parametrize("how", SESSIONS)
async def test_a_pool_a_load_balancer_forgot_fails_no_call(how: str) -> None:
    async with ForgetfulServer() as server, client_of(server, how, 0) as client:
        await asyncio.gather(*(client.pool(f"p{i}") for i in range(BURST)))
        assert server.connections >= 3
        server.forget()
        answers = [await client.with_response.pool("p1") for _ in range(5)]
    assert [answer.attempts for answer in answers] == [1] * 5
    assert server.requests == BURST + 5


@pytest.mark.parametrize("how", SESSIONS)
async def test_a_forgotten_pool_and_a_server_dropping_every_connection_one_request_per_attempt(
    how: str,
) -> None:
    if how == "callers-session" and not CALLER_MIDDLEWARES:
        pytest.skip("no public twin of session._middlewares: aiohttp's resend is not stopped")
    async with (
        ForgetfulServer(drop_after_forget=True) as server,
        client_of(server, how, 2) as client,
    ):
        await asyncio.gather(*(client.pool(f"p{i}") for i in range(BURST)))
        server.forget()
        with pytest.raises(TransportError, match="closed the connection") as caught:
            await client.pool("p1")
    assert caught.value.attempts == 3
    assert server.requests == BURST + 3


@contextlib.asynccontextmanager
async def client_of(server: ForgetfulServer, how: str, max_retries: int) -> AsyncIterator[Client]:
    async with contextlib.AsyncExitStack() as stack:
        session = None
        if how == "callers-session":
            session = await stack.enter_async_context(aiohttp.ClientSession())
        client = await stack.enter_async_context(
            Client(base_url=server.base_url, max_retries=max_retries, session=session)
        )
        client.set_testing(True)
        yield client
