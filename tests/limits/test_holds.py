"""429 holds a user can bound, see and end; calls that sent nothing say so.

The fake exchange stamps each request as it arrives: waits are measured there, not on the
client's clock. The fleet-wide versions (a RedisLimiter, other processes) are in
``tests/fleet/test_redis_limiter.py`` and ``tests/fleet/test_fleet_processes.py``.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator

import aiohttp
import pytest

from asyncapi_client import (
    Admission,
    Client,
    LocalLimiter,
    Network,
    Rate,
    RateLimitError,
    RequestTimeoutError,
)
from asyncapi_client._limiters import HOLD_RECHECK
from asyncapi_client.testing import FakeExchange, FakeServer, Reply
from tests._checks import settled, stray_tasks

HUGE = "1000000000"  # 10**9 s: about 32 years


@pytest.fixture(autouse=True)
async def _no_stray_tasks() -> AsyncIterator[None]:
    yield
    assert await settled(lambda: not stray_tasks()), stray_tasks()


@pytest.fixture
async def server() -> AsyncIterator[FakeServer]:
    async with FakeServer(FakeExchange.generate(seed=9)) as srv:
        yield srv


def refuse_once(server: FakeServer, retry_after: str = HUGE) -> None:
    """The first ``tokens`` request gets a 429 with ``retry_after``; the rest, the data."""
    server.script("tokens", Reply(429, headers={"Retry-After": retry_after}, json={"e": "x"}))


# --- a hold lasts at most retry_after_cap ------------------------------------------------------


async def test_a_huge_retry_after_raises_at_once_and_holds_for_the_cap_only(
    server: FakeServer,
) -> None:
    refuse_once(server)
    async with Client(base_url=server.base_url, retry_after_cap=1.0) as client:
        started = time.monotonic()
        with pytest.raises(RateLimitError) as caught:
            await client.tokens()
        assert time.monotonic() - started < 0.5  # at once, no wait
        await client.tokens()  # held for the cap (1 s), then sent
    error = caught.value
    assert error.attempts == 1
    assert error.retry_after == 10**9
    # the server's own value, not a day ("86400s") nor the cap
    assert f"the server sent Retry-After: {HUGE}," in str(error)
    assert "retry_after_cap=1s: not waited for; requests to this network are held for 1s" in str(
        error
    )
    first, second = server.requests
    assert first.answered_at is not None
    waited = second.time - first.answered_at
    assert 1.0 - 0.05 <= waited < 1.0 + 0.5, waited


async def test_a_call_that_cannot_outwait_the_hold_says_what_the_server_sent(
    server: FakeServer,
) -> None:
    refuse_once(server)
    async with Client(base_url=server.base_url, retry_after_cap=30.0) as client:
        with pytest.raises(RateLimitError):
            await client.tokens()
        with pytest.raises(RequestTimeoutError) as caught:
            await client.pool("p1", deadline=1.0)
    error = caught.value
    assert error.attempts == 0  # nothing was sent
    assert f"a 429 hold (the server sent Retry-After: {HUGE})" in str(error)
    assert len(server.requests) == 1


async def test_a_hold_placed_past_a_clients_cap_says_what_the_server_sent() -> None:
    """A limiter shared with a client of a larger cap: the hold it placed is past this
    client's cap, which raises at once, with the server's value and the time left."""
    limiter = LocalLimiter()
    await limiter.hold(Network.MAINNET, 120.0, "120")
    async with (
        FakeServer(FakeExchange.generate(seed=9)) as server,
        Client(base_url=server.base_url, limiter=limiter, retry_after_cap=60.0) as client,
    ):
        with pytest.raises(RateLimitError) as caught:
            await client.pool("p1")
    error = caught.value
    assert error.attempts == 0
    assert "a 429 hold (the server sent Retry-After: 120) runs" in str(error)
    assert "longer than retry_after_cap=60s" in str(error)
    assert error.retry_after is not None
    assert 100 < error.retry_after <= 120
    assert server.requests == []


# --- clear_hold --------------------------------------------------------------------------------


class Watched(LocalLimiter):
    """A LocalLimiter that says when a call was told to wait on a hold."""

    def __init__(self) -> None:
        super().__init__()
        self.waiting = asyncio.Event()

    async def acquire(self, operation: str, network: Network) -> Admission:
        admission = await super().acquire(operation, network)
        if not admission.reserved:
            self.waiting.set()
        return admission


async def test_clear_hold_releases_waiting_calls_and_new_ones_at_once(
    server: FakeServer,
) -> None:
    refuse_once(server)
    async with Client(base_url=server.base_url, limiter=Watched(), max_retries=0) as client:
        with pytest.raises(RateLimitError):
            await client.tokens()  # held for retry_after_cap (60 s)
        assert await client.limiter.held(Network.MAINNET) > 50.0
        waiting = asyncio.ensure_future(client.leaderboard())
        assert isinstance(client.limiter, Watched)
        await client.limiter.waiting.wait()  # the call is waiting on the hold
        cleared = time.monotonic()
        await client.limiter.clear_hold(Network.MAINNET)
        await client.tokens()  # a new call goes at once
        new = server.requests[-1]
        await asyncio.wait_for(waiting, HOLD_RECHECK + 2.0)
    assert new.time - cleared < 0.5
    (released,) = [r for r in server.requests if r.operation == "leaderboard"]
    assert released.time - cleared < HOLD_RECHECK + 0.5


# --- client.limiter ----------------------------------------------------------------------------


async def test_client_limiter_is_the_given_one_or_the_clients_own() -> None:
    shared = LocalLimiter([Rate(5, 1.0)])
    async with (
        Client(base_url="http://127.0.0.1:1", limiter=shared) as given,
        Client(base_url="http://127.0.0.1:1", rate_limit=5) as shorthand,
        Client(base_url="http://127.0.0.1:1") as default,
    ):
        assert given.limiter is shared
        assert isinstance(shorthand.limiter, LocalLimiter)
        assert shorthand.limiter.rates == (Rate(5, 1.0),)
        assert isinstance(default.limiter, LocalLimiter)
        assert default.limiter.rates == ()  # only the 429 hold
        assert default.limiter is not shorthand.limiter


class OldStyle:
    """A third-party limiter written before clear_hold() and hold(retry_after=) existed."""

    def __init__(self) -> None:
        self.holds: list[tuple[Network, float]] = []

    async def acquire(self, operation: str, network: Network) -> Admission:
        return Admission(wait=0.0)

    async def held(self, network: Network) -> float:
        return 0.0

    async def hold(self, network: Network, seconds: float) -> None:
        self.holds.append((network, seconds))


async def test_a_limiter_written_before_clear_hold_still_works(server: FakeServer) -> None:
    refuse_once(server, "120")
    limiter = OldStyle()
    async with Client(
        base_url=server.base_url,
        limiter=limiter,  # type: ignore[arg-type]  # no clear_hold: works, not typed
        retry_after_cap=2.0,
    ) as client:
        seen: object = client.limiter
        assert seen is limiter
        with pytest.raises(RateLimitError):
            await client.tokens()
    assert limiter.holds == [(Network.MAINNET, 2.0)]  # capped, and called as it expects


# --- attempts == 0 for a call that sent nothing ------------------------------------------------


@pytest.mark.parametrize("callers_session", [False, True], ids=["own-session", "callers-session"])
async def test_a_call_starved_of_connection_slots_made_no_attempt(
    server: FakeServer, callers_session: bool
) -> None:
    # With a caller's session= too: the pipeline holds the slots either way (not aiohttp's
    # pool, whose wait would sit inside an attempt).
    async with contextlib.AsyncExitStack() as stack:
        session = (
            await stack.enter_async_context(aiohttp.ClientSession()) if callers_session else None
        )
        client = await stack.enter_async_context(
            Client(base_url=server.base_url, max_connections=1, session=session)
        )
        gate = stack.enter_context(server.gate("tokens"))
        first = asyncio.ensure_future(client.tokens())
        await gate.arrived(1)  # it has the only connection slot
        with pytest.raises(RequestTimeoutError, match=r"deadline of 0\.3s") as caught:
            await client.leaderboard(deadline=0.3)
        gate.release()
        await first
    assert caught.value.attempts == 0  # it waited for a slot and sent nothing
    assert [r.operation for r in server.requests] == ["tokens"]
