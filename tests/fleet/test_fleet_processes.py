"""A fleet of real processes behind one RedisLimiter, measured where the requests land.

Four worker processes (tests/_fleet_worker.py), each with its own event loop, Client and
RedisLimiter on the same Redis and name, call a loopback server of this process: for the
quota, one that logs the kernel's receive time of each request (tests/_arrivals.py); for
the holds, the fake exchange (scripted 429s, its own log). Every bound is checked on the
server's clock.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections import Counter
from collections.abc import AsyncIterator, Iterator
from typing import TYPE_CHECKING

import pytest

from asyncapi_client import Client, Network, Rate
from asyncapi_client._limiters import DEFAULT_MARGIN, HOLD_RECHECK
from asyncapi_client.fleet import RedisLimiter
from asyncapi_client.testing import FakeExchange, FakeServer, RecordedRequest, Reply
from tests._arrivals import ArrivalServer
from tests._fleet import RUN_TIMEOUT, WORKERS, Fleet, prioritized
from tests._windows import most_in_any_window, throughput_floor, timeline

pytestmark = pytest.mark.waits  # seconds of windows and processes: see tests/_schedule.py

if TYPE_CHECKING:
    from tests._redis import RedisServer

pytest_plugins = ("tests._redis",)

#: The fleet's quota in the quota run: short windows keep the run short.
QUOTA = Rate(10, 0.5)
#: Calls each worker keeps going in the quota run: 20 callers for 10 slots, so every
#: window opens with a burst from every process.
QUOTA_CONCURRENCY = 5
#: How long the quota run lasts (s): five windows and more.
QUOTA_RUN = 2.6
#: How long the test watches a 429 hold before it ends it with clear_hold() (s).
WATCHED = 0.5


@pytest.fixture
async def server() -> AsyncIterator[FakeServer]:
    async with FakeServer(FakeExchange.generate(seed=14)) as srv:
        yield srv


@pytest.fixture(scope="module")
def fleet() -> Iterator[Fleet]:
    workers = Fleet()
    try:
        workers.wait_ready()
        yield workers
    finally:
        workers.stop()
    assert all(proc.returncode == 0 for proc in workers.procs)


def worker_of(record: RecordedRequest) -> str:
    return record.headers["X-Worker"]


async def test_four_processes_share_one_quota_and_one_429_hold(
    fleet: Fleet, server: FakeServer, redis_server: RedisServer, redis_url: str
) -> None:
    """Three runs of the same four processes: the shared quota, the shared 429 hold, and a
    huge ``Retry-After`` whose hold ``clear_hold()`` ends for every process.

    (One test, so that the fleet starts once even when xdist splits the suite.)
    """
    assert redis_server.process is not None
    with prioritized(os.getpid(), redis_server.process.pid):
        await check_quota(fleet, redis_url)
        server.clear_scripts()
        await check_hold(fleet, server, redis_url)
        server.clear_scripts()
        await check_clear_hold(fleet, server, redis_url)


async def check_quota(fleet: Fleet, redis_url: str) -> None:
    """``Rate(10, 0.5)`` for the fleet, default margin, bursts from every process: at most
    10 (+1) arrivals in any half second of the server's own log, the quota used (at least
    ``count * elapsed / (seconds + margin)`` less one window), every worker served.

    Without the margin the limit holds on the Redis clock only: each burst is let go on a
    window's edge and the jitter to the server puts two bursts in one window (35 in one
    second at ``Rate(20, 1.0)`` was seen here).

    Arrivals are the kernel's receive times (``tests/_arrivals.py``): a test process that
    waits for a CPU on a loaded machine must not move them.
    """
    with ArrivalServer() as server:
        reports = await fleet.run(
            server.base_url,
            redis_url,
            rates=[(QUOTA.count, QUOTA.seconds)],
            seconds=QUOTA_RUN,
            concurrency=QUOTA_CONCURRENCY,
            name="quota",
        )
        every = server.arrivals  # the warm-ups took their slots too
    unstamped = [i for i, arrival in enumerate(every) if not arrival.kernel]
    assert not unstamped, f"not stamped by the kernel: {unstamped} of {len(every)}"
    log = [r for r in every if r.path == "/api/tokens"]
    landed = sorted(r.time for r in log)
    story = timeline([r.time for r in every], [f"w{r.headers['x-worker']}" for r in every])
    # the server's own clock: never more than count in a window (+1 for clocks)
    assert most_in_any_window([r.time for r in every], QUOTA.seconds) <= QUOTA.count + 1, story
    # the quota was used
    assert len(log) >= throughput_floor(QUOTA, DEFAULT_MARGIN, landed), story
    assert len(log) >= 3 * QUOTA.count, story  # the run spanned several windows
    # every worker got its share (first come, first served: no starvation)
    per_worker = Counter(r.headers["x-worker"] for r in log)
    assert set(per_worker) == {str(w) for w in range(WORKERS)}
    assert min(per_worker.values()) >= len(log) / WORKERS / 2, per_worker
    for report in reports:
        assert report["errors"] == {}
        # the server may have answered calls that the end of the run then cancelled (at most
        # the worker's concurrency); nothing else may differ
        served = per_worker[str(report["worker"])]
        assert report["ok"] <= served <= report["ok"] + QUOTA_CONCURRENCY, (report, served)
        assert report["tasks_left"] == 0


async def check_hold(fleet: Fleet, server: FakeServer, redis_url: str) -> None:
    """One worker meets a 429 with Retry-After: 1; no worker's request arrives for 0.95 s.

    The rate here is smooth (one start per 0.2 s), so that when the 429 is answered no other
    request is already on its way: what is measured is the hold, not requests in flight.
    """
    seen: set[str] = set()
    limited_once = False

    def reply(record: RecordedRequest) -> Reply:
        # the 429 goes to the first request after every worker has been served: all of
        # them are calling by then, so the hold has others to hold
        nonlocal limited_once
        if len(seen) == WORKERS and not limited_once:
            limited_once = True
            return Reply(429, headers={"Retry-After": "1"}, json={"error": "slow down"})
        seen.add(worker_of(record))
        return Reply(200)

    server.script("tokens", reply, repeat=True)
    before = len(server.requests)
    reports = await fleet.run(
        server.base_url, redis_url, rates=[(1, 0.2)], seconds=3.0, concurrency=1, name="hold429"
    )
    assert all(report["errors"] == {} for report in reports)  # the 429 was retried
    log = [r for r in server.requests[before:] if r.operation == "tokens"]
    (limited,) = [r for r in log if r.status == 429]
    after = [r.time - limited.time for r in log if r.time > limited.time]
    assert after, "requests flowed again after the hold"
    assert min(after) > 0.95  # no worker's request reached the server during the hold
    # the hold held the others too: the first requests after it come from other workers
    first_after = sorted((r for r in log if r.time > limited.time), key=lambda r: r.time)
    assert {worker_of(r) for r in first_after[:4]} - {worker_of(limited)}


async def check_clear_hold(fleet: Fleet, server: FakeServer, redis_url: str) -> None:
    """One worker meets a 429 with ``Retry-After: 1000000000``: it raises at once, saying
    what the server asked; every process is held for ``retry_after_cap`` (60 s), not for
    years or a day; nothing arrives while the test watches; then ``clear_hold()`` in this
    process ends the hold for all of them: a new call goes at once, and every worker's
    waiting calls go within :data:`HOLD_RECHECK` (they ask again that often).
    """
    seen: set[str] = set()
    limited = asyncio.Event()

    def reply(record: RecordedRequest) -> Reply:
        if len(seen) == WORKERS and not limited.is_set():
            limited.set()
            return Reply(429, headers={"Retry-After": "1000000000"}, json={"error": "later"})
        if "X-Worker" in record.headers:  # not this process's own call
            seen.add(worker_of(record))
        return Reply(200)

    server.script("tokens", reply, repeat=True)
    before = len(server.requests)
    name = "clear"
    run = asyncio.ensure_future(
        fleet.run(
            server.base_url,
            redis_url,
            rates=[(QUOTA.count, QUOTA.seconds)],
            seconds=3.5,
            concurrency=2,
            name=name,
            retry_after_cap=60.0,
        )
    )
    try:
        async with (
            RedisLimiter(redis_url, [QUOTA], name=name) as limiter,
            Client(base_url=server.base_url, limiter=limiter, max_retries=0) as client,
        ):
            await asyncio.wait_for(limited.wait(), RUN_TIMEOUT)
            # Watch the hold for a while: the time passing is what is measured here.
            await asyncio.sleep(WATCHED)
            held = await limiter.held(Network.MAINNET)
            # when the worker placed it, from what is left (Redis's clock runs as ours)
            held_at = time.monotonic() - (60.0 - held)
            assert 60.0 - WATCHED - 5.0 < held <= 60.0, held  # retry_after_cap, not 10**9 s
            cleared = time.monotonic()
            await limiter.clear_hold()
            await client.tokens()  # a new call, after the clear: not held
            own = server.requests[-1]
    finally:
        reports = await run
    log = [r for r in server.requests[before:] if r.operation == "tokens" and r is not own]
    assert [r.status for r in log].count(429) == 1
    # nothing inside the hold (a request already on the wire when it was placed aside)
    inside = [r.time - held_at for r in log if held_at + 0.05 < r.time < cleared]
    assert not inside, inside
    assert own.time - cleared < 0.5
    first_after: dict[str, float] = {}
    for r in log:
        if r.time > cleared:
            worker = worker_of(r)
            first_after[worker] = min(first_after.get(worker, r.time), r.time)
    assert len(first_after) == WORKERS, first_after
    assert max(first_after.values()) - cleared < HOLD_RECHECK + 0.5, (cleared, first_after)
    # the worker that met the 429 raised at once, with the server's own value
    errors = [report for report in reports if report["errors"]]
    assert [report["errors"] for report in errors] == [{"RateLimitError": 1}], reports
    message = errors[0]["messages"]["RateLimitError"]
    assert "the server sent Retry-After: 1000000000," in message, message
    assert "retry_after_cap=60s" in message, message
    assert "held for 60s" in message, message
