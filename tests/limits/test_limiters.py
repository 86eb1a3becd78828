"""The reservation rule every limiter shares (margin and pacing too), and LocalLimiter on it."""

from __future__ import annotations

import itertools
import math
import random
import time

import pytest

from asyncapi_client import Admission, Limiter, LocalLimiter, Network, Rate
from asyncapi_client._limiters import (
    DEFAULT_MARGIN,
    MAX_HOLD,
    check_weights,
    shown_retry_after,
    unlimited_until_told,
)
from tests._windows import max_in_window, most_in_any_window, starts_after, throughput_floor


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


@pytest.mark.parametrize(
    ("rates", "margin", "requests", "expected"),
    [
        # a slot frees seconds + margin after it was granted; a burst of two is paced
        # margin / count apart
        ([Rate(2, 1.0)], 0.1, [(0.0, 1)] * 3, [0.0, 0.05, 1.1]),
        # an idle limiter lets a request go at once, margin or not
        ([Rate(2, 1.0)], 0.1, [(0.0, 1), (5.0, 1)], [0.0, 5.0]),
        # weight 2 takes two paces; the next waits for both slots to leave the wider window
        ([Rate(2, 1.0)], 0.1, [(0.0, 2), (0.0, 1)], [0.0, 1.1]),
        # the smallest count sets the pace; each rate's window is widened by the margin
        ([Rate(4, 1.0), Rate(5, 10.0)], 0.2, [(0.0, 1)] * 6, [0.0, 0.05, 0.1, 0.15, 1.2, 10.2]),
    ],
)
def test_earliest_start_table_with_a_margin(
    rates: list[Rate], margin: float, requests: list[tuple[float, int]], expected: list[float]
) -> None:
    assert starts_after(rates, requests, margin) == pytest.approx(expected)


@pytest.mark.parametrize("seed", range(20))
@pytest.mark.parametrize("margin", [0.05, 0.2])
def test_count_apart_slots_land_more_than_seconds_apart_under_jitter_below_the_margin(
    seed: int, margin: float
) -> None:
    """The server's view in arithmetic: each slot lands up to ``margin`` late (any jitter
    below it); no closed window of ``seconds`` at the server holds more than ``count``."""
    rnd = random.Random(seed)
    rate = Rate(rnd.randint(1, 8), rnd.choice([0.1, 0.5, 1.0]))
    now, requests = 0.0, []
    for _ in range(120):
        now += rnd.choice([0.0, 0.0, 0.0, 0.01, 0.2])
        requests.append((now, 1))
    starts = starts_after([rate], requests, margin)
    for _ in range(10):
        landed = [s + rnd.uniform(0.0, margin * 0.999) for s in starts]
        assert most_in_any_window(landed, rate.seconds) <= rate.count
    # and the same jitter breaks the old rule (margin 0): this is what the margin buys
    bursts = starts_after([Rate(4, 0.5)], [(0.0, 1)] * 12)
    late = [s + (0.01 if i % 4 == 3 else 0.0) for i, s in enumerate(bursts)]
    assert most_in_any_window(late, 0.5) > 4


@pytest.mark.parametrize("margin", [0.0, 0.05, 0.1])
@pytest.mark.parametrize("rate", [Rate(10, 0.5), Rate(3, 1.0), Rate(20, 1.0)])
def test_a_busy_client_gets_its_quota_through(rate: Rate, margin: float) -> None:
    """Everyone asks at once: at least ``count * elapsed / (seconds + margin)`` slots, less
    one window, go between the first and the last."""
    starts = starts_after([rate], [(0.0, 1)] * (rate.count * 7), margin)
    assert len(starts) >= throughput_floor(rate, margin, starts)
    # and no more than the widened window allows: count per (seconds + margin)
    assert most_in_any_window(starts, rate.seconds + margin - 1e-9) <= rate.count


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
    # with a margin, the same holds for every window widened by it
    paced = starts_after(rates, requests, 0.05)
    slots = list(
        itertools.chain.from_iterable([s] * w for s, (_, w) in zip(paced, requests, strict=True))
    )
    assert paced == sorted(paced)
    for rate in rates:
        assert max_in_window(slots, rate.seconds + 0.05) <= rate.count


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


@pytest.mark.parametrize("margin", [-0.01, math.nan, math.inf, True, "0.05", None])
def test_a_margin_is_a_finite_number_of_seconds(margin: object) -> None:
    with pytest.raises(ValueError, match="margin must be a finite number of seconds >= 0"):
        LocalLimiter([Rate(3, 1.0)], margin=margin)  # type: ignore[arg-type]


def test_margin_defaults_to_50_ms_and_shows_in_the_repr() -> None:
    assert DEFAULT_MARGIN == 0.05
    limiter = LocalLimiter([Rate(3, 1.0)], weights={"orders": 2})
    assert limiter.margin == 0.05
    assert repr(limiter) == (
        "LocalLimiter(rates=[Rate(count=3, seconds=1.0)], weights={'orders': 2}, margin=0.05)"
    )
    assert LocalLimiter(margin=0).margin == 0.0


async def test_the_local_limiter_reserves_by_the_rule_with_its_margin() -> None:
    limiter = LocalLimiter([Rate(2, 10.0)], margin=0.5, learn=False)
    waits = [(await limiter.acquire("pool", Network.MAINNET)).wait for _ in range(3)]
    assert waits[0] == 0.0
    assert 0.2 < waits[1] <= 0.25  # paced margin / count after the first
    assert 10.4 < waits[2] <= 10.5  # the first slot frees seconds + margin after it went


async def test_local_limiter_reserves_per_network() -> None:
    limiter = LocalLimiter([Rate(2, 60.0)], weights={"orders": 2}, margin=0, learn=False)
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
    limiter = LocalLimiter(learn=False)
    idle_before = limiter.idle
    assert await limiter.acquire("pool", Network.MAINNET) == Admission(wait=0.0)
    await limiter.hold(Network.MAINNET, 30.0, "30")
    await limiter.hold(Network.MAINNET, 1.0, "1")  # never shortens a hold
    assert idle_before
    assert not limiter.idle
    assert 29.0 < await limiter.held(Network.MAINNET) <= 30.0
    assert await limiter.held(Network.TESTNET) == 0.0
    admission = await limiter.acquire("pool", Network.MAINNET)
    assert 29.0 < admission.held <= admission.wait <= 30.0
    assert admission.retry_after == "30"  # what the server sent, for messages
    assert not admission.reserved  # nothing is reserved inside a hold: ask again after it
    await limiter.hold(Network.TESTNET, 0.0)  # a hold that has run out
    assert await limiter.held(Network.TESTNET) == 0.0


async def test_nothing_is_reserved_inside_a_hold() -> None:
    """Slots are taken when the hold is over, by the rule: none is lost to the hold."""
    limiter = LocalLimiter([Rate(1, 60.0)], learn=False)
    await limiter.hold(Network.MAINNET, 30.0)
    for _ in range(5):
        assert not (await limiter.acquire("pool", Network.MAINNET)).reserved
    await limiter.clear_hold(Network.MAINNET)
    assert await limiter.acquire("pool", Network.MAINNET) == Admission(wait=0.0)


async def test_clear_hold_ends_a_hold_at_once_on_one_network_or_all() -> None:
    limiter = LocalLimiter(learn=False)
    for network in Network:
        await limiter.hold(network, 60.0, "60")
    await limiter.clear_hold("TESTNET")  # a name, any case
    assert await limiter.held(Network.TESTNET) == 0.0
    assert await limiter.held(Network.MAINNET) > 50.0
    idle_while_held = limiter.idle
    await limiter.clear_hold()  # every network
    assert await limiter.held(Network.MAINNET) == 0.0
    assert (idle_while_held, limiter.idle) == (False, True)  # the client's fast path is back
    assert await limiter.acquire("pool", Network.MAINNET) == Admission(wait=0.0)
    await limiter.clear_hold()  # nothing to end: fine
    await limiter.hold(Network.MAINNET, 5.0)  # a new hold after a clear holds again
    assert (await limiter.acquire("pool", Network.MAINNET)).retry_after is None
    with pytest.raises(ValueError, match="unknown network 'mainet'"):
        await limiter.clear_hold("mainet")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("sent", "shown"),
    [
        ("120", "120"),
        (" 1000000000 ", "1000000000"),
        ("Wed, 21 Oct 2026 07:28:00 GMT", "Wed, 21 Oct 2026 07:28:00 GMT"),
        ("9" * 100, "9" * 64 + "…"),
        ("1\x1b[2J", "1?[2J"),
        ("", None),
        (None, None),
    ],
)
def test_the_servers_retry_after_is_kept_as_sent_but_bounded(
    sent: str | None, shown: str | None
) -> None:
    assert shown_retry_after(sent) == shown


@pytest.mark.parametrize("seconds", [1e13, 1e16, 1e300, math.inf])
async def test_local_limiter_holds_at_most_a_day(seconds: float) -> None:
    """A ``Retry-After`` of years (or one the limiter is handed directly) holds a day."""
    limiter = LocalLimiter()
    await limiter.hold(Network.MAINNET, seconds)
    assert MAX_HOLD == 86_400.0
    assert MAX_HOLD - 60.0 < await limiter.held(Network.MAINNET) <= MAX_HOLD
    assert (await limiter.acquire("pool", Network.MAINNET)).wait <= MAX_HOLD


async def test_a_held_network_leaves_the_fast_path_alone_and_comes_back_after() -> None:
    """The networks a client's first attempt asks nothing for (``free``): a hold takes only
    its network out; the first question after the hold ends brings it back."""
    limiter = unlimited_until_told()
    assert limiter.free == set(Network)
    await limiter.hold(Network.MAINNET, 30.0, "30")
    assert limiter.free == {Network.TESTNET}  # the other network keeps the fast path
    assert not (await limiter.acquire("pool", Network.MAINNET)).reserved  # still held
    assert limiter.free == {Network.TESTNET}
    await limiter.clear_hold(Network.MAINNET)
    assert limiter.free == set(Network)
    await limiter.hold(Network.MAINNET, 1e-9)  # over before the next question
    assert Network.MAINNET not in limiter.free
    assert await limiter.acquire("pool", Network.MAINNET) == Admission(wait=0.0)
    assert limiter.free == set(Network)


async def test_a_limiter_with_rates_or_learning_keeps_no_network_free() -> None:
    """Every first attempt asks a limiter with rates, and a learning one until an answer
    without a limit made the network quiet."""
    rated = LocalLimiter([Rate(5, 1.0)], learn=False)
    await rated.acquire("pool", Network.MAINNET)
    assert rated.free == set()
    learning = LocalLimiter()
    assert learning.free == set()
    sent = time.monotonic()
    await learning.acquire("pool", Network.MAINNET)
    learning.observe(Network.MAINNET, None, sent)  # an answer without limit headers
    assert learning.free == {Network.MAINNET}
