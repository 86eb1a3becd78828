"""A RedisLimiter in a child forked after the parent used it: the child talks to Redis over
connections of its own (even when the fork landed while another thread of the parent was
setting up a loop's client), and the parent's go on working."""

from __future__ import annotations

import asyncio
import os

import pytest

from asyncapi_client import Network, Rate
from asyncapi_client.fleet import RedisLimiter
from tests._fork import Outcome, in_forked_child

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork (POSIX)")
pytest_plugins = ("tests._redis",)

MAIN = Network.MAINNET


def test_a_redis_limiter_works_in_a_forked_child_and_still_in_the_parent(redis_url: str) -> None:
    limiter = RedisLimiter(redis_url, [Rate(1000, 1.0)], name="forked")
    loop = asyncio.new_event_loop()  # the parent's loop, with its connection to Redis
    try:
        assert loop.run_until_complete(limiter.acquire("pool", MAIN)).reserved

        def ask() -> Outcome:
            admission = asyncio.run(limiter.acquire("pool", MAIN))
            return {"reserved": admission.reserved}

        with limiter._loops._lock:  # held by a thread of the parent at the fork
            outcome = in_forked_child(ask)
        assert outcome == {"reserved": True}
        assert loop.run_until_complete(limiter.acquire("pool", MAIN)).reserved
        loop.run_until_complete(limiter.aclose())
    finally:
        loop.run_until_complete(loop.shutdown_asyncgens())
        loop.close()
