"""A call that shares another call's request (coalescing) ends by its own deadline: it never
receives the error of the other call's deadline (it then fetches for itself), and raises
its own ``RequestTimeoutError`` when its own deadline passes.

The server holds every request at a gate, so "in flight at the same time" is a fact of the
test. The one wait here is the scenario itself: the second call starts later than the first.
"""

from __future__ import annotations

import asyncio
import time

import pytest

from asyncapi_client import Client, RequestTimeoutError
from asyncapi_client.testing import FakeServer

DEADLINE = 0.5
LATER = 0.25  # how much later the second call starts


async def timed(call: asyncio.Future[object]) -> tuple[BaseException | None, float]:
    started = time.monotonic()
    try:
        await call
    except Exception as exc:
        return exc, time.monotonic() - started
    return None, time.monotonic() - started


async def test_a_joined_call_is_not_handed_the_leaders_deadline_error(
    server: FakeServer, client: Client
) -> None:
    with server.gate("pool") as gate:
        leader = asyncio.ensure_future(client.pool("p1", deadline=DEADLINE))
        await gate.arrived(1)
        await asyncio.sleep(LATER)  # the scenario: the second call comes this much later
        follower = asyncio.ensure_future(
            timed(asyncio.ensure_future(client.pool("p1", deadline=DEADLINE)))
        )
        with pytest.raises(RequestTimeoutError):
            await leader
        await gate.arrived(2, timeout=5)  # the follower's own request, once the leader gave up
        error, took = await follower
    assert isinstance(error, RequestTimeoutError)
    assert "deadline of 0.5s" in str(error)
    assert took >= DEADLINE - 0.05  # its own deadline, not the leader's (LATER earlier)


async def test_a_joined_call_still_shares_an_answer_that_comes_in_time(
    server: FakeServer, client: Client
) -> None:
    with server.gate("pool") as gate:
        calls = [asyncio.ensure_future(client.pool("p1", deadline=5.0)) for _ in range(3)]
        await gate.arrived(1)
        gate.release()
        pools = await asyncio.gather(*calls)
    assert len({p.pool_id for p in pools}) == 1
    assert len([r for r in server.requests if r.operation == "pool"]) == 1
