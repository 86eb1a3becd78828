"""A fleet's quota when its Redis loses its data: SIGKILL, then an empty redis-server
restarted at once on the same port.

Three members (each its own RedisLimiter and Client, as three processes would have) keep
more callers going than the quota lets through, so every window is full and reservations
queue a window ahead when Redis dies. Counted where the requests land (the kernel's
receive time at a loopback server), no window holds more than the quota, before, across
and after the restart; and requests flow again afterwards.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from contextlib import AsyncExitStack
from typing import TYPE_CHECKING

import pytest

from asyncapi_client import ApiError, Client, Network, Rate
from asyncapi_client.fleet import RedisLimiter
from tests._arrivals import ArrivalServer
from tests._windows import most_in_any_window, timeline

if TYPE_CHECKING:
    from tests._redis import RedisServer

pytest_plugins = ("tests._redis",)

#: Ten requests in any second.
RATE = Rate(10, 1.0)
MEMBERS = 3
#: Callers per member: eighteen for ten slots a window, so reservations queue ahead.
CALLERS = 6
#: How long the fleet calls before Redis is killed, and after it is back (seconds): the
#: load's length, a few windows each; then, should fewer than a window's quota have landed
#: since the restart, the test waits for them (within BOUND).
BEFORE = 2.5
AFTER = 3.0
#: The whole run's bound (seconds).
BOUND = 60.0
MAIN = Network.MAINNET


@pytest.fixture
def arrivals() -> Iterator[ArrivalServer]:
    with ArrivalServer() as server:
        yield server


@pytest.mark.waits
async def test_a_restarted_empty_redis_still_holds_the_quota_where_requests_land(
    own_redis: RedisServer, arrivals: ArrivalServer
) -> None:
    failed: list[str] = []

    async def caller(client: Client) -> None:
        while True:
            try:
                await client.tokens()
            except ApiError as exc:  # Redis down: the limiter's error, once retries ran out
                failed.append(type(exc).__name__)

    async with AsyncExitStack() as stack:
        clients = []
        for _ in range(MEMBERS):
            limiter = RedisLimiter(own_redis.url, [RATE], name="lost")
            await stack.enter_async_context(limiter)
            client = Client(
                base_url=arrivals.base_url,
                limiter=limiter,
                coalesce=False,  # each caller's request is its own
                timeout=5.0,
                max_retries=20,
            )
            clients.append(await stack.enter_async_context(client))
        callers = [asyncio.create_task(caller(c)) for c in clients for _ in range(CALLERS)]
        try:
            async with asyncio.timeout(BOUND):
                await asyncio.sleep(BEFORE)  # the load runs (a length, not a wait for anything)

                def lose_everything() -> None:
                    own_redis.kill()  # SIGKILL: every key is gone
                    own_redis.restart()  # empty, on the same port, at once

                await asyncio.to_thread(lose_everything)  # the callers go on meanwhile
                restarted = len(arrivals.arrivals)
                await asyncio.sleep(AFTER)
                # on a loaded machine the fleet may take longer to come back: wait for it
                await asyncio.to_thread(arrivals.wait_for, restarted + RATE.count, BOUND)
        finally:
            for task in callers:
                task.cancel()
            await asyncio.gather(*callers, return_exceptions=True)
    every = [a for a in arrivals.arrivals if a.path == "/api/tokens"]
    assert all(arrival.kernel for arrival in every), "not stamped by the kernel"
    landed = [arrival.time for arrival in every]
    story = timeline(landed)
    assert most_in_any_window(landed, RATE.seconds) <= RATE.count + 1, story
    assert len(every) - restarted >= RATE.count, f"requests did not flow again: {story}"
    assert len(failed) <= len(callers), failed  # at most one failed call each, in the outage


async def test_a_reservation_redis_lost_is_asked_for_again_after_a_window(
    own_redis: RedisServer,
) -> None:
    """The steps of the run above, one by one: a slot reserved for the next window is lost
    with Redis's data; the task that waited for it is told before it sends (held() says
    "not yet"), asks again, and gets a slot one window after Redis came back; so does every
    member, even one that never used that Redis before."""
    rate = Rate(1, 1.0)
    async with (
        RedisLimiter(own_redis.url, [rate], name="lost-slot") as limiter,
        RedisLimiter(own_redis.url, [rate], name="lost-slot") as newcomer,
    ):
        assert (await limiter.acquire("pool", MAIN)).wait == 0.0
        queued = await limiter.acquire("pool", MAIN)  # the next window's slot
        assert queued.reserved
        assert queued.wait > rate.seconds / 2
        own_redis.kill()
        own_redis.restart()
        for member in (limiter, newcomer):  # (a caller would meet one LimiterError for each)
            await member._redis.connection_pool.disconnect()
        assert await limiter.held(MAIN) > 0  # asked just before sending: not that slot
        again = await limiter.acquire("pool", MAIN)
        assert again.reserved
        assert again.wait == pytest.approx(rate.seconds + limiter.margin, abs=0.001)
        assert (await newcomer.acquire("pool", MAIN)).wait > rate.seconds
        # a slot reserved in Redis's new memory is used as usual
        assert await limiter.held(MAIN) == 0.0
