"""Rate limits hold where the requests land: a loopback server logs the kernel's arrival
time of each request (``tests/_arrivals.py``), and that log is what is counted, not the
limiter's clock. One process here; four real processes on a real redis-server are in
``tests/fleet/test_fleet_processes.py``.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from asyncapi_client import ApiError, Client, LocalLimiter, Rate
from tests._arrivals import ArrivalServer
from tests._checks import settled, stray_tasks
from tests._windows import most_in_any_window, throughput_floor, timeline

#: Short windows keep the run short: ten requests in any half second.
RATE = Rate(10, 0.5)
#: Callers at once: three windows' worth, so every window opens with a burst.
CALLERS = 30
#: How long the callers keep calling (s): five windows and more.
RUN = 2.6


@pytest.fixture(autouse=True)
async def _no_stray_tasks() -> AsyncIterator[None]:
    yield
    assert await settled(lambda: not stray_tasks()), stray_tasks()


async def hammer(client: Client, callers: int, seconds: float) -> int:
    """``callers`` tasks call ``tokens()`` in a loop for ``seconds``; the calls that failed."""
    loop = asyncio.get_running_loop()
    end = loop.time() + seconds
    failed = 0

    async def caller() -> None:
        nonlocal failed
        while loop.time() < end:
            try:
                await client.tokens()
            except ApiError:
                failed += 1

    tasks = [asyncio.create_task(caller()) for _ in range(callers)]
    # a caller still waiting for its slot at the end is cancelled: the run ends there
    await asyncio.wait(tasks, timeout=seconds)
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    return failed


@pytest.mark.waits
async def test_a_local_limiter_holds_at_the_server_under_bursts_of_callers() -> None:
    """Thirty callers at ``Rate(10, 0.5)``, default margin: at most 10 (+1) arrivals in any
    half second of the server's log, and the quota used: at least ``count * elapsed /
    (seconds + margin)`` less one window."""
    limiter = LocalLimiter([RATE])
    with ArrivalServer() as server:
        # each caller's request is its own: coalescing would merge the identical calls
        async with Client(base_url=server.base_url, limiter=limiter, coalesce=False) as client:
            failed = await hammer(client, CALLERS, RUN)
        arrivals = server.arrivals
    unstamped = [i for i, arrival in enumerate(arrivals) if not arrival.kernel]
    assert not unstamped, f"not stamped by the kernel: {unstamped} of {len(arrivals)}"
    landed = [arrival.time for arrival in arrivals]
    assert failed == 0
    story = timeline(landed)
    assert most_in_any_window(landed, RATE.seconds) <= RATE.count + 1, story
    assert len(landed) >= throughput_floor(RATE, limiter.margin, landed), story
    assert len(landed) >= 3 * RATE.count, story  # the run spanned several windows
