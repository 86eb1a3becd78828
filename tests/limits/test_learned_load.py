"""A client learns a quota it was not told from the server's rate-limit headers, in each of the
three header families: after the first window no request is refused, and the quota is used,
counted where the requests land."""

from __future__ import annotations

import asyncio
import itertools
import math
import time

import pytest

from asyncapi_client import Client
from tests._quota import QuotaServer

LIMIT = 30
WINDOW = 2.0
WINDOWS = 4  # full windows measured after the first
CALLERS = 60


async def _callers(client: Client, until: float) -> None:
    """60 callers, each calling again as soon as its call returns, until ``until``."""
    ids = itertools.count()

    async def caller() -> None:
        while time.monotonic() < until:
            await client.pool(f"p{next(ids)}")

    tasks = [asyncio.create_task(caller()) for _ in range(CALLERS)]
    try:
        # a caller waiting for its slot past the end is not waited for
        await asyncio.wait(tasks, timeout=until - time.monotonic())
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


@pytest.mark.parametrize("family", ["ietf", "split", "x"])
async def test_a_quota_learned_from_the_headers_is_used_without_a_429(family: str) -> None:
    async with (
        QuotaServer(LIMIT, WINDOW, headers=family) as server,  # type: ignore[arg-type]
        Client(base_url=server.base_url, timeout=5.0) as client,
    ):
        now = time.monotonic()
        first, left = server.window_at(now)
        # to the end of the first window, then WINDOWS more
        await _callers(client, now + left + WINDOWS * WINDOW)
    full = range(first + 1, first + 1 + WINDOWS)
    refused = [each for each in server.landed if each.status == 429 and each.window in full]
    assert refused == []
    used = sum(server.answered(window) for window in full)
    assert used >= math.ceil(0.9 * LIMIT * WINDOWS), [server.answered(w) for w in full]
