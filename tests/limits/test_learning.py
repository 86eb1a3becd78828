"""What a client's limiter does with what the server's answers say about its limits: one
first request before anything is known, a hold at zero remaining before any 429, learned
limits that only tighten the configured rates, Retry-After first, max_wait, status(), and
nothing learned from a cache hit or with learn=False."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager

import pytest
from aiohttp import web

from asyncapi_client import (
    Admission,
    Client,
    LimitStatus,
    LocalLimiter,
    MemoryCache,
    Network,
    Rate,
    RateLimitError,
    RequestTimeoutError,
)
from asyncapi_client._learning import Advertised
from tests._arrivals import ArrivalServer
from tests._checks import nested_call
from tests._oracle import pool_wire
from tests._rawserver import RawServer, hang
from tests._windows import most_in_any_window, timeline

MAIN = Network.MAINNET

Headers = Callable[[int], Mapping[str, str]]


class Server:
    """Answers every pool with the headers ``headers(n)`` says for its ``n``-th request (0
    based); records when each arrived. ``first`` holds the first request's answer until it is
    set (when given)."""

    def __init__(self, headers: Headers, first: asyncio.Event | None = None) -> None:
        self.headers = headers
        self.first = first
        self.arrived: list[float] = []
        self.came = asyncio.Event()  # set at every arrival
        self.base_url = ""

    async def answer(self, request: web.Request) -> web.Response:
        number = len(self.arrived)
        self.arrived.append(time.monotonic())
        self.came.set()
        if number == 0 and self.first is not None:
            await self.first.wait()
        status = int(self.headers(number).get("Status", "200"))
        headers = {k: v for k, v in self.headers(number).items() if k != "Status"}
        body = pool_wire(request.match_info["pool"], "mainnet") if status == 200 else {}
        return web.json_response(body, status=status, headers=headers)


@asynccontextmanager
async def serving(headers: Headers, first: asyncio.Event | None = None) -> AsyncIterator[Server]:
    server = Server(headers, first)
    app = web.Application()
    app.router.add_get("/api/clob/pools/{pool}", server.answer)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    server.base_url = f"http://127.0.0.1:{runner.addresses[0][1]}"
    try:
        yield server
    finally:
        await runner.cleanup()


def none(number: int) -> Mapping[str, str]:
    return {}


def split(remaining: int, reset: int, limit: int = 100) -> Headers:
    def headers(number: int) -> Mapping[str, str]:
        return {
            "RateLimit-Limit": str(limit),
            "RateLimit-Remaining": str(max(0, remaining - number)),
            "RateLimit-Reset": str(reset),
        }

    return headers


class Counting:
    """Counts what a client asks of a LocalLimiter and tells it (the limiter itself is the
    real one, so the client treats it as its own)."""

    def __init__(self, limiter: LocalLimiter) -> None:
        self.limiter = limiter
        self.asked = 0
        self.learning = 0
        self.waiting = asyncio.Event()
        self.observed: list[Advertised | None] = []
        acquire, observe = limiter.acquire, limiter.observe

        async def counted(operation: str, network: Network) -> Admission:
            self.asked += 1
            admission = await acquire(operation, network)
            if admission.learning:
                self.learning += 1
                self.waiting.set()
            return admission

        def told(network: Network, limits: Advertised | None, sent: float, heard: bool) -> None:
            self.observed.append(limits)
            observe(network, limits, sent, heard)

        limiter.acquire = counted  # type: ignore[method-assign]
        limiter.observe = told  # type: ignore[method-assign,assignment]

    async def learnings(self, count: int) -> None:
        """Wait until ``count`` more admissions said: wait for an answer."""
        until = self.learning + count
        while self.learning < until:
            self.waiting.clear()
            await self.waiting.wait()


async def test_the_first_request_goes_alone_and_the_others_wait_for_its_answer() -> None:
    release = asyncio.Event()
    counting = Counting(limiter := LocalLimiter())
    async with (
        serving(split(50, 10), first=release) as server,
        Client(base_url=server.base_url, limiter=limiter) as client,
    ):
        calls = [asyncio.ensure_future(client.pool(f"p{n}")) for n in range(5)]
        await server.came.wait()  # the first arrived; its answer is held
        await counting.learnings(8)  # the others asked, and asked again: wait for it
        assert len(server.arrived) == 1
        release.set()
        await asyncio.gather(*calls)
    assert len(server.arrived) == 5


async def test_an_api_without_limit_headers_keeps_the_fast_path() -> None:
    counting = Counting(limiter := LocalLimiter())
    async with (
        serving(none) as server,
        Client(base_url=server.base_url, limiter=limiter) as client,
    ):
        await client.pool("p1")  # the first asks: nothing is known yet
        assert counting.asked == 1
        await asyncio.gather(*(client.pool(f"p{n}") for n in range(2, 12)))
        assert counting.asked == 1  # its answer had no limit: not asked again
        assert await limiter.status(MAIN) == LimitStatus()


async def test_a_network_with_limits_is_asked_before_every_request() -> None:
    counting = Counting(limiter := LocalLimiter())
    async with (
        serving(split(50, 10)) as server,
        Client(base_url=server.base_url, limiter=limiter) as client,
    ):
        for n in range(4):
            await client.pool(f"p{n}")
        assert counting.asked == 4
        status = await limiter.status("mainnet")
    assert (status.limit, status.remaining, status.source) == (100, 47, "headers")
    assert status.reset is not None
    assert 8.0 < status.reset <= 10.0


async def test_zero_remaining_holds_the_network_until_the_reset_before_any_429() -> None:
    def headers(number: int) -> Mapping[str, str]:
        if number == 0:  # nothing left, for a second
            return {"RateLimit-Remaining": "0", "RateLimit-Reset": "1", "RateLimit-Limit": "5"}
        return split(4, 1, 5)(number - 1)

    async with (
        serving(headers) as server,
        Client(base_url=server.base_url) as client,
    ):
        await client.pool("p1")
        read = time.monotonic()
        await client.pool("p2")
    assert server.arrived[1] >= read + 0.95  # it waited for the reset (whole seconds)


async def test_what_is_learned_only_tightens_the_configured_rates() -> None:
    # the server says 1000 remain: the configured rate still holds where the requests land
    # (the kernel's stamps; one more than the count, for a request sent late after its slot)
    rate = Rate(5, 0.5)
    with ArrivalServer(split(1000, 60, 1000)) as arrivals:
        async with Client(
            base_url=arrivals.base_url, limiter=LocalLimiter([rate]), coalesce=False
        ) as client:
            await client.tokens()  # learned: 999 remain
            await asyncio.gather(*(client.tokens() for _ in range(15)))
        landed = [arrival.time for arrival in arrivals.arrivals]
    assert len(landed) == 16
    assert most_in_any_window(landed, rate.seconds) <= rate.count + 1, timeline(landed)
    # the server says 2 remain until a reset a second away: that binds the looser rate
    loose = LocalLimiter([Rate(100, 1.0)], margin=0.0)
    async with (
        serving(split(2, 1, 3)) as server,
        Client(base_url=server.base_url, limiter=loose) as client,
    ):
        await client.pool("p0")
        await asyncio.gather(*(client.pool(f"p{n}") for n in range(1, 5)))
    before_reset = [at for at in server.arrived if at < server.arrived[0] + 0.9]
    assert len(before_reset) <= 3


async def test_a_429_with_retry_after_holds_that_long_and_teaches_nothing() -> None:
    def headers(number: int) -> Mapping[str, str]:
        if number == 1:
            return {
                "Status": "429",
                "Retry-After": "1",
                "RateLimit-Remaining": "50",
                "RateLimit-Reset": "30",
            }
        return split(10, 30, 10)(number)

    counting = Counting(limiter := LocalLimiter())
    async with (
        serving(headers) as server,
        Client(base_url=server.base_url, limiter=limiter) as client,
    ):
        await client.pool("p1")
        await client.pool("p2")  # a 429: held a second, then retried
    # the hold is the Retry-After: not the learned window's reset, 30 s away
    assert 0.95 <= server.arrived[2] - server.arrived[1] < 10.0
    assert [said.remaining for said in counting.observed if said is not None] == [10, 8]


async def test_learn_false_reads_nothing_and_never_waits_for_a_first_answer() -> None:
    release = asyncio.Event()
    counting = Counting(limiter := LocalLimiter(learn=False))
    async with (
        serving(split(0, 30), first=release) as server,
        Client(base_url=server.base_url, limiter=limiter) as client,
    ):
        first = asyncio.ensure_future(client.pool("p0"))
        rest = [asyncio.ensure_future(client.pool(f"p{n}")) for n in range(1, 4)]
        while len(server.arrived) < 4:  # the others go while the first is held
            server.came.clear()
            await server.came.wait()
        release.set()
        await asyncio.gather(first, *rest)
        assert await limiter.status(MAIN) == LimitStatus()
    assert counting.observed == []
    assert counting.asked == 0  # the idle limiter is not asked at all


async def test_a_cache_hit_is_not_learned_from() -> None:
    counting = Counting(limiter := LocalLimiter())
    async with (
        serving(split(10, 30)) as server,
        Client(
            base_url=server.base_url, limiter=limiter, cache=MemoryCache(ttl={"pool": 60.0})
        ) as client,
    ):
        await client.pool("p1")  # a miss: the answer is read
        for _ in range(3):
            assert (await client.with_response.pool("p1")).cache == "hit"
    assert len(server.arrived) == 1
    assert len(counting.observed) == 1


@pytest.mark.parametrize("learn", [True, False])
async def test_max_wait_raises_at_once_instead_of_waiting(learn: bool) -> None:
    limiter = LocalLimiter([Rate(1, 10.0)], max_wait=0.5, learn=learn)
    async with (
        serving(none) as server,
        Client(base_url=server.base_url, limiter=limiter) as client,
    ):
        await client.pool("p1")
        started = time.monotonic()
        with pytest.raises(RateLimitError, match=r"max_wait=0\.5s") as raised:
            await client.pool("p2")
        assert time.monotonic() - started < 0.5  # at once
        assert raised.value.attempts == 0  # nothing was sent
        assert raised.value.retry_after is not None
        assert 9.0 < raised.value.retry_after <= 10.1
        await limiter.hold(MAIN, 5.0)
        with pytest.raises(RateLimitError, match="429 hold") as held:
            await client.pool("p3")
        assert held.value.retry_after is not None
        assert 4.0 < held.value.retry_after <= 5.0
    assert len(server.arrived) == 1


async def test_max_wait_raises_for_a_learned_reset_too() -> None:
    limiter = LocalLimiter(max_wait=1.0)
    async with (
        serving(split(0, 30, 5)) as server,
        Client(base_url=server.base_url, limiter=limiter) as client,
    ):
        await client.pool("p1")  # nothing remains for 30 s
        with pytest.raises(RateLimitError) as raised:
            await client.pool("p2")
    assert raised.value.retry_after is not None
    assert raised.value.retry_after > 25.0
    assert len(server.arrived) == 1


@pytest.mark.parametrize(
    ("value", "error"),
    [(-1, ValueError), (float("nan"), ValueError), ("1", ValueError), (True, ValueError)],
)
def test_max_wait_is_checked(value: object, error: type[Exception]) -> None:
    with pytest.raises(error, match="max_wait"):
        LocalLimiter(max_wait=value)  # type: ignore[arg-type]


def test_learn_is_checked() -> None:
    with pytest.raises(TypeError, match="learn must be True or False"):
        LocalLimiter(learn=1)  # type: ignore[arg-type]


async def test_status_says_what_is_known_and_from_where() -> None:
    limiter = LocalLimiter([Rate(10, 60.0), Rate(3, 1.0)], margin=0.0)
    assert await limiter.status(MAIN) == LimitStatus()
    await limiter.acquire("pool", MAIN)
    rated = await limiter.status("MAINNET")
    assert (rated.limit, rated.remaining, rated.source) == (3, 2, "rates")  # the tightest
    limiter.observe(MAIN, Advertised(1, 20.0, 50), time.monotonic())
    learned = await limiter.status(MAIN)
    assert (learned.limit, learned.remaining, learned.source) == (50, 1, "headers")
    limiter.observe(MAIN, Advertised(40, 20.0, 50), time.monotonic())
    assert (await limiter.status(MAIN)).source == "rates"  # 2 left beat 40
    with pytest.raises(ValueError, match="unknown network"):
        await limiter.status("mainet")  # type: ignore[arg-type]


async def test_a_call_made_inside_the_first_request_does_not_wait_for_its_answer() -> None:
    """A trace hook's call runs in the task of the attempt it traces: waiting for that
    attempt's answer (nothing learned yet) would wait for itself until the lease runs out."""
    nested: list[str] = []
    config = nested_call(nested, lambda: client)
    async with (
        serving(split(30, 60, 30)) as server,
        Client(
            base_url=server.base_url, limiter=LocalLimiter([]), trace_configs=[config]
        ) as client,
    ):
        async with asyncio.timeout(5):  # the lease would be 10 s
            pool = await client.pool("p1")
    assert (pool.pool_id, nested) == ("p1", ["asking", "p2"])


async def test_a_first_request_that_times_out_lets_the_others_go_together() -> None:
    """Nothing learned, the first request meets a server that never answers: its timeout
    ends the others' wait for everyone (they are not sent one at a time, each after the
    previous one's timeout)."""
    async with (
        RawServer(default=hang()) as server,
        Client(
            base_url=server.base_url, limiter=LocalLimiter([]), timeout=0.3, max_retries=0
        ) as client,
    ):

        async def timed(pool_id: str) -> float:
            started = time.monotonic()
            with pytest.raises(RequestTimeoutError):
                await client.pool(pool_id)
            return time.monotonic() - started

        elapsed = await asyncio.gather(*(timed(f"p{n}") for n in range(6)))
    # the first at its timeout; the others one timeout later at most, not up to six
    assert max(elapsed) < 0.3 * 2 + 0.4, elapsed
