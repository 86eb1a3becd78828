"""RedisLimiter against a real redis-server: the script's arithmetic, keys, expiry, failures."""

from __future__ import annotations

import asyncio
import gc
import importlib
import itertools
import random
import signal
import socket
import sys
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import pytest
import redis.asyncio as aredis

from asyncapi_client import (
    Admission,
    Client,
    Limiter,
    LimiterError,
    Network,
    Rate,
    RateLimitError,
    RequestTimeoutError,
    RetryEvent,
    TransportError,
)
from asyncapi_client import fleet as fleet_module
from asyncapi_client._limiters import MAX_HOLD, OperationName
from asyncapi_client.fleet import CALL_TIMEOUT, EXPIRY_MARGIN_MS, HOLD_SEEN, RedisLimiter
from asyncapi_client.testing import FakeExchange, FakeServer, Reply
from tests._rediscache import script_calls
from tests._windows import max_in_window, starts_after

if TYPE_CHECKING:
    from tests._redis import RedisServer

pytest_plugins = ("tests._redis",)

MAIN = Network.MAINNET
MICRO = 1_000_000


def other_tasks() -> set[asyncio.Task[object]]:
    return asyncio.all_tasks() - {asyncio.current_task()}


async def script_starts(
    limiter: RedisLimiter, requests: Sequence[tuple[int, int]], network: Network = MAIN
) -> list[int]:
    """Reserve ``(now µs, weight)`` requests through the script with an explicit clock."""
    out = []
    for now, weight in requests:
        ahead, held, reserved, _ = await limiter._reserve(weight, network, now)
        assert (held, reserved) == (0, True)
        out.append(now + ahead)
    return out


#: A margin whose pace (margin / count, in µs) is a whole number for every count up to 6:
#: the script keeps whole µs, so the reference in floats then matches it exactly.
MARGIN = 0.06


# --- arguments ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"name": ""}, "name must be a non-empty string"),
        ({"name": 7}, "name must be a non-empty string"),
        ({"name": "my bots"}, "without spaces or braces"),
        ({"name": "a{b}"}, "without spaces or braces"),
        ({"name": "x" * 129}, "at most 128"),
        ({"rates": [(20, 1.0)]}, "Rate"),
        ({"weights": {"orderz": 1}}, "unknown operation 'orderz'"),
        ({"weights": {"orders": 21}}, "never start"),
        ({"weights": {"orders": 0}}, "positive int"),
        ({"url": "http://127.0.0.1:6379/0"}, "redis://, rediss:// or unix://"),
        ({"url": "redis:///0"}, "needs a host"),
        ({"url": "redis://127.0.0.1:6379/zero"}, "database in a Redis URL is a number"),
        ({"url": "redis://127.0.0.1:99999/0"}, "not a valid Redis URL"),
        ({"url": "unix://"}, "needs the socket's path"),
        ({"url": b"redis://127.0.0.1"}, "needs a redis:// URL or a redis.asyncio.Redis"),
        ({"url": "redis://127.0.0.1:6379/0?socket_timeout=soon"}, "not a valid Redis URL"),
    ],
)
def test_arguments_are_checked(kwargs: dict[str, object], match: str) -> None:
    args: dict[str, object] = {
        "url": "redis://127.0.0.1:6379/0",
        "rates": [Rate(20, 1.0)],
        "name": "bots",
        "weights": None,
    }
    args.update(kwargs)
    with pytest.raises(ValueError, match=match):
        RedisLimiter(
            args["url"],  # type: ignore[arg-type]
            args["rates"],  # type: ignore[arg-type]
            name=args["name"],  # type: ignore[arg-type]
            weights=args["weights"],  # type: ignore[arg-type]
        )


async def test_hold_seconds_are_checked() -> None:
    limiter = RedisLimiter("redis://127.0.0.1:1/0", [Rate(1, 1.0)], name="bots")
    for bad in (-1.0, float("nan"), float("inf"), "1", True):
        with pytest.raises(ValueError, match="hold seconds"):
            await limiter.hold(MAIN, bad)  # type: ignore[arg-type]
    await limiter.aclose()


def test_repr_names_the_limiter_without_credentials() -> None:
    limiter = RedisLimiter(
        "redis://bot:s3cret@127.0.0.1:6379/2?password=hunter2", [Rate(20, 1.0)], name="my-bots"
    )
    text = repr(limiter)
    assert text == (
        "RedisLimiter('redis://127.0.0.1:6379/2', rates=[Rate(count=20, seconds=1.0)], "
        "name='my-bots')"
    )
    assert limiter.owns_client
    assert isinstance(limiter, Limiter)


def test_unix_socket_addresses_are_named_too() -> None:
    limiter = RedisLimiter("unix:///run/redis.sock?db=1", [Rate(1, 1.0)], name="u")
    assert repr(limiter).startswith("RedisLimiter('unix:///run/redis.sock', ")
    borrowed = RedisLimiter(aredis.Redis(unix_socket_path="/run/r.sock"), [Rate(1, 1.0)], name="u")
    assert repr(borrowed).startswith("RedisLimiter('unix:///run/r.sock', ")


def test_the_module_says_which_extra_it_needs(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "redis", None)
    monkeypatch.setitem(sys.modules, "redis.asyncio", None)
    for module in ("asyncapi_client.fleet", "asyncapi_client._redisclient"):
        monkeypatch.delitem(sys.modules, module)  # as in a process that never imported them
    with pytest.raises(ImportError, match=r"asyncapi-client\[redis\]"):
        importlib.import_module("asyncapi_client.fleet")
    monkeypatch.undo()
    assert importlib.import_module("asyncapi_client.fleet").RedisLimiter is RedisLimiter


def test_keys_share_one_hash_tag_per_name_and_network() -> None:
    limiter = RedisLimiter("redis://127.0.0.1:6379/0", [Rate(20, 1.0), Rate(600, 60.0)], name="b")
    assert limiter.keys("mainnet") == [
        "asyncapi_client:{b:mainnet}:hold",
        "asyncapi_client:{b:mainnet}:hold:retry_after",
        "asyncapi_client:{b:mainnet}:last",
        "asyncapi_client:{b:mainnet}:rate:20:1000000",
        "asyncapi_client:{b:mainnet}:rate:600:60000000",
        "asyncapi_client:{b:mainnet}:epoch",
        "asyncapi_client:{b:mainnet}:learned",
        "asyncapi_client:{b:mainnet}:learned:starts",
    ]
    assert all("{b:testnet}" in key for key in limiter.keys(Network.TESTNET))
    assert limiter.keys("TESTNET") == limiter.keys(Network.TESTNET)
    with pytest.raises(ValueError, match="unknown network 'mainet'"):
        limiter.keys("mainet")  # type: ignore[arg-type]
    limiter.keys(MAIN).clear()  # a copy: the limiter's own list is untouched
    assert len(limiter.keys(MAIN)) == 8
    # a rate named twice is one quota, not two lists that both count every start
    twice = RedisLimiter("redis://127.0.0.1:6379/0", [Rate(2, 1.0), Rate(2, 1.0)], name="b")
    assert len(twice.keys(MAIN)) == 7
    # the margin is not in a key: members with other margins share the rate's list
    wider = RedisLimiter("redis://127.0.0.1:6379/0", [Rate(20, 1.0)], name="b", margin=0.2)
    assert wider.keys(MAIN)[3] == limiter.keys(MAIN)[3]


# --- the script's arithmetic is earliest_start's --------------------------------------------

TABLE = [
    ([Rate(2, 1.0)], [(0, 1)] * 3),
    ([Rate(2, 1.0)], [(0, 1), (5 * MICRO, 1)]),
    ([Rate(2, 1.0)], [(0, 1), (0, 2)]),
    ([Rate(3, 1.0), Rate(4, 10.0)], [(0, 1)] * 5),
    ([Rate(3, 1.0)], [(0, 2), (0, 3), (0, 1)]),
    ([Rate(5, 1.0), Rate(8, 3.0)], [(0, 1)] * 12),
]


@pytest.mark.parametrize("margin", [0.0, MARGIN])
@pytest.mark.parametrize(("rates", "requests"), TABLE)
async def test_script_matches_earliest_start_on_the_table(
    redis_url: str, rates: list[Rate], requests: list[tuple[int, int]], margin: float
) -> None:
    # the reference in µs: the rule does not care about the unit
    reference = [Rate(rate.count, rate.seconds * MICRO) for rate in rates]
    expected = starts_after(
        reference, [(float(now), weight) for now, weight in requests], margin * MICRO
    )
    async with RedisLimiter(redis_url, rates, name="table", margin=margin) as limiter:
        assert await script_starts(limiter, requests) == expected


@pytest.mark.parametrize("margin", [0.0, MARGIN])
@pytest.mark.parametrize("seed", range(12))
async def test_script_matches_earliest_start_on_random_sequences(
    redis_url: str, seed: int, margin: float
) -> None:
    rnd = random.Random(seed)
    windows = [rnd.choice([500_000, MICRO, 3 * MICRO]) for _ in range(rnd.randint(1, 3))]
    rates = [Rate(rnd.randint(1, 6), window / MICRO) for window in windows]
    smallest = min(rate.count for rate in rates)
    now = 1_000 * MICRO
    requests = []
    for _ in range(60):
        now += rnd.choice([0, 0, 1, 50_000, 300_000, MICRO])
        requests.append((now, rnd.randint(1, smallest)))
    reference = [Rate(rate.count, window) for rate, window in zip(rates, windows, strict=True)]
    expected = starts_after(reference, [(float(t), w) for t, w in requests], margin * MICRO)
    async with RedisLimiter(redis_url, rates, name=f"seed{seed}", margin=margin) as limiter:
        got = await script_starts(limiter, requests)
    assert got == expected


@pytest.mark.parametrize("margin", [0.0, MARGIN])
async def test_two_rates_at_once_hold_on_the_server_clock(
    redis_url: str, redis_client: aredis.Redis, margin: float
) -> None:
    rates = [Rate(5, 1.0), Rate(8, 3.0)]
    pace = round(margin / 5 * MICRO)  # the smallest count's pace
    async with RedisLimiter(redis_url, rates, name="two", margin=margin) as limiter:
        last_key = limiter.keys(MAIN)[2]
        starts = []
        for _ in range(20):
            admission = await limiter.acquire("pool", MAIN)
            assert admission.held == 0.0
            paced = await redis_client.get(last_key)  # this reservation's start, plus a pace
            assert paced is not None
            starts.append(int(paced) - pace)
    assert starts == sorted(starts)
    slots = [s / MICRO for s in starts]
    assert max_in_window(slots, 1.0 + margin) == 5
    assert max_in_window(slots, 3.0 + margin) == 8
    # the rates bind: 20 requests need 6 s of the 3 s window's room (8 + 8 + 4), and each
    # slot frees a margin later
    assert starts[-1] - starts[0] >= (6 + 2 * margin) * MICRO


async def test_weights_take_their_slots(redis_url: str) -> None:
    weights: dict[OperationName, int] = {"orders": 3}
    async with RedisLimiter(redis_url, [Rate(4, 60.0)], name="w", weights=weights, margin=0) as lim:
        assert lim.weights == {"orders": 3}
        first = await lim.acquire("orders", MAIN)  # three slots
        second = await lim.acquire("pool", MAIN)  # the fourth
        third = await lim.acquire("pool", MAIN)  # the window is full until 0 leaves it
        heavy = await lim.acquire("orders", MAIN)  # three more beside the third, at 60 s
        fifth = await lim.acquire("pool", MAIN)  # (0, 60] is full again: at 120 s
    assert first.wait == second.wait == 0.0
    for admission, seconds in ((third, 60.0), (heavy, 60.0), (fifth, 120.0)):
        assert seconds - 10.0 < admission.wait <= seconds  # (a slow machine's margin)


# --- the shared hold ------------------------------------------------------------------------


async def test_hold_is_shared_on_the_server_clock(
    redis_url: str, redis_client: aredis.Redis
) -> None:
    async with (
        RedisLimiter(redis_url, [Rate(100, 1.0)], name="h") as one,
        RedisLimiter(redis_client, [Rate(100, 1.0)], name="h") as other,
    ):
        assert await other.held(MAIN) == 0.0
        await one.hold(MAIN, 30.0, "30")
        await one.hold(MAIN, 1.0, "1")  # never shortens a hold
        await one.hold(MAIN, 0.0)  # nothing to hold
        held = await other.held(MAIN)
        assert 20.0 < held <= 30.0  # (a margin for a slow machine between the calls)
        assert await other.held(Network.TESTNET) == 0.0
        admission = await other.acquire("pool", MAIN)
        assert 20.0 < admission.held <= admission.wait <= 30.0
        assert admission.retry_after == "30"  # the server's own value, in every process
        assert not admission.reserved  # nothing is reserved inside a hold
        assert (await one.acquire("pool", Network.TESTNET)) == Admission(wait=0.0)
        hold_ttl = await redis_client.pttl(one.keys(MAIN)[0])
        assert 20_000 < hold_ttl <= 30_000 + EXPIRY_MARGIN_MS
        # its Retry-After expires with it (two reads, so the clock may tick between them)
        assert abs(await redis_client.pttl(one.keys(MAIN)[1]) - hold_ttl) <= 50
    assert await redis_client.ping()  # the borrowed client stays open


@pytest.mark.parametrize("seconds", [1e13, 1e16, 1e300])
async def test_a_hold_is_at_most_a_day_in_key_and_ttl(
    redis_url: str, redis_client: aredis.Redis, seconds: float
) -> None:
    """One header of years must not lock the fleet out across restarts (nor overflow PX)."""
    async with RedisLimiter(redis_url, [Rate(100, 1.0)], name="long") as limiter:
        await limiter.hold(MAIN, seconds)
        assert MAX_HOLD - 60.0 < await limiter.held(MAIN) <= MAX_HOLD
        ttl = await redis_client.pttl(limiter.keys(MAIN)[0])
        assert MAX_HOLD * 1000 - 60_000 < ttl <= MAX_HOLD * 1000 + EXPIRY_MARGIN_MS


async def test_the_hold_script_bounds_what_it_is_handed_too(
    redis_url: str, redis_client: aredis.Redis
) -> None:
    async with RedisLimiter(redis_url, [Rate(100, 1.0)], name="script") as limiter:
        keys = limiter.keys(MAIN)[:2]
        await limiter._call(limiter._hold, keys, (10**22, EXPIRY_MARGIN_MS, 0, ""), MAIN)
        stored = await redis_client.get(keys[0])
        assert stored is not None
        assert int(stored) == MAX_HOLD * MICRO
        ttl = await redis_client.pttl(keys[0])
        assert MAX_HOLD * 1000 - 60_000 < ttl <= MAX_HOLD * 1000 + EXPIRY_MARGIN_MS


@pytest.mark.parametrize("retry_after", ["1e13", "1e16"])
async def test_a_429_with_a_huge_retry_after_through_redis_is_one_request(
    redis_url: str, redis_client: aredis.Redis, retry_after: str
) -> None:
    """As with a LocalLimiter: one request, a RateLimitError that says the wait is past
    retry_after_cap, and a fleet hold of at most a day."""
    async with (
        FakeServer(FakeExchange.generate(seed=3)) as server,
        RedisLimiter(redis_url, [Rate(100, 1.0)], name=f"huge-{retry_after}") as limiter,
        Client(base_url=server.base_url, limiter=limiter, max_retries=2) as client,
    ):
        server.script("tokens", Reply(429, headers={"Retry-After": retry_after}), repeat=True)
        with pytest.raises(RateLimitError, match="retry_after_cap=60s: not waited for") as info:
            await client.tokens()
        assert info.value.attempts == 1
        assert len(server.requests) == 1
        ttl = await redis_client.pttl(limiter.keys(MAIN)[0])
        assert 50_000 < ttl <= 60_000 + EXPIRY_MARGIN_MS  # retry_after_cap, not a day
        assert await redis_client.get(limiter.keys(MAIN)[1]) == retry_after.encode()


async def test_a_huge_retry_after_holds_the_fleet_for_the_cap_only(
    redis_url: str, redis_client: aredis.Redis
) -> None:
    """Two members (each its own limiter and client): one meets ``Retry-After: 10**9``
    and raises at once; the other is held for the cap (1 s) and says what the server sent."""
    rates = [Rate(100, 1.0)]
    async with (
        FakeServer(FakeExchange.generate(seed=3)) as server,
        RedisLimiter(redis_url, rates, name="cap") as one,
        RedisLimiter(redis_url, rates, name="cap") as other,
        Client(base_url=server.base_url, limiter=one, retry_after_cap=1.0) as first,
        Client(base_url=server.base_url, limiter=other, retry_after_cap=1.0) as second,
    ):
        server.script("tokens", Reply(429, headers={"Retry-After": "1000000000"}))
        with pytest.raises(RateLimitError, match="Retry-After: 1000000000,") as refused:
            await first.tokens()
        assert refused.value.attempts == 1
        assert 0 < await redis_client.pttl(one.keys(MAIN)[0]) <= 1000 + EXPIRY_MARGIN_MS
        with pytest.raises(RequestTimeoutError) as timed_out:
            await second.tokens(deadline=0.5)
        assert timed_out.value.attempts == 0
        assert "a 429 hold (the server sent Retry-After: 1000000000)" in str(timed_out.value)
        await second.tokens()  # waits the hold out: 1 s, not 10**9 s, nor a day
    limited, after = server.requests
    assert limited.answered_at is not None
    assert 1.0 - 0.05 <= after.time - limited.answered_at < 1.0 + 0.5


async def test_clear_hold_ends_the_fleets_hold_for_every_member(redis_url: str) -> None:
    # ``third`` was never told of the hold: what it answers is what Redis holds. (``one``,
    # which placed it, takes it as on for HOLD_SEEN more: the next test.)
    rates = [Rate(100, 1.0)]
    async with (
        RedisLimiter(redis_url, rates, name="clear") as one,
        RedisLimiter(redis_url, rates, name="clear") as other,
        RedisLimiter(redis_url, rates, name="clear") as third,
    ):
        for network in Network:
            await one.hold(network, 60.0, "60")
        await other.clear_hold("testnet")  # one network, by name
        assert await third.held(Network.TESTNET) == 0.0
        assert await third.held(MAIN) > 50.0
        await other.clear_hold()  # every network
        assert await third.held(MAIN) == 0.0
        assert (await third.acquire("pool", MAIN)).wait == 0.0
        await one.hold(MAIN, 60.0)  # a hold after a clear holds again, without a value
        admission = await other.acquire("pool", MAIN)
        assert (admission.reserved, admission.retry_after) == (False, None)
        with pytest.raises(ValueError, match="unknown network"):
            await one.clear_hold("main")  # type: ignore[arg-type]
    with pytest.raises(RuntimeError, match="is closed"):
        await one.clear_hold()


async def test_a_member_told_of_a_hold_sees_it_cleared_within_hold_seen(redis_url: str) -> None:
    rates = [Rate(100, 1.0)]
    async with (
        RedisLimiter(redis_url, rates, name="seen") as one,
        RedisLimiter(redis_url, rates, name="seen") as other,
    ):
        await one.hold(MAIN, 60.0, "60")
        told = time.monotonic()
        await other.clear_hold()
        answers: list[float] = []
        while await one.held(MAIN) > 0.0:  # bounded: HOLD_SEEN, then Redis says 0
            answers.append(time.monotonic() - told)
            assert answers[-1] < HOLD_SEEN + 0.5, answers
            await asyncio.sleep(0.01)  # the time passing is what is measured
        seen_clear = time.monotonic() - told
        assert (await one.acquire("pool", MAIN)).reserved
    assert seen_clear < HOLD_SEEN + 0.5
    assert all(t < HOLD_SEEN for t in answers), answers  # told less than HOLD_SEEN ago


async def test_a_remembered_hold_that_runs_out_is_never_answered_as_free_without_a_slot(
    redis_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The clock moves 1 ms at every reading: the answer must rest on one reading, so a hold
    # ending between two of them is never "wait 0, nothing reserved" (sent with no slot).
    class Ticking:
        def __init__(self, start: float) -> None:
            self.now = start

        def monotonic(self) -> float:
            self.now += 0.001
            return self.now

    async with RedisLimiter(redis_url, [Rate(100, 1.0)], name="tick") as limiter:
        clock = Ticking(1000.0)
        monkeypatch.setattr(fleet_module, "time", clock)
        ends = clock.now + 0.0015  # after the next reading, before the one after it
        limiter._seen[MAIN] = (clock.now, ends, ends, None)
        admission = await limiter.acquire("pool", MAIN)
    assert admission.reserved or admission.wait > 0, admission


async def test_an_answer_asked_for_before_clear_hold_is_not_remembered_after_it(
    redis_url: str,
) -> None:
    async with (
        RedisLimiter(redis_url, [Rate(100, 1.0)], name="gen") as one,
        RedisLimiter(redis_url, [Rate(100, 1.0)], name="gen") as other,
    ):
        await other.hold(MAIN, 60.0)
        asked, answer = asyncio.Event(), asyncio.Event()
        reserve = one._ask

        async def slow_reserve(weight: int, network: Network) -> Any:
            found = await reserve(weight, network)  # Redis says: held
            asked.set()
            await answer.wait()  # clear_hold() runs here, before the answer is used
            return found

        one._ask = slow_reserve  # type: ignore[method-assign,assignment]
        acquiring = asyncio.ensure_future(one.acquire("pool", MAIN))
        await asked.wait()
        await one.clear_hold()
        answer.set()
        assert not (await acquiring).reserved  # what Redis said then
        one._ask = reserve  # type: ignore[method-assign]
        assert (await one.acquire("pool", MAIN)).reserved  # not the hold it heard of before


# --- expiry ---------------------------------------------------------------------------------


async def test_every_key_expires(redis_url: str, redis_client: aredis.Redis) -> None:
    rates = [Rate(3, 30.0), Rate(6, 120.0)]
    async with RedisLimiter(redis_url, rates, name="ttl", weights={"orders": 2}) as limiter:
        waits = [
            (await limiter.acquire(op, net)).wait
            for op, net in itertools.product(("pool", "orders"), (MAIN, Network.TESTNET))
            for _ in range(4)
        ]
        await limiter.hold(Network.TESTNET, 60.0, "60")
        written = set(limiter.keys(MAIN)[2:] + limiter.keys(Network.TESTNET))
        # what the fleet learns from the server is written once an answer is read
        written -= {key for key in written if ":learned" in key}
    keys = {key.decode() if isinstance(key, bytes) else key for key in await redis_client.keys("*")}
    assert keys == written  # the documented keys only (no hold was asked on mainnet)
    longest_wait = max(waits)
    for key in keys:
        ttl = await redis_client.pttl(key)
        assert ttl > 0, f"{key} has no expiry"
        # no longer than it can matter: the furthest reservation plus the longest window
        # (widened by the margin)
        assert ttl <= (longest_wait + 120.0 + limiter.margin) * 1000 + EXPIRY_MARGIN_MS + 5, key
    # the lists keep only the newest `count` starts
    for key in keys:
        if ":rate:" in key:
            count = int(key.split(":")[-2])
            assert await redis_client.llen(key) == count


# --- lifecycle ------------------------------------------------------------------------------


async def test_a_limiter_from_a_url_owns_and_closes_its_pool(redis_url: str) -> None:
    limiter = RedisLimiter(redis_url, [Rate(5, 1.0)], name="life")
    async with limiter:
        await asyncio.gather(*(limiter.acquire("pool", MAIN) for _ in range(5)))
        pool = limiter._redis.connection_pool
        assert pool._available_connections
    assert not pool._in_use_connections
    assert all(not c.is_connected for c in pool._available_connections)
    await limiter.aclose()  # idempotent
    with pytest.raises(RuntimeError, match="is closed"):
        await limiter.acquire("pool", MAIN)
    with pytest.raises(RuntimeError, match="is closed"):
        await limiter.held(MAIN)
    gc.collect()  # an unclosed connection would warn here (warnings are errors)


async def test_a_borrowed_client_is_never_closed(redis_client: aredis.Redis) -> None:
    limiter = RedisLimiter(redis_client, [Rate(5, 1.0)], name="borrowed")
    assert not limiter.owns_client
    assert repr(limiter).startswith("RedisLimiter('redis://127.0.0.1:")
    async with limiter:
        assert (await limiter.acquire("pool", MAIN)).wait == 0.0
    assert await redis_client.ping()


# --- Redis down, hung, back -----------------------------------------------------------------


async def test_unreachable_redis_is_a_limiter_error_naming_the_limiter() -> None:
    url = f"redis://bot:s3cret@127.0.0.1:{_closed_port()}/0"
    async with RedisLimiter(url, [Rate(5, 1.0)], name="my-bots") as limiter:
        async with asyncio.timeout(10):  # never a hang: refused at once
            for call in (
                limiter.acquire("pool", MAIN),
                limiter.held(MAIN),
                limiter.hold(MAIN, 1.0),
            ):
                with pytest.raises(LimiterError) as info:
                    await call
                assert isinstance(info.value, TransportError)
                assert info.value.limiter == repr(limiter)
                assert "my-bots" in str(info.value.limiter)
                assert "s3cret" not in str(info.value) + info.value.limiter
                assert info.value.network == "mainnet"
    assert not other_tasks()


async def test_a_deadline_while_redis_is_down_names_the_limiter_and_its_failure() -> None:
    """The bot's log line says what is wrong, not only ``__cause__``."""
    async with (
        FakeServer(FakeExchange.generate(seed=3)) as server,
        RedisLimiter(f"redis://127.0.0.1:{_closed_port()}/0", [Rate(5, 1.0)], name="down") as lim,
        # retries enough that the deadline, not their number, ends the call (the back-off's
        # jitter can make four tries take well under a second)
        Client(base_url=server.base_url, limiter=lim, deadline=1.0, max_retries=50) as client,
    ):
        with pytest.raises(RequestTimeoutError) as caught:
            await client.tokens()
    error = caught.value
    assert error.attempts == 0
    assert f"the limiter {lim!r} could not be reached" in str(error)
    assert "the fleet limiter's Redis failed: ConnectionError" in str(error)
    assert isinstance(error.__cause__, LimiterError)
    assert server.requests == []


def _closed_port() -> int:
    """A loopback port nobody listens on (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


async def test_redis_killed_mid_run_then_restarted(own_redis: RedisServer) -> None:
    async with RedisLimiter(own_redis.url, [Rate(1000, 1.0)], name="outage") as limiter:
        for _ in range(5):
            assert (await limiter.acquire("pool", MAIN)).wait == 0.0
        own_redis.kill()
        async with asyncio.timeout(10):
            with pytest.raises(LimiterError, match="Redis failed"):
                await limiter.acquire("pool", MAIN)
        assert not other_tasks()
        assert not limiter._redis.connection_pool._in_use_connections
        own_redis.restart()
        # the same limiter, nothing restarted on our side: requests flow again (after at
        # most a window: Redis lost the starts of the window before it died)
        async with asyncio.timeout(10):
            admission = await limiter.acquire("pool", MAIN)
            assert admission.reserved
            assert admission.wait <= 1.0 + limiter.margin
            await limiter.hold(MAIN, 0.5)
            assert await limiter.held(MAIN) > 0.0
    assert not other_tasks()


async def test_a_hung_redis_is_bounded_by_the_callers_timeout(own_redis: RedisServer) -> None:
    async with RedisLimiter(own_redis.url, [Rate(1000, 1.0)], name="hung") as limiter:
        await limiter.acquire("pool", MAIN)
        assert own_redis.process is not None
        own_redis.process.send_signal(signal.SIGSTOP)  # connected, but never answers
        try:
            with pytest.raises(TimeoutError):
                async with asyncio.timeout(0.3):
                    await limiter.acquire("pool", MAIN)
            assert not other_tasks()
            assert not limiter._redis.connection_pool._in_use_connections
        finally:
            own_redis.process.send_signal(signal.SIGCONT)
        async with asyncio.timeout(10):
            assert (await limiter.acquire("pool", MAIN)).wait >= 0.0


async def test_a_hung_redis_is_cut_off_by_the_limiter_itself(
    own_redis: RedisServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Called without any timeout of the caller's, a question still ends (CALL_TIMEOUT)."""
    async with RedisLimiter(own_redis.url, [Rate(1000, 1.0)], name="cut") as limiter:
        await limiter.acquire("pool", MAIN)  # connected, the script loaded
        monkeypatch.setattr("asyncapi_client.fleet.CALL_TIMEOUT", 0.3)
        assert own_redis.process is not None
        own_redis.process.send_signal(signal.SIGSTOP)
        try:
            with pytest.raises(LimiterError, match=r"did not answer within 0\.3s"):
                await limiter.held(MAIN)
        finally:
            own_redis.process.send_signal(signal.SIGCONT)
        assert not other_tasks()


# --- cancellation in flight (the redis-py 8.1.0 report) --------------------------------------

CANCEL_ROUNDS = 100


async def test_cancelling_an_acquisition_in_flight_leaks_nothing(
    redis_url: str, redis_client: aredis.Redis
) -> None:
    """Cancel acquisitions while the script call awaits Redis: no task, no connection left.

    ``CLIENT PAUSE ... WRITE`` holds every script on the server, so the calls are
    surely in flight when cancelled; the delays vary where in the call the cancel lands.
    """
    rnd = random.Random(14)
    in_flight = 0
    async with RedisLimiter(redis_url, [Rate(10_000, 1.0)], name="cancel") as limiter:
        pool = limiter._redis.connection_pool
        await limiter.acquire("pool", MAIN)  # the script is loaded, a connection is open
        for _ in range(CANCEL_ROUNDS):
            await redis_client.client_pause(10_000, all=False)
            tasks = [
                asyncio.create_task(limiter.acquire("pool", MAIN))
                for _ in range(rnd.choice([1, 3, 12]))  # 12: more than the pool's 10
            ]
            for _ in range(rnd.randint(0, 6)):
                await asyncio.sleep(0)
            if rnd.random() < 0.5:
                await asyncio.sleep(0.002)
            in_flight += bool(pool._in_use_connections)
            for task in tasks:
                task.cancel()
            # Redis is still paused: a cancelled call ends at once, one whose cancel was
            # lost would wait for the answer (or for the limiter's own call timeout)
            async with asyncio.timeout(CALL_TIMEOUT / 2):
                results = await asyncio.gather(*tasks, return_exceptions=True)
            await redis_client.client_unpause()
            assert all(isinstance(r, asyncio.CancelledError) for r in results), results
            assert not other_tasks()
            assert not pool._in_use_connections
        # and the limiter still answers, on connections that carry no stale reply
        async with asyncio.timeout(10):
            answers = await asyncio.gather(*(limiter.acquire("pool", MAIN) for _ in range(20)))
        assert all(a.wait == 0.0 for a in answers)
    assert in_flight >= CANCEL_ROUNDS // 2  # the test did cancel calls in flight


async def test_a_cancel_is_never_lost_with_a_borrowed_client_that_has_socket_timeout(
    redis_url: str, redis_client: aredis.Redis
) -> None:
    """redis-py with ``socket_timeout`` sends through ``asyncio.wait_for``, which on Python
    3.11 can swallow a cancel; the limiter re-raises it once the call returns."""
    rnd = random.Random(11)
    borrowed = aredis.Redis.from_url(redis_url, socket_timeout=5.0)
    try:
        limiter = RedisLimiter(borrowed, [Rate(10_000, 1.0)], name="lost")
        await limiter.acquire("pool", MAIN)
        for _ in range(CANCEL_ROUNDS // 2):
            await redis_client.client_pause(10_000, all=False)
            task = asyncio.create_task(limiter.acquire("pool", MAIN))
            for _ in range(rnd.randint(0, 6)):
                await asyncio.sleep(0)
            task.cancel()
            await redis_client.client_unpause()
            async with asyncio.timeout(10):
                (result,) = await asyncio.gather(task, return_exceptions=True)
            assert isinstance(result, asyncio.CancelledError), result
            assert not other_tasks()
        await limiter.aclose()
    finally:
        await borrowed.aclose()


# --- through a Client -----------------------------------------------------------------------


async def test_a_client_through_a_fleet_limiter_survives_a_redis_outage(
    own_redis: RedisServer,
) -> None:
    """Redis down: the call fails with a LimiterError, retried like a connection failure,
    within the timeout; Redis back: the same client and limiter work again. Closing the
    client leaves the limiter open (several clients may share it)."""
    retried: list[RetryEvent] = []
    async with (
        FakeServer(FakeExchange.generate(seed=3)) as server,
        RedisLimiter(own_redis.url, [Rate(50, 1.0)], name="via-client") as limiter,
    ):
        async with Client(
            base_url=server.base_url,
            limiter=limiter,
            timeout=2.0,
            max_retries=2,
            on_retry=retried.append,
        ) as client:
            assert await client.tokens()
            own_redis.kill()
            async with asyncio.timeout(30):  # never a hang
                with pytest.raises(LimiterError) as info:
                    await client.tokens()
            assert info.value.limiter == repr(limiter)
            assert [type(event.error) for event in retried] == [LimiterError, LimiterError]
            assert len(server.requests) == 1  # nothing was sent without the limiter's word
            own_redis.restart()
            async with asyncio.timeout(30):
                assert await client.tokens()
            assert len(server.requests) == 2
        # the client is closed, the limiter is not
        assert (await limiter.acquire("pool", MAIN)).wait >= 0.0
    assert not other_tasks()


@pytest.mark.waits
async def test_a_hung_redis_fails_the_attempt_within_its_timeout(own_redis: RedisServer) -> None:
    async with (
        FakeServer(FakeExchange.generate(seed=3)) as server,
        RedisLimiter(own_redis.url, [Rate(50, 1.0)], name="hung-client") as limiter,
        Client(base_url=server.base_url, limiter=limiter, timeout=2.0, max_retries=0) as client,
    ):
        assert await client.tokens()
        assert own_redis.process is not None
        own_redis.process.send_signal(signal.SIGSTOP)
        try:
            async with asyncio.timeout(30):
                with pytest.raises(LimiterError, match=r"did not answer within 2s"):
                    await client.tokens()
        finally:
            own_redis.process.send_signal(signal.SIGCONT)
        assert len(server.requests) == 1
        async with asyncio.timeout(30):
            assert await client.tokens()
    assert not other_tasks()


def test_the_fleet_module_exports_the_fleet_classes_only() -> None:
    import asyncapi_client.fleet

    assert asyncapi_client.fleet.__all__ == ["RedisLimiter", "RedisCache", "RedisWatchState"]


# --- the calls of one process waiting in a hold share the limiter's questions ------------------


@pytest.mark.waits
async def test_calls_waiting_in_a_hold_share_the_limiters_questions(
    redis_url: str, redis_client: aredis.Redis
) -> None:
    # 200 calls wait out a 3 s hold. Each asks again every HOLD_RECHECK (1 s): one script
    # call each time was 200 in any 1.5 s inside the hold. Now one of them asks for all
    # when the shared answer is older than HOLD_SEEN: about one a second here.
    waiting, hold = 200, 3.0
    async with (
        FakeServer(FakeExchange.generate(seed=3)) as server,
        RedisLimiter(redis_url, [Rate(1000, 1.0)], name="share") as limiter,
        Client(base_url=server.base_url, limiter=limiter, coalesce=False) as client,
    ):
        placed = time.monotonic()  # before: the hold starts no sooner, ends no sooner
        await limiter.hold(MAIN, hold)
        calls = asyncio.gather(*[client.tokens() for _ in range(waiting)])
        # The time passing is what is measured: Redis's own count over 1.5 s of the hold.
        await asyncio.sleep(max(0.0, placed + 0.5 - time.monotonic()))
        early = await script_calls(redis_client)
        await asyncio.sleep(max(0.0, placed + 2.0 - time.monotonic()))
        asked = await script_calls(redis_client) - early
        tokens = await calls
    assert len(tokens) == waiting
    assert len(server.requests) == waiting
    assert min(r.time for r in server.requests) >= placed + hold - 0.05  # none inside it
    assert asked < 30, asked  # measured 1 (200 before); room for a loaded machine
