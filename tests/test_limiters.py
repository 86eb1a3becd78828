"""The reservation rule every limiter shares, and LocalLimiter on it."""

from __future__ import annotations

import itertools
import math
import random
from collections.abc import Sequence

import pytest

from asyncapi_client import Admission, Limiter, LocalLimiter, Network, Rate
from asyncapi_client._limiters import MAX_HOLD, check_weights, earliest_start

NO_HOLD = -math.inf


def starts_after(rates: Sequence[Rate], requests: Sequence[tuple[float, int]]) -> list[float]:
    """Reserve ``(arrival time, weight)`` requests in order; the start each one gets."""
    windows: list[list[float]] = [[] for _ in rates]
    last = NO_HOLD
    out = []
    for now, weight in requests:
        start = earliest_start(now, NO_HOLD, last, rates, windows, weight)
        last = start
        for times in windows:
            times.extend([start] * weight)
        out.append(start)
    return out


def max_in_window(starts: Sequence[float], seconds: float) -> int:
    """Most starts in any half-open window ``(t - seconds, t]``."""
    eps = 1e-9  # float sums: t - seconds may land a hair below a start it equals
    return max(sum(1 for s in starts if t - seconds + eps < s <= t) for t in starts)


@pytest.mark.parametrize(
    ("rates", "requests", "expected"),
    [
        # no rate: everyone goes at once
        ([], [(0.0, 1)] * 3, [0.0, 0.0, 0.0]),
        # 2 per second: a burst of two, then the third waits until the first leaves the window
        ([Rate(2, 1.0)], [(0.0, 1)] * 3, [0.0, 0.0, 1.0]),
        # a late arrival goes at once when the window has room
        ([Rate(2, 1.0)], [(0.0, 1), (5.0, 1)], [0.0, 5.0]),
        # weight 2 of a 2-per-second rate needs an empty window
        ([Rate(2, 1.0)], [(0.0, 1), (0.0, 2)], [0.0, 1.0]),
        # two rates: 3/s and 4 per 10 s; the fifth waits for the 10 s window
        ([Rate(3, 1.0), Rate(4, 10.0)], [(0.0, 1)] * 5, [0.0, 0.0, 0.0, 1.0, 10.0]),
        # first come, first served: a light request does not jump ahead of a heavy one
        ([Rate(3, 1.0)], [(0.0, 2), (0.0, 3), (0.0, 1)], [0.0, 1.0, 2.0]),
    ],
)
def test_earliest_start_table(
    rates: list[Rate], requests: list[tuple[float, int]], expected: list[float]
) -> None:
    assert starts_after(rates, requests) == expected


def test_a_hold_pushes_the_start_and_the_slots_after_it() -> None:
    rates = [Rate(2, 1.0)]
    assert earliest_start(0.0, 3.0, NO_HOLD, rates, [[]], 1) == 3.0
    # slots are reserved after the hold, so the held requests do not fire in a burst
    assert earliest_start(0.0, 3.0, 3.0, rates, [[3.0, 3.0]], 1) == 4.0


@pytest.mark.parametrize("seed", range(20))
def test_no_window_ever_holds_more_than_count(seed: int) -> None:
    rnd = random.Random(seed)
    rates = [Rate(rnd.randint(1, 6), rnd.choice([0.5, 1.0, 3.0])) for _ in range(rnd.randint(1, 3))]
    smallest = min(rate.count for rate in rates)
    now = 0.0
    requests = []
    for _ in range(60):
        now += rnd.choice([0.0, 0.0, 0.05, 0.3, 1.0])
        requests.append((now, rnd.randint(1, smallest)))
    starts = starts_after(rates, requests)
    slots = list(
        itertools.chain.from_iterable([s] * w for s, (_, w) in zip(starts, requests, strict=True))
    )
    assert starts == sorted(starts)
    assert all(s >= arrived for s, (arrived, _) in zip(starts, requests, strict=True))
    for rate in rates:
        assert max_in_window(slots, rate.seconds) <= rate.count


@pytest.mark.parametrize(
    ("count", "seconds"),
    [(0, 1.0), (-1, 1.0), (1.5, 1.0), (True, 1.0), (1, 0), (1, -1.0), (1, math.inf), (1, math.nan)],
)
def test_rate_refuses_nonsense(count: object, seconds: object) -> None:
    with pytest.raises(ValueError, match="Rate"):
        Rate(count, seconds)  # type: ignore[arg-type]


def test_weights_are_checked() -> None:
    rates = [Rate(3, 1.0)]
    assert check_weights({"orders": 2}, rates) == {"orders": 2}
    with pytest.raises(ValueError, match="unknown operation 'order'"):
        check_weights({"order": 2}, rates)
    with pytest.raises(ValueError, match="positive int"):
        check_weights({"orders": 0}, rates)
    with pytest.raises(ValueError, match="never start"):
        check_weights({"orders": 4}, rates)
    with pytest.raises(ValueError, match="Rate"):
        LocalLimiter([(3, 1.0)])  # type: ignore[list-item]


async def test_local_limiter_reserves_per_network() -> None:
    limiter = LocalLimiter([Rate(2, 60.0)], weights={"orders": 2})
    assert isinstance(limiter, Limiter)
    assert not limiter.idle
    first = await limiter.acquire("pool", Network.MAINNET)
    second = await limiter.acquire("pool", Network.MAINNET)
    assert first.wait == 0.0
    assert second.wait == 0.0
    third = await limiter.acquire("pool", Network.MAINNET)
    assert 59.0 < third.wait <= 60.0  # the window is full for a minute
    # the test network is another host with its own quota
    assert (await limiter.acquire("orders", Network.TESTNET)).wait == 0.0
    assert (await limiter.acquire("pool", Network.TESTNET)).wait > 59.0


async def test_local_limiter_hold() -> None:
    limiter = LocalLimiter()
    idle_before = limiter.idle
    assert await limiter.acquire("pool", Network.MAINNET) == Admission(wait=0.0)
    await limiter.hold(Network.MAINNET, 30.0)
    await limiter.hold(Network.MAINNET, 1.0)  # never shortens a hold
    assert idle_before
    assert not limiter.idle
    assert 29.0 < await limiter.held(Network.MAINNET) <= 30.0
    assert await limiter.held(Network.TESTNET) == 0.0
    admission = await limiter.acquire("pool", Network.MAINNET)
    assert 29.0 < admission.held <= admission.wait <= 30.0
    await limiter.hold(Network.TESTNET, 0.0)  # a hold that has run out
    assert await limiter.held(Network.TESTNET) == 0.0


@pytest.mark.parametrize("seconds", [1e13, 1e16, 1e300, math.inf])
async def test_local_limiter_holds_at_most_a_day(seconds: float) -> None:
    """A ``Retry-After`` of years (or one the limiter is handed directly) holds a day."""
    limiter = LocalLimiter()
    await limiter.hold(Network.MAINNET, seconds)
    assert MAX_HOLD == 86_400.0
    assert MAX_HOLD - 60.0 < await limiter.held(Network.MAINNET) <= MAX_HOLD
    assert (await limiter.acquire("pool", Network.MAINNET)).wait <= MAX_HOLD
