"""The fleet's script learns and schedules as LocalLimiter's Learned does: driven with the same
clock and the same answers, both let the same requests go at the same times."""

from __future__ import annotations

import math
import random
import time

import pytest

from asyncapi_client import Network
from asyncapi_client._learning import Advertised, Learned
from asyncapi_client.fleet import RedisLimiter

pytest_plugins = ("tests._redis",)

MAIN = Network.MAINNET
MICRO = 1_000_000
T0 = 1_700_000_000 * MICRO  # the script's clock, as Redis's TIME would give it (µs)


def _events(seed: int) -> list[tuple[int, tuple[int, int, int | None, int | None] | None]]:
    """A seeded sequence of steps: how long after the last one (ms), then an answer to hand
    over with the request (remaining, reset in whole seconds, limit, window), or none."""
    rnd = random.Random(seed)
    limit = rnd.randint(2, 12)
    out: list[tuple[int, tuple[int, int, int | None, int | None] | None]] = []
    remaining = limit
    for _ in range(50):
        gap = rnd.choice([0, 1, 20, 90, 300, 700, 1500])
        said = None
        if rnd.random() < 0.6:
            remaining = max(0, remaining - rnd.randint(0, 2))
            if rnd.random() < 0.15:
                remaining = limit  # a new window
            said = (
                remaining,
                rnd.randint(0, 3),
                rnd.choice([limit, limit, None]),
                rnd.choice([None, None, 2, 3]),
            )
        out.append((gap, said))
    return out


async def _both(
    limiter: RedisLimiter, events: list[tuple[int, tuple[int, int, int | None, int | None] | None]]
) -> None:
    learned = Learned()
    now = T0
    granted: list[int] = []  # the starts (µs) of the requests let go, oldest first
    ours: list[float] = []  # the same, as Learned made them (s)
    for gap, said in events:
        now += gap * 1000
        if said is not None and granted:
            remaining, reset, limit, window = said
            limits = Advertised(
                min(remaining, limit or remaining),
                float(reset),
                limit,
                None if window is None else float(window),
            )
            sent = granted[-1]  # the answer of the newest request, read now
            learned.observe(limits, ours[-1], now / MICRO, True)
            limiter.observe(MAIN, limits, float(sent), True)
            # read now on the script's clock: no age
            limiter._pending[MAIN][-1] = limiter._pending[MAIN][-1]._replace(
                read=time.monotonic() + 3600
            )
        start, allowed = learned.start(now / MICRO, now / MICRO)
        if allowed:
            learned.book(start)
            ours.append(start)
        reply = await limiter._ask(1, MAIN, now)
        if reply.reserved:
            granted.append(reply.start)
        assert reply.reserved == allowed, (now - T0, allowed, reply)
        if allowed:
            assert math.isclose((now + reply.ahead) / MICRO, start, abs_tol=5e-6), (
                now - T0,
                start * MICRO - T0,
                reply,
            )


@pytest.mark.parametrize("seed", range(40))
async def test_the_script_schedules_as_learned_does(redis_url: str, seed: int) -> None:
    async with RedisLimiter(redis_url, [], name=f"mirror{seed}") as limiter:
        await _both(limiter, _events(seed))
