"""A client learns a quota it was not told from the living fake's rate-limit headers, in each of
the three header families: after the first window no request is refused, and the quota is used,
counted where the requests land (the fake's own record of what it answered, in which window)."""

from __future__ import annotations

import asyncio
import itertools
import math
import time
from collections import Counter

import pytest

from asyncapi_client import Client, LocalLimiter
from asyncapi_client.testing import FakeExchange, FakeServer, Quota

LIMIT = 30
WINDOW = 2.0
WINDOWS = 3  # full windows measured after the first
CALLERS = 60
EXCHANGE = FakeExchange.generate(seed=37, users=1, orders_per_user=1)


async def _callers(client: Client, until: float) -> None:
    """60 callers, each calling again as soon as its call returns, until ``until``; every
    call a different request (identical GETs in flight would be one request)."""
    ids = itertools.count()

    async def caller() -> None:
        while time.monotonic() < until:
            await client.tokens(search=f"q{next(ids)}")

    tasks = [asyncio.create_task(caller()) for _ in range(CALLERS)]
    try:
        # a caller waiting for its slot past the end is not waited for
        await asyncio.wait(tasks, timeout=until - time.monotonic())
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


@pytest.mark.parametrize(
    ("family", "own"),
    [("ietf", False), ("split", False), ("x", False), ("ietf", True)],
    ids=["ietf", "split", "x", "ietf-LocalLimiter([])"],
)
@pytest.mark.waits
async def test_a_quota_learned_from_the_headers_is_used_without_a_429(
    family: str, own: bool
) -> None:
    async with (
        FakeServer(
            EXCHANGE,
            quota=Quota(LIMIT, WINDOW),
            rate_limit_headers=family,  # type: ignore[arg-type]
        ) as server,
        Client(
            base_url=server.base_url, timeout=5.0, limiter=LocalLimiter([]) if own else None
        ) as client,
    ):
        now = time.monotonic()
        first = server.quota_window(now)
        assert first is not None
        # to the end of the first window, then WINDOWS more
        assert server.started_at is not None
        await _callers(client, server.started_at + (first + 1 + WINDOWS) * WINDOW)
        landed = [(server.quota_window(r.time), r.status) for r in server.requests]
    full = range(first + 1, first + 1 + WINDOWS)
    refused = [window for window, status in landed if status == 429 and window in full]
    assert refused == []
    answered = Counter(window for window, status in landed if status == 200)
    used = [answered[window] for window in full]
    assert sum(used) >= math.ceil(0.9 * LIMIT * WINDOWS), used
    assert max(used) <= LIMIT  # the fake's own count agrees with ours
