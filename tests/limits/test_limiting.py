"""The limiter seam of the session layer: what every attempt asks before it is sent.

The limiters themselves (rates, weights, the reservation rule) are tested in
``test_limiters.py``; here, how ``Client`` uses one: ``limiter=`` and ``rate_limit=``,
every attempt (retries too) through ``acquire``, a 429 through ``hold``, a hold that
appears during a wait, a limiter that fails or hangs, and what closing leaves alone.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

import pytest

from asyncapi_client import (
    Admission,
    Client,
    LimiterError,
    LocalLimiter,
    Network,
    NetworkName,
    Rate,
    RateLimitError,
    RequestTimeoutError,
    RetryEvent,
)
from tests._checks import settled, stray_tasks
from tests._oracle import pool_json
from tests._rawserver import RawServer, respond


@pytest.fixture(autouse=True)
async def _no_stray_tasks() -> AsyncIterator[None]:
    yield
    assert await settled(lambda: not stray_tasks()), stray_tasks()


class Recording(LocalLimiter):
    """A LocalLimiter that records every question the client asks it."""

    def __init__(self, rates: list[Rate] | None = None, margin: float = 0.05) -> None:
        super().__init__(rates or [], margin=margin)
        self.calls: list[tuple[str, ...]] = []

    async def acquire(self, operation: str, network: Network) -> Admission:
        self.calls.append(("acquire", operation, network.value))
        return await super().acquire(operation, network)

    async def held(self, network: Network) -> float:
        self.calls.append(("held", network.value))
        return await super().held(network)

    async def hold(self, network: Network, seconds: float, retry_after: str | None = None) -> None:
        self.calls.append(("hold", network.value, f"{seconds:g}"))
        await super().hold(network, seconds, retry_after)

    def asked(self, what: str) -> int:
        return sum(1 for call in self.calls if call[0] == what)


class Broken:
    """A limiter whose store is down for its first ``failures`` questions."""

    def __init__(self, failures: int, *, hang: bool = False) -> None:
        self.failures = failures
        self.hang = hang
        self.closed = False

    def __repr__(self) -> str:
        return "Broken(redis://127.0.0.1:1)"

    async def acquire(self, operation: str, network: Network) -> Admission:
        if self.failures > 0:
            self.failures -= 1
            if self.hang:
                await asyncio.Event().wait()  # never answers
            raise ConnectionRefusedError("store unreachable")
        return Admission(wait=0.0)

    async def held(self, network: Network) -> float:
        return 0.0

    async def hold(self, network: Network, seconds: float) -> None:
        return None

    async def clear_hold(self, network: Network | NetworkName | None = None) -> None:
        return None

    async def aclose(self) -> None:
        self.closed = True


# --- limiter= and rate_limit= -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("rate_limit", "rates"),
    [
        (None, ()),
        (20, (Rate(20, 1.0),)),
        (5.0, (Rate(5, 1.0),)),
        (2.5, (Rate(1, 0.4),)),  # a fraction: one request every 1 / x seconds
        (0.5, (Rate(1, 2.0),)),
    ],
)
def test_rate_limit_is_a_shorthand_for_a_local_limiter(
    rate_limit: float | None, rates: tuple[Rate, ...]
) -> None:
    limiter = Client(base_url="http://h.example", rate_limit=rate_limit).limiter
    assert type(limiter) is LocalLimiter
    assert limiter.rates == rates


def test_each_client_gets_its_own_default_limiter() -> None:
    one, two = Client(base_url="http://h.example"), Client(base_url="http://h.example")
    assert one.limiter is not two.limiter


async def test_every_attempt_retries_included_asks_the_limiter_before_it_is_sent() -> None:
    limiter = Recording([Rate(100, 1.0)])
    async with (
        RawServer([respond(503), respond(500)]) as server,
        Client(base_url=server.base_url, limiter=limiter) as client,
    ):
        client.set_testing(True)
        await client.pool("p1")
    assert server.count == 3
    assert [c for c in limiter.calls if c[0] == "acquire"] == [("acquire", "pool", "mainnet")] * 3


async def test_the_idle_default_limiter_is_not_asked_before_a_first_attempt() -> None:
    async with (
        RawServer([respond(429, headers={"Retry-After": "0"})]) as server,
        Client(base_url=server.base_url) as client,
    ):
        limiter = client.limiter
        assert isinstance(limiter, LocalLimiter)
        asked: list[str] = []
        original = limiter.acquire

        async def acquire(operation: str, network: Network) -> Admission:
            asked.append(operation)
            return await original(operation, network)

        limiter.acquire = acquire  # type: ignore[method-assign]
        # the first request to a network asks (it learns whether limits are advertised),
        # a 429, then the retry: that one asks; its answer carries no limit headers
        await client.pool("p1")
        assert asked == ["pool", "pool"]
        await client.pool("p2")  # idle again: straight out
        assert asked == ["pool", "pool"]
    assert server.count == 3


async def test_a_429_holds_every_client_sharing_the_limiter() -> None:
    shared = Recording()
    async with (
        RawServer([respond(429, headers={"Retry-After": "1"})]) as one_server,
        RawServer() as other_server,
        Client(base_url=one_server.base_url, limiter=shared) as one,
        Client(base_url=other_server.base_url, limiter=shared) as other,
    ):
        await one.pool("p1")
        await other.pool("p2")  # same network, same limiter: it waits the hold out
    assert ("hold", "mainnet", "1") in shared.calls
    held_until = one_server.times[0] + 1.0
    assert other_server.times[0] >= held_until - 0.05, (other_server.times, held_until)
    assert one_server.times[1] >= held_until - 0.05


async def test_a_hold_that_appears_during_a_wait_forfeits_the_slot() -> None:
    """Never send inside a hold: a request that slept for its slot asks again."""
    limiter = Recording([Rate(1, 0.3)])
    async with (
        RawServer([respond(429, headers={"Retry-After": "1"})]) as server,
        Client(base_url=server.base_url, limiter=limiter) as client,
    ):
        # p1 reserves the slot 0.3 s on and sleeps; meanwhile p0's 429 puts a 1 s hold on
        await asyncio.gather(client.pool("p0"), client.pool("p1"))
    held_until = server.times[0] + 1.0
    assert all(t >= held_until - 0.05 for t in server.times[1:]), server.times
    assert limiter.asked("held") >= 1
    assert limiter.asked("acquire") >= 4  # p0, p1, p1 again after the hold appeared, p0's retry
    assert server.count == 3


async def test_a_hold_past_the_cap_fails_at_once_without_a_request() -> None:
    limiter = LocalLimiter()
    await limiter.hold(Network.MAINNET, 120.0)
    async with (
        RawServer() as server,
        Client(base_url=server.base_url, limiter=limiter) as client,
    ):
        with pytest.raises(RateLimitError, match="retry_after_cap=60s") as caught:
            await client.pool("p1")
    assert caught.value.attempts == 0
    assert caught.value.retry_after is not None
    assert caught.value.retry_after > 100
    assert server.count == 0


# --- a limiter that fails --------------------------------------------------------------------


async def test_a_limiter_that_fails_is_retried_like_a_connection_failure() -> None:
    limiter = Broken(failures=2)
    async with (
        RawServer(default=respond(200, pool_json("p1"))) as server,
        Client(base_url=server.base_url, limiter=limiter) as client,
    ):
        client.set_testing(True)
        response = await client.with_response.pool("p1")
    assert response.value.pool_id == "p1"
    assert response.attempts == 1  # requests sent: the two failed questions sent none
    assert server.count == 1


async def test_a_limiter_that_stays_down_fails_with_a_limiter_error_naming_it() -> None:
    limiter = Broken(failures=100)
    async with (
        RawServer() as server,
        Client(base_url=server.base_url, limiter=limiter, max_retries=2) as client,
    ):
        client.set_testing(True)
        with pytest.raises(LimiterError) as caught:
            await client.pool("p1")
    error = caught.value
    assert error.limiter == "Broken(redis://127.0.0.1:1)"
    assert "Broken(redis://127.0.0.1:1)" in str(error)
    assert "ConnectionRefusedError" in str(error)
    assert error.url == f"{server.base_url}/api/clob/pools/p1"
    assert error.attempts == 0
    assert isinstance(error.__cause__, LimiterError)  # the try before
    assert limiter.failures == 97  # three tries: the first and two retries
    assert server.count == 0


class CannotHold(Recording):
    """A limiter that answers acquire() but whose store refuses every hold."""

    async def hold(self, network: Network, seconds: float, retry_after: str | None = None) -> None:
        self.calls.append(("hold", network.value, f"{seconds:g}"))
        raise ConnectionRefusedError("store unreachable")


@pytest.mark.parametrize(
    ("headers", "max_retries", "why"),
    [
        ({"Retry-After": "120"}, 3, "retry_after_cap=60s: not waited for"),
        ({}, 0, "HTTP 429"),  # retries spent: the back-off is held, not waited
    ],
    ids=["past the cap", "retries spent"],
)
async def test_a_hold_that_cannot_be_placed_keeps_a_final_429(
    headers: dict[str, str], max_retries: int, why: str
) -> None:
    """A 429 that is raised anyway stays the error when its hold fails: no LimiterError
    in its place, and no retry it would have brought."""
    limiter = CannotHold()
    async with (
        RawServer(default=respond(429, headers=headers)) as server,
        Client(base_url=server.base_url, limiter=limiter, max_retries=max_retries) as client,
    ):
        with pytest.raises(RateLimitError, match=why) as caught:
            await client.pool("p1")
    assert caught.value.attempts == 1
    assert limiter.asked("hold") == 1
    assert server.count == 1


async def test_a_hold_that_cannot_be_placed_before_a_retry_is_the_error_then() -> None:
    """Before a retry, the hold's failure is the retried error (like a connection failure);
    after the last attempt, the 429 is raised."""
    limiter = CannotHold()
    retried: list[RetryEvent] = []
    async with (
        RawServer(default=respond(429, headers={"Retry-After": "0"})) as server,
        Client(
            base_url=server.base_url, limiter=limiter, max_retries=2, on_retry=retried.append
        ) as client,
    ):
        with pytest.raises(RateLimitError) as caught:
            await client.pool("p1")
    assert [type(event.error) for event in retried] == [LimiterError, LimiterError]
    assert caught.value.attempts == 3
    assert server.count == 3


async def test_a_limiter_that_hangs_fails_within_the_attempt_timeout() -> None:
    limiter = Broken(failures=1, hang=True)
    async with (
        RawServer() as server,
        Client(base_url=server.base_url, limiter=limiter, timeout=0.2, max_retries=0) as client,
    ):
        with pytest.raises(LimiterError, match=r"did not answer within 0\.2s"):
            await client.pool("p1")
        assert (await client.pool("p1")).pool_id == "p1"  # it answers again: used again
    assert server.count == 1


async def test_closing_a_client_leaves_its_limiter_alone() -> None:
    limiter = Broken(failures=0)
    async with RawServer() as server:
        for _ in range(2):
            async with Client(base_url=server.base_url, limiter=limiter) as client:
                await client.pool("p1")
    assert limiter.closed is False
    assert server.count == 2


async def test_a_deadline_that_ends_while_the_limiter_hangs_names_it() -> None:
    limiter = Broken(failures=1, hang=True)
    async with (
        RawServer() as server,
        Client(base_url=server.base_url, limiter=limiter, timeout=5.0, deadline=0.3) as client,
    ):
        with pytest.raises(RequestTimeoutError) as caught:
            await client.pool("p1")
    error = caught.value
    assert "ran past its deadline of 0.3s" in str(error)
    assert "waiting for the limiter Broken(redis://127.0.0.1:1) to answer" in str(error)
    assert error.attempts == 0
    assert server.count == 0


async def test_a_deadline_before_the_retry_of_a_failed_limiter_names_its_failure() -> None:
    limiter = Broken(failures=100)
    async with (
        RawServer() as server,
        Client(base_url=server.base_url, limiter=limiter, deadline=0.01) as client,
    ):
        with pytest.raises(RequestTimeoutError) as caught:
            await client.pool("p1")
    error = caught.value
    assert "deadline" in str(error)  # (the wait before the retry, or past it: random)
    assert (
        "the limiter could not be reached: the limiter Broken(redis://127.0.0.1:1) failed: "
        "ConnectionRefusedError: store unreachable"
    ) in str(error)
    assert error.attempts == 0
    assert server.count == 0


def stall(seconds: float) -> None:
    """Block the whole process, as a machine that does not schedule it would."""
    time.sleep(seconds)


@pytest.mark.parametrize(
    ("blocked", "margin", "asked"),
    [
        (0.0, 0.05, 2),  # on time: one question a call
        (0.3, 0.05, 3),  # woken 0.1 s late, more than the margin: the slot is given up
        (0.3, 0.0, 2),  # margin 0: the limiter's own clock only, no check
    ],
)
async def test_a_wait_overslept_by_more_than_the_margin_gives_the_slot_up(
    blocked: float, margin: float, asked: int
) -> None:
    """The process stalls while the call sleeps for its slot: woken that late, it asks again
    rather than sending among the next window's requests."""
    limiter = Recording([Rate(1, 0.2)], margin=margin)
    async with (
        RawServer(default=respond(200, pool_json("p1"))) as server,
        Client(base_url=server.base_url, limiter=limiter) as client,
    ):
        await client.pool("p1")  # the first slot
        loop = asyncio.get_running_loop()
        # the loop is blocked while the second call sleeps for its slot (0.2 s + margin)
        loop.call_later(0.05, stall, blocked)
        await client.pool("p2")
    assert limiter.asked("acquire") == asked
    assert server.count == 2


async def test_a_process_always_late_still_sends_after_two_slots_given_up() -> None:
    limiter = Recording([Rate(1, 0.3)])  # a slot every 0.35 s
    async with (
        RawServer(default=respond(200, pool_json("p1"))) as server,
        Client(base_url=server.base_url, limiter=limiter) as client,
    ):
        await client.pool("p1")
        loop = asyncio.get_running_loop()
        # every wait for a slot (until 0.35, 0.7, 1.05 s) is overslept by 0.1 s
        for delay, seconds in ((0.05, 0.4), (0.5, 0.3), (0.85, 0.3)):
            loop.call_later(delay, stall, seconds)
        await client.pool("p2")
    assert limiter.asked("acquire") == 4  # the first call; the second: two given up, then sent
    assert server.count == 2
