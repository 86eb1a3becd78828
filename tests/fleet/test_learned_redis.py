"""RedisLimiter learning for a fleet: what one member read reaches the others in the same
script call as its next reservation (no call of its own), rates=[] and learn=False,
max_wait, status()."""

from __future__ import annotations

import time

import pytest
import redis.asyncio as aredis

from asyncapi_client import Client, LimitStatus, Network, Rate, RateLimitError
from asyncapi_client._learning import Advertised
from asyncapi_client.fleet import RedisLimiter
from asyncapi_client.testing import FakeExchange, FakeServer, Quota
from tests._rediscache import script_calls

pytest_plugins = ("tests._redis",)

MAIN = Network.MAINNET
EXCHANGE = FakeExchange.generate(seed=43, users=1, orders_per_user=1)


async def test_what_one_member_read_paces_the_others(redis_url: str) -> None:
    async with (
        RedisLimiter(redis_url, [], name="share") as one,
        RedisLimiter(redis_url, [], name="share") as other,
        RedisLimiter(redis_url, [], name="share") as third,
    ):
        first = await one.acquire("pool", MAIN)  # nothing known: this one learns
        assert first.reserved
        assert first.ticket is not None
        waiting = await other.acquire("pool", MAIN)
        assert waiting.learning  # the other waits for that answer
        one.observe(MAIN, Advertised(0, 30.0, 10), first.ticket)
        await one.acquire("pool", MAIN)  # hands it over, in its reservation's call
        status = await other.status(MAIN)
        assert (status.limit, status.remaining, status.source) == (10, 0, "headers")
        held = await third.acquire("pool", MAIN)
        assert held.wait > 25.0  # nothing remains until the reset


async def test_learning_adds_no_call_to_redis(redis_url: str, redis_client: aredis.Redis) -> None:
    async def calls_for(limiter: RedisLimiter, learn: bool) -> int:
        # once first: Redis has the script then (a NOSCRIPT retry is not what is counted)
        await limiter.acquire("pool", Network.TESTNET)
        before = await script_calls(redis_client)
        for n in range(20):
            admission = await limiter.acquire("pool", MAIN)
            if learn and admission.ticket is not None:
                limiter.observe(MAIN, Advertised(1000 - n, 60.0, 1000), admission.ticket)
        return await script_calls(redis_client) - before

    async with (
        RedisLimiter(redis_url, [Rate(1000, 1.0)], name="calls-on", margin=0) as learning,
        RedisLimiter(
            redis_url, [Rate(1000, 1.0)], name="calls-off", margin=0, learn=False
        ) as plain,
    ):
        assert await calls_for(learning, True) == await calls_for(plain, False) == 20


async def test_rates_may_be_empty_and_learn_false_reads_nothing(redis_url: str) -> None:
    async with RedisLimiter(redis_url, [], name="plain", learn=False) as limiter:
        assert "learn=False" in repr(limiter)
        for _ in range(3):  # no rate, nothing learned: every request goes at once
            admission = await limiter.acquire("pool", MAIN)
            assert (admission.wait, admission.reserved, admission.ticket) == (0.0, True, None)
        limiter.observe(MAIN, Advertised(0, 30.0, 10), time.time() * 1e6)
        assert (await limiter.acquire("pool", MAIN)).wait == 0.0
        assert await limiter.status(MAIN) == LimitStatus()


async def test_max_wait_raises_at_once_in_a_fleet_too(redis_url: str) -> None:
    limiter = RedisLimiter(redis_url, [Rate(1, 10.0)], name="impatient", max_wait=0.5)
    assert "max_wait=0.5" in repr(limiter)
    async with (
        limiter,
        FakeServer(EXCHANGE, quota=Quota(100, 60.0)) as server,
        Client(base_url=server.base_url, limiter=limiter) as client,
    ):
        await client.tokens(search="a")
        started = time.monotonic()
        with pytest.raises(RateLimitError, match="max_wait") as raised:
            await client.tokens(search="b")
        assert time.monotonic() - started < 0.5
        assert raised.value.attempts == 0
        assert raised.value.retry_after is not None
        assert 9.0 < raised.value.retry_after <= 10.1
        status = await limiter.status("mainnet")
    assert (status.limit, status.remaining, status.source) == (1, 0, "rates")  # not booked
    assert len(server.requests) == 1


async def test_a_fleet_learns_each_header_family_from_a_server(redis_url: str) -> None:
    for family in ("ietf", "split", "x"):
        async with (
            RedisLimiter(redis_url, [], name=f"family-{family}") as limiter,
            FakeServer(EXCHANGE, quota=Quota(20, 60.0), rate_limit_headers=family) as server,
            Client(base_url=server.base_url, limiter=limiter) as client,
        ):
            for n in range(3):
                await client.tokens(search=f"t{n}")
            await client.tokens(search="t3")  # its reservation hands the third answer over
            status = await limiter.status(MAIN)
        assert (status.limit, status.source) == (20, "headers"), family
        assert status.remaining is not None
        assert 15 <= status.remaining <= 17, family


async def test_a_429_hold_ends_the_learned_window_with_it(redis_url: str) -> None:
    """The server said when to come back: after a 1 s hold the fleet asks again then (its
    first request learns anew), not at the learned window's reset 30 s away."""
    async with RedisLimiter(redis_url, [], name="told") as one:
        first = await one.acquire("pool", MAIN)
        assert first.ticket is not None
        one.observe(MAIN, Advertised(5, 30.0, 10), first.ticket)
        await one.acquire("pool", MAIN)  # hands the answer over
        await one.hold(MAIN, 1.0, retry_after="1")  # a 429 let through: Retry-After: 1
        await one.clear_hold()  # the hold itself aside: what was learned of the window
        after = await one.acquire("pool", MAIN)
        assert after.reserved
        assert after.wait <= 1.1  # the window ended with the hold, not at the 30 s reset
        status = await one.status(MAIN)
        assert status.limit is None  # learned again by the next answer
