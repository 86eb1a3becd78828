"""One RedisLimiter shared by clients on different event loops: two SyncClients (each runs
its own loop), a SyncClient and an async Client. Every call works as with a limiter of its
own, the rate holds where the requests land (the kernel's receive time at a loopback
server), and the connections each loop opened to Redis close when that loop ends.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Iterator

import pytest
import redis
import redis.asyncio as aredis

from asyncapi_client import Client, LimiterError, Rate, SyncClient
from asyncapi_client.fleet import RedisLimiter
from tests._arrivals import ArrivalServer
from tests._windows import most_in_any_window, timeline

pytest_plugins = ("tests._redis",)

#: Ten requests in any half second: short windows keep the runs short.
RATE = Rate(10, 0.5)
#: Calls each thread makes: with six threads, several windows' worth.
CALLS = 6
#: Every wait is bounded by this (seconds); none paces the test.
BOUND = 60.0


@pytest.fixture
def arrivals() -> Iterator[ArrivalServer]:
    with ArrivalServer() as server:
        yield server


def redis_connections(url: str) -> int:
    """Connections Redis has open, less the one asking."""
    with redis.Redis.from_url(url) as plain:
        return len(plain.client_list()) - 1


def in_threads(calls: list[Callable[[], object]]) -> list[BaseException]:
    """Run each of ``calls`` in a thread of its own, all at once; what they raised."""
    errors: list[BaseException] = []
    lock = threading.Lock()

    def run(call: Callable[[], object]) -> None:
        try:
            call()
        except BaseException as exc:
            with lock:
                errors.append(exc)

    threads = [threading.Thread(target=run, args=(call,)) for call in calls]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(BOUND)
    assert not any(thread.is_alive() for thread in threads), "a caller never finished"
    return errors


def caller(client: SyncClient) -> Callable[[], object]:
    return lambda: [client.tokens() for _ in range(CALLS)]


def check_landed(server: ArrivalServer, expected: int) -> None:
    arrivals = [a for a in server.arrivals if a.path == "/api/tokens"]
    assert all(arrival.kernel for arrival in arrivals), "not stamped by the kernel"
    landed = [arrival.time for arrival in arrivals]
    assert len(landed) == expected
    assert most_in_any_window(landed, RATE.seconds) <= RATE.count + 1, timeline(landed)


def test_two_sync_clients_share_one_redis_limiter(redis_url: str, arrivals: ArrivalServer) -> None:
    limiter = RedisLimiter(redis_url, [RATE], name="two-sync")
    options = {"base_url": arrivals.base_url, "limiter": limiter, "coalesce": False}
    with SyncClient(**options) as one, SyncClient(**options) as other:  # type: ignore[arg-type]
        errors = in_threads([caller(one), caller(one), caller(one)] + [caller(other)] * 3)
        assert errors == []
    check_landed(arrivals, 6 * CALLS)
    # each client's loop closed the connections the limiter opened on it
    assert redis_connections(redis_url) == 0


async def test_a_sync_client_and_an_async_client_share_one_redis_limiter(
    redis_url: str, arrivals: ArrivalServer
) -> None:
    async with (
        RedisLimiter(redis_url, [RATE], name="sync-and-async") as limiter,
        Client(base_url=arrivals.base_url, limiter=limiter, coalesce=False) as client,
    ):
        with SyncClient(base_url=arrivals.base_url, limiter=limiter, coalesce=False) as sync:

            async def calls() -> None:
                for _ in range(CALLS):
                    await client.tokens()

            blocking = asyncio.to_thread(in_threads, [caller(sync)] * 3)
            async with asyncio.timeout(BOUND):
                *_, errors = await asyncio.gather(calls(), calls(), calls(), blocking)
            assert errors == []
    check_landed(arrivals, 6 * CALLS)
    assert redis_connections(redis_url) == 0


async def test_a_callers_redis_client_serves_its_loop_and_one_like_it_the_others(
    redis_url: str, arrivals: ArrivalServer
) -> None:
    """Made on this loop with the caller's client: this loop talks through that client, the
    SyncClient's loop through one made like it (closed with that loop); the caller's stays
    open and usable."""
    async with aredis.Redis.from_url(redis_url, max_connections=3) as mine:
        limiter = RedisLimiter(mine, [RATE], name="borrowed")
        async with Client(base_url=arrivals.base_url, limiter=limiter, coalesce=False) as client:
            with SyncClient(base_url=arrivals.base_url, limiter=limiter, coalesce=False) as sync:
                blocking = asyncio.to_thread(in_threads, [caller(sync)] * 2)
                async with asyncio.timeout(BOUND):
                    errors = await blocking
                    for _ in range(CALLS):
                        await client.tokens()
                assert errors == []
            assert limiter._redis is mine
        await limiter.aclose()
        assert await mine.ping()  # never closed by the limiter
        assert redis_connections(redis_url) == 1  # mine; the one made like it is closed
    check_landed(arrivals, 3 * CALLS)


def test_a_limiter_used_by_a_sync_client_only_needs_no_closing(
    redis_url: str, arrivals: ArrivalServer
) -> None:
    """The usual script: the limiter made at the top, never closed; the SyncClient's close()
    ends its connections to Redis with its loop."""
    limiter = RedisLimiter(redis_url, [RATE], name="script")
    with SyncClient(base_url=arrivals.base_url, limiter=limiter) as client:
        client.tokens()
        assert redis_connections(redis_url) == 1
    assert redis_connections(redis_url) == 0
    # a new client on a new loop: the limiter serves it too
    with SyncClient(base_url=arrivals.base_url, limiter=limiter) as client:
        client.tokens()
    assert redis_connections(redis_url) == 0


def test_a_limiter_closed_refuses_every_loop(redis_url: str, arrivals: ArrivalServer) -> None:
    limiter = RedisLimiter(redis_url, [RATE], name="closed")
    with SyncClient(base_url=arrivals.base_url, limiter=limiter, max_retries=0) as client:
        client.tokens()
        asyncio.run(limiter.aclose())
        with pytest.raises(LimiterError, match="is closed"):
            client.tokens()
