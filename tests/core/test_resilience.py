"""Waits and limits: Retry-After, the shared back-off, rate limit, connections, deadlines,
the testing switch, coalescing, and whole walks through a seeded storm of faults."""

from __future__ import annotations

import asyncio
import bisect
import email.utils
import logging
import math
import time
from collections.abc import AsyncIterator, Iterator

import aiohttp
import attrs
import pytest

from asyncapi_client import Client, RateLimitError, RequestTimeoutError, ServerError
from asyncapi_client.testing import FakeExchange, Fault
from tests._checks import settled, stray_tasks
from tests._oracle import pool_json
from tests._pages import ADDRESS, entry, make_orders, serve_pools, serving
from tests._rawserver import RawServer, hang, respond

#: The seeded storm: connections closed, 503s and bodies cut short on about 27 % of the
#: requests, never more than three in a row on one URL (a client with three retries gets
#: through).
STORM = Fault(drop_rate=0.1, error_rate=0.1, error_status=503, truncate_rate=0.1, max_in_a_row=3)


@pytest.fixture(autouse=True)
async def _no_stray_tasks() -> AsyncIterator[None]:
    """Every test must leave no task of ours behind."""
    yield
    assert await settled(lambda: not stray_tasks()), stray_tasks()


class _RetryLogged(logging.Handler):
    """Sets an event when the client logs a retry: by then the back-off is decided."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.event = asyncio.Event()

    def emit(self, record: logging.LogRecord) -> None:
        if record.getMessage().startswith("retrying"):
            self.event.set()


@pytest.fixture
def retry_logged() -> Iterator[_RetryLogged]:
    logger = logging.getLogger("asyncapi_client")
    handler, level = _RetryLogged(), logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    yield handler
    logger.removeHandler(handler)
    logger.setLevel(level)


def max_in_window(times: list[float], window: float = 1.0) -> int:
    """The most timestamps that fall in any half-open window of ``window`` seconds."""
    ordered = sorted(times)
    return max(
        (bisect.bisect_left(ordered, t + window) - i for i, t in enumerate(ordered)), default=0
    )


def start_recorder() -> tuple[aiohttp.TraceConfig, list[float]]:
    """A trace config that records when the client really starts each request."""
    starts: list[float] = []
    trace = aiohttp.TraceConfig()

    async def on_request_start(*_: object) -> None:
        starts.append(asyncio.get_running_loop().time())

    trace.on_request_start.append(on_request_start)
    return trace, starts


#: Rate(count, 1.0) lets a burst of ``count`` start at once, then the next burst a second
#: after; a busy loop starts a burst's requests a little late, so windows are measured a
#: little shorter than a second: at most ``count`` starts in any of them. Measured where the
#: limiter acts, at the client: the server (in a thread) sees a burst arrive spread out.
WINDOW = 0.8


# --- Retry-After -------------------------------------------------------------------------------


@pytest.mark.parametrize("status", [429, 503])
async def test_retry_after_seconds_is_waited_for(status: int) -> None:
    async with (
        RawServer([respond(status, headers={"Retry-After": "1"})]) as server,
        Client(base_url=server.base_url) as client,
    ):
        await client.pool("p1")
    gap = server.times[1] - server.times[0]
    assert 0.95 <= gap < 2.5, gap


@pytest.mark.waits
async def test_retry_after_http_date_is_waited_for() -> None:
    until = math.ceil(time.time()) + 2  # an HTTP date has whole seconds
    header = email.utils.formatdate(until, usegmt=True)
    async with (
        RawServer([respond(429, headers={"Retry-After": header})]) as server,
        Client(base_url=server.base_url) as client,
    ):
        await client.pool("p1")
    first, second = server.conns
    assert second.wall >= until - 0.05, (second.wall, until)
    assert second.wall - first.wall < 3.5


async def test_429_without_retry_after_still_backs_off() -> None:
    async with (
        RawServer([respond(429)]) as server,
        Client(base_url=server.base_url) as client,
    ):
        await client.pool("p1")
    gap = server.times[1] - server.times[0]
    assert 0.25 <= gap < 1.5, gap  # at least half of the first back-off step (0.5 s)


# --- the shared back-off -----------------------------------------------------------------------


async def test_a_429_holds_back_every_request_to_that_host_but_not_the_other(
    retry_logged: _RetryLogged,
) -> None:
    async with (
        RawServer([respond(429, headers={"Retry-After": "1"})]) as main,
        RawServer() as test,
        Client(base_url=main.base_url, testnet_base_url=test.base_url) as client,
    ):
        first = asyncio.create_task(client.pool("first"))
        await asyncio.wait_for(retry_logged.event.wait(), 5)  # it got its 429
        held_at = time.monotonic()
        pools = await asyncio.gather(
            *(client.pool(f"main{i}") for i in range(5)),
            *(client.pool(f"test{i}", network="testnet") for i in range(5)),
            first,
        )
    assert len(pools) == 11
    window_ends = main.times[0] + 1.0
    assert main.count == 7  # the 429, then the first again and the five held back
    assert all(t >= window_ends - 0.05 for t in main.times[1:]), (main.times, window_ends)
    assert test.count == 5
    assert all(t - held_at < 0.5 for t in test.times), (test.times, held_at)


async def test_a_held_back_request_that_would_outlive_its_deadline_fails_at_once() -> None:
    async with (
        RawServer([respond(429, headers={"Retry-After": "5"})]) as server,
        Client(base_url=server.base_url, max_retries=0) as client,
    ):
        with pytest.raises(RateLimitError):
            await client.pool("first")  # no retry left, but the host is held back 5 s
        started = time.perf_counter()
        with pytest.raises(RequestTimeoutError, match="429 hold"):
            await client.pool("second", deadline=1.0)
        elapsed = time.perf_counter() - started
    assert elapsed < 0.5
    assert server.count == 1


async def test_a_retry_after_longer_than_the_cap_holds_the_host_for_the_cap_only() -> None:
    async with (
        RawServer([respond(429, headers={"Retry-After": "120"})]) as server,
        Client(base_url=server.base_url, retry_after_cap=1.0) as client,
    ):
        with pytest.raises(RateLimitError, match="cap") as caught:
            await client.pool("first")
        assert server.count == 1  # raised at once
        await client.pool("second")  # held back for the cap, not for 120 s
    assert caught.value.retry_after == 120
    assert 1.0 - 0.05 <= server.times[1] - server.times[0] < 5.0, server.times


# --- rate limit and connections ----------------------------------------------------------------


@pytest.mark.waits
async def test_rate_limit_holds_under_a_fan_out_of_hundreds() -> None:
    rate, calls = 80, 240
    trace, starts = start_recorder()
    async with (
        serving(pool=serve_pools()) as server,
        Client(base_url=server.base_url, rate_limit=rate, trace_configs=[trace]) as client,
    ):
        started = time.perf_counter()
        pools = await asyncio.gather(*(client.pool(f"p{i}") for i in range(calls)))
        elapsed = time.perf_counter() - started
    assert [pool.pool_id for pool in pools] == [f"p{i}" for i in range(calls)]
    assert len(starts) == calls
    assert max_in_window(starts, WINDOW) <= rate, max_in_window(starts, WINDOW)
    assert len(server.requests) == calls
    assert elapsed >= calls / rate - 1 - 0.05, elapsed  # three bursts, a second apart


async def test_rate_limit_counts_every_attempt_including_retries() -> None:
    # 503 on 30 % of requests; retries go through the same limiter.
    pools = FakeExchange(pools={f"p{i}": pool_json(f"p{i}") for i in range(60)})
    trace, starts = start_recorder()
    async with (
        serving(pools, seed=3) as server,
        Client(base_url=server.base_url, rate_limit=50, trace_configs=[trace]) as client,
    ):
        server.set_fault("pool", Fault(error_rate=0.3, error_status=503, max_in_a_row=3))
        client.set_testing(True)
        await asyncio.gather(*(client.pool(f"p{i}") for i in range(60)))
    assert any(request.fault for request in server.requests)  # some requests were retried
    assert len(server.requests) > 60
    assert len(starts) == len(server.requests)  # every attempt went through the limiter
    assert max_in_window(starts, WINDOW) <= 50


async def test_requests_held_back_by_a_429_do_not_burst_past_the_rate_when_it_ends() -> None:
    """Slots are reserved after the hold: they must not pile up and fire all at once."""
    held = asyncio.Event()
    trace, starts = start_recorder()
    async with (
        RawServer([respond(429, headers={"Retry-After": "1"})]) as server,
        Client(
            base_url=server.base_url,
            rate_limit=5,
            trace_configs=[trace],
            on_retry=lambda event: held.set(),
        ) as client,
    ):
        first = asyncio.ensure_future(client.pool("p0"))
        await held.wait()  # the 429 is in: its hold is on the network
        rest = [asyncio.ensure_future(client.pool(f"p{i}")) for i in range(1, 6)]
        await asyncio.gather(first, *rest)
    assert server.count == 7
    ends = server.times[0] + 1.0  # nothing inside the hold ...
    assert all(t >= ends - 0.05 for t in server.times[1:]), server.times
    assert max_in_window(starts, WINDOW) <= 5, starts  # ... and no burst past the rate after


async def test_waiting_for_a_connection_is_not_part_of_the_attempt_timeout() -> None:
    async with (
        serving(pool=serve_pools(delay=0.3)) as server,
        Client(base_url=server.base_url, max_connections=2, timeout=0.5, max_retries=0) as client,
    ):
        started = time.perf_counter()
        pools = await asyncio.gather(*(client.pool(f"p{i}") for i in range(8)))
        elapsed = time.perf_counter() - started
    assert [p.pool_id for p in pools] == [f"p{i}" for i in range(8)]
    assert len(server.requests) == 8
    assert elapsed >= 4 * 0.3 - 0.05  # four rounds of two connections: they really queued


async def test_max_connections_bounds_requests_in_flight() -> None:
    async with (
        serving(pool=serve_pools()) as server,
        Client(base_url=server.base_url, max_connections=5) as client,
        server.gate("pool") as gate,
    ):
        fetching = asyncio.gather(*(client.pool(f"p{i}") for i in range(200)))
        await gate.arrived(5)
        await settled(lambda: False, turns=50)  # time for a sixth, if one could come
        assert (gate.arrivals, server.in_flight) == (5, 5)  # the other 195 really queued
        gate.release()
        await fetching
    assert len(server.requests) == 200
    assert server.max_in_flight == 5


# --- deadline ----------------------------------------------------------------------------------


async def test_deadline_bounds_an_operation_with_retries_pending() -> None:
    async with (
        RawServer(default=respond(503)) as server,
        Client(base_url=server.base_url, deadline=1.0, max_retries=10) as client,
    ):
        started = time.perf_counter()
        with pytest.raises(RequestTimeoutError, match="deadline") as caught:
            await client.pool("p1")
        elapsed = time.perf_counter() - started
    assert elapsed < 1.0 + 0.3, elapsed
    assert 1 <= server.count < 11
    # Every request the server read was counted; the deadline may cut one more attempt
    # after it had its connection slot (it counts) and before the server read it.
    assert server.count <= caught.value.attempts <= server.count + 1
    assert isinstance(caught.value.__cause__, ServerError)  # the last attempt's error


async def test_deadline_bounds_an_attempt_longer_than_it() -> None:
    # timeout bounds one attempt (10 s here), deadline the whole operation (0.5 s).
    async with (
        RawServer(default=hang()) as server,
        Client(base_url=server.base_url, timeout=10.0, deadline=0.5) as client,
    ):
        started = time.perf_counter()
        with pytest.raises(RequestTimeoutError, match=r"deadline of 0\.5s"):
            await client.pool("p1")
        elapsed = time.perf_counter() - started
    assert 0.45 <= elapsed < 0.5 + 0.3, elapsed


async def test_per_call_deadline_overrides_the_clients() -> None:
    async with (
        RawServer(default=hang()) as server,
        Client(base_url=server.base_url, deadline=30.0) as client,
    ):
        started = time.perf_counter()
        with pytest.raises(RequestTimeoutError):
            await client.pool("p1", deadline=0.3)
        assert time.perf_counter() - started < 0.3 + 0.3
    async with (
        RawServer(default=respond(200, pool_json(), delay=0.4)) as server,
        Client(base_url=server.base_url, deadline=0.1) as client,
    ):
        with pytest.raises(RequestTimeoutError):
            await client.pool("p1")
        pool = await client.pool("p1", deadline=None)  # None: no deadline for this call
    assert pool.pool_id == "p1"


async def test_deadline_covers_the_rate_limit_wait() -> None:
    async with (
        serving(pool=serve_pools()) as server,
        Client(base_url=server.base_url, rate_limit=1) as client,
    ):
        await client.pool("first")
        started = time.perf_counter()
        with pytest.raises(RequestTimeoutError):
            await client.pool("second", deadline=0.3)  # its slot is ~1 s away
        elapsed = time.perf_counter() - started
    assert elapsed < 0.3 + 0.3, elapsed
    assert len(server.requests) == 1


# --- testing switch ----------------------------------------------------------------------------


async def test_testing_switch_skips_waits_on_that_client_only() -> None:
    async with (
        RawServer([respond(429, headers={"Retry-After": "30"})]) as fast_server,
        RawServer([respond(429, headers={"Retry-After": "1"})]) as slow_server,
        Client(base_url=fast_server.base_url) as fast,
        Client(base_url=slow_server.base_url) as slow,
    ):
        fast.set_testing(True)
        started = time.perf_counter()
        fast_done = asyncio.create_task(fast.pool("p1"))
        slow_done = asyncio.create_task(slow.pool("p1"))
        await fast_done
        fast_elapsed = time.perf_counter() - started
        await slow_done
        slow_elapsed = time.perf_counter() - started
    assert fast_elapsed < 1.0, fast_elapsed  # a Retry-After of 30 s, not waited for
    assert slow_elapsed >= 0.95, slow_elapsed  # the other client still waits
    assert fast_server.count == 2
    assert slow_server.count == 2


async def test_testing_switch_can_lower_the_attempts() -> None:
    async with (
        RawServer(default=respond(503)) as server,
        Client(base_url=server.base_url) as client,
    ):
        client.set_testing(True, max_retries=1)
        with pytest.raises(Exception, match="HTTP 503"):
            await client.pool("p1")
    assert server.count == 2


# --- coalescing --------------------------------------------------------------------------------


async def test_identical_concurrent_gets_share_one_request() -> None:
    async with (
        serving(pool=serve_pools()) as server,
        Client(base_url=server.base_url) as client,
        server.gate("pool") as gate,
    ):
        fetching = asyncio.gather(*(client.pool("same") for _ in range(20)))
        await gate.arrived(1)
        await settled(lambda: False, turns=50)  # all twenty are waiting
        gate.release()
        pools = await fetching
    assert {pool.pool_id for pool in pools} == {"same"}
    assert len(server.requests) == 1


async def test_without_coalescing_identical_gets_are_separate_requests() -> None:
    async with (
        serving(pool=serve_pools()) as server,
        Client(base_url=server.base_url, coalesce=False) as client,
        server.gate("pool") as gate,
    ):
        fetching = asyncio.gather(*(client.pool("same") for _ in range(5)))
        await gate.arrived(5)
        gate.release()
        await fetching
    assert len(server.requests) == 5
    assert server.max_in_flight == 5


async def test_a_cancelled_coalescing_leader_hands_over_to_a_follower() -> None:
    async with (
        serving(pool=serve_pools()) as server,
        Client(base_url=server.base_url) as client,
        server.gate("pool") as gate,
    ):
        leader = asyncio.create_task(client.pool("same"))
        await gate.arrived(1)
        followers = [asyncio.create_task(client.pool("same")) for _ in range(3)]
        await settled(lambda: False, turns=20)  # the followers have joined the leader
        leader.cancel()
        await gate.arrived(2)  # one follower asks again, for all of them
        gate.release()
        pools = await asyncio.gather(*followers)
        with pytest.raises(asyncio.CancelledError):
            await leader
    assert {pool.pool_id for pool in pools} == {"same"}
    assert len(server.requests) == 2  # the cancelled request, and one more for all followers


# --- whole walks through a seeded storm of faults ------------------------------------------------


@pytest.mark.parametrize("seed", [1, 2, 3])
async def test_cursor_walk_through_random_faults_yields_every_order_once(seed: int) -> None:
    orders = make_orders(300)
    async with (
        serving(FakeExchange(orders={ADDRESS: orders}), seed=seed) as server,
        Client(base_url=server.base_url) as client,
    ):
        server.set_fault("orders", STORM)
        client.set_testing(True)
        got = [order.transaction_id async for order in client.iter_orders(ADDRESS, page_size=7)]
    assert got == [row["transactionId"] for row in orders]
    assert sum(bool(request.fault) for request in server.requests) >= 5  # the storm happened


@pytest.mark.parametrize("seed", [1, 2, 3])
async def test_leaderboard_walk_through_random_faults_yields_every_rank_once(seed: int) -> None:
    board = [entry(rank) for rank in range(1, 501)]
    async with (
        serving(FakeExchange(leaderboard=board), seed=seed) as server,
        Client(base_url=server.base_url) as client,
    ):
        server.set_fault("leaderboard", attrs.evolve(STORM, latency=0.002))
        client.set_testing(True)
        ranks = [e.rank async for e in client.iter_leaderboard(page_size=10, concurrency=4)]
    assert ranks == list(range(1, 501))
    assert sum(bool(request.fault) for request in server.requests) >= 10
    assert server.max_in_flight <= 4
