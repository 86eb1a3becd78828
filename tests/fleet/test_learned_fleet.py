"""A fleet of processes on one RedisLimiter learns the quota a server advertises, as one.

Four worker processes (tests/_learning_worker.py) share a RedisLimiter without rates; the
living fake counts where requests land (its record of each request, by quota window). The
quota changes twice while they run (raised, then lowered below what was used) and a fifth
process joins late: the fleet sees at most one 429 per change and none otherwise, and uses
at least 90 % of the quota.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from asyncapi_client.testing import FakeExchange, FakeServer, Quota
from tests._env import worker_env

pytestmark = pytest.mark.waits  # seconds of windows and processes: see tests/_schedule.py

pytest_plugins = ("tests._redis",)

ROOT = Path(__file__).resolve().parent.parent.parent
WINDOW = 2.0
FIRST, RAISED, LOWERED = 20, 30, 12
CALLERS = 15  # per process
#: Every process must have started within this (s), on a loaded machine too.
START_TIMEOUT = 60.0
EXCHANGE = FakeExchange.generate(seed=41, users=1, orders_per_user=1)


async def _worker() -> asyncio.subprocess.Process:
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "tests._learning_worker",
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        cwd=ROOT,
        env=worker_env(PYTHONPATH=str(ROOT)),
    )
    assert proc.stdout is not None
    line = await asyncio.wait_for(proc.stdout.readline(), START_TIMEOUT)
    assert line == b"ready\n", "a worker failed to start"
    return proc


async def _result(proc: asyncio.subprocess.Process, bound: float) -> dict[str, Any]:
    assert proc.stdout is not None
    line = await asyncio.wait_for(proc.stdout.readline(), bound)
    await asyncio.wait_for(proc.wait(), bound)
    return dict(json.loads(line))


async def _at(when: float) -> None:
    """Wait for a point of the run's timeline (a schedule, not a synchronisation)."""
    await asyncio.sleep(max(0.0, when - time.monotonic()))


async def test_a_fleet_learns_its_quota_and_follows_its_changes(redis_url: str) -> None:
    quota = Quota(FIRST, WINDOW)
    async with FakeServer(EXCHANGE, quota=quota, rate_limit_headers="ietf") as server:
        procs = list(await asyncio.gather(*(_worker() for _ in range(5))))
        try:
            index = server.quota_window(time.monotonic())
            assert index is not None
            assert server.started_at is not None
            first = index + 1  # the first window counted: the fleet starts in the one before
            begins = server.started_at  # when window 0 began

            def window(k: int, into: float = 0.0) -> float:
                return begins + (k + into) * WINDOW

            start, end = window(first - 1, 0.5), window(first + 8)
            for number, proc in enumerate(procs):
                late = number == 4
                config = {
                    "base_url": server.base_url,
                    "redis_url": redis_url,
                    "name": "learning-fleet",
                    "callers": CALLERS,
                    "worker": number,
                    "start": window(first + 4, 0.3) if late else start,
                    "end": end,
                }
                assert proc.stdin is not None
                proc.stdin.write(json.dumps(config).encode() + b"\n")
                await proc.stdin.drain()
            await _at(window(first + 2, 0.5))
            server.quota = Quota(RAISED, WINDOW)
            await _at(window(first + 5, 0.6))
            server.quota = Quota(LOWERED, WINDOW)
            results = [await _result(proc, end - time.monotonic() + 30.0) for proc in procs]
        finally:
            for proc in procs:
                if proc.returncode is None:
                    proc.kill()
                    await proc.wait()
    assert [result["errors"] for result in results] == [{}] * 5, results
    counted = range(first, first + 8)
    landed = [
        (server.quota_window(r.time), r.status, r.headers["X-Worker"]) for r in server.requests
    ]
    answered = Counter(window for window, status, _ in landed if status == 200)
    refused = [
        window - first for window, status, _ in landed if status == 429 and window is not None
    ]
    refused = [k for k in refused if k >= 0]
    assert [k for k in refused if k < 2] == []  # the steady state: none
    assert len([k for k in refused if 2 <= k < 5]) <= 1  # the raise
    assert len([k for k in refused if k >= 5]) <= 1  # the lowering
    assert 4 not in refused  # the late process joined: no burst
    limits = [FIRST] * 2 + [RAISED] * 3 + [LOWERED] * 3
    used = [answered[k] for k in counted]
    assert sum(used) >= 0.9 * sum(limits), (used, limits)
    assert any(worker == "4" for _, _, worker in landed), "the late process sent nothing"
