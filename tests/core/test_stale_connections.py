"""Stale keep-alive connections: a server closes its idle connections (nginx's
``keepalive_timeout``) while the client is busy; the client's next requests find them in its
pool and fail before the server could see them. Such a request is sent once more, on a new
connection, and does not count as an attempt; a new connection that drops is still an
attempt, so a server that drops every connection sees ``max_retries + 1`` requests.

The server (tests/_keepalive.py) counts the requests it reads: a request sent on a
connection it had closed is never read.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

import aiohttp
import pytest

from asyncapi_client import Client, TransportError
from asyncapi_client._http import CALLER_MIDDLEWARES
from tests._checks import TraceRecorder, settled, stray_tasks
from tests._keepalive import KeepAliveServer
from tests._rawserver import RawServer

SESSIONS = ["own-session", "own-session-traced", "callers-session"]
IDLE = 0.1


@pytest.fixture(autouse=True)
async def _no_stray_tasks() -> AsyncIterator[None]:
    yield
    assert await settled(lambda: not stray_tasks()), stray_tasks()


@contextlib.asynccontextmanager
async def client_of(server: KeepAliveServer, how: str, max_retries: int) -> AsyncIterator[Client]:
    """A client of ``server``: with its own session (traced or not: the two ways it sends),
    or with a caller's session."""
    traced = [TraceRecorder().config] if how == "own-session-traced" else None
    async with contextlib.AsyncExitStack() as stack:
        session = None
        if how == "callers-session":
            session = await stack.enter_async_context(aiohttp.ClientSession())
        client = await stack.enter_async_context(
            Client(
                base_url=server.base_url,
                max_retries=max_retries,
                session=session,
                trace_configs=traced,
            )
        )
        client.set_testing(True)  # no waits between retries
        yield client


@pytest.mark.parametrize("reset", [False, True], ids=["closed", "reset"])
@pytest.mark.parametrize("how", SESSIONS)
async def test_a_stale_connection_is_sent_again_and_no_attempt_is_lost(
    how: str, reset: bool
) -> None:
    """The idle connection closed in order (FIN: the client reads its end) or reset (RST:
    the client's write or read fails with ECONNRESET)."""
    server_of = KeepAliveServer(idle=IDLE, reset=reset)
    async with server_of as server, client_of(server, how, 0) as client:
        first = await client.with_response.pool("p1")
        server.wait_idle_closed(1)  # this loop is blocked meanwhile: the FIN is not seen
        second = await client.with_response.pool("p1")
    assert (first.attempts, second.attempts) == (1, 1)
    assert second.value.pool_id == "p1"
    assert server.requests == 2  # the stale request never reached the server
    assert server.connections == 2


@pytest.mark.parametrize("how", SESSIONS)
async def test_a_fan_out_after_an_idle_pause_finds_every_connection_stale_and_fails_none(
    how: str,
) -> None:
    """The issue's case: with max_retries=0, 20 of 40 calls failed after an idle pause."""
    async with KeepAliveServer(idle=IDLE) as server, client_of(server, how, 0) as client:
        await asyncio.gather(*(client.pool(f"p{i}") for i in range(8)))
        kept = server.connections
        server.wait_idle_closed(kept)  # every kept-alive connection is closed by the server
        answers = await asyncio.gather(*(client.with_response.pool(f"p{i}") for i in range(8)))
    assert [answer.attempts for answer in answers] == [1] * 8  # all answered, at once
    assert server.requests == 16


@pytest.mark.parametrize("how", SESSIONS)
async def test_a_server_dropping_every_connection_after_a_stale_one_sees_one_per_attempt(
    how: str,
) -> None:
    """One answer, then the connection goes stale, then every connection is dropped once
    its request is read: the call makes 3 attempts (max_retries=2) and the server sees 3
    requests, no more (the free resend of the stale request is the first of them), no
    fewer (the stale send is not counted as an attempt)."""
    if how == "callers-session" and not CALLER_MIDDLEWARES:
        pytest.skip("no public twin of session._middlewares: aiohttp's resend is not stopped")
    async with KeepAliveServer(idle=IDLE, answers=1) as server, client_of(server, how, 2) as c:
        await c.pool("p1")
        server.wait_idle_closed(1)
        with pytest.raises(TransportError, match="closed the connection") as caught:
            await c.pool("p1")
    assert caught.value.attempts == 3
    assert server.requests == 1 + 3


async def test_a_callers_session_gets_the_reuse_trace_once() -> None:
    """Two clients on one caller's session: one trace config is added to it, not two, and
    the caller's own trace configs stay."""
    mine = aiohttp.TraceConfig()
    async with aiohttp.ClientSession(trace_configs=[mine]) as session:
        Client(base_url="http://127.0.0.1:1", session=session)
        Client(base_url="http://127.0.0.1:1", session=session)
        assert len(session.trace_configs) == 2
        assert session.trace_configs[0] is mine


async def test_telling_reused_from_new_keeps_no_closed_connection_for_long() -> None:
    """200 calls, each on a new connection the server closes after its answer: what the
    connector keeps to tell a reused connection from a new one stays under 2 x 64."""
    async with RawServer() as server, Client(base_url=server.base_url) as client:
        for n in range(200):
            await client.pool(f"p{n}")
        session = client._sender.session
        assert session is not None
        kept = session.connector._handed  # type: ignore[union-attr]
        assert len(kept) < 128
    assert server.count == server.accepted == 200
