"""A LocalLimiter in a child forked while another thread of the parent was inside it (a
SyncClient's loop asking for a slot, say): the child's copy still answers."""

from __future__ import annotations

import asyncio
import os

import pytest

from asyncapi_client import LocalLimiter, Network, Rate
from tests._fork import Outcome, in_forked_child

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork (POSIX)")


def test_a_limiter_busy_at_the_fork_answers_in_the_child() -> None:
    limiter = LocalLimiter([Rate(5, 1.0)], learn=False)
    asyncio.run(limiter.acquire("pool", Network.MAINNET))

    def ask() -> Outcome:
        admission = asyncio.run(limiter.acquire("pool", Network.MAINNET))
        return {"wait": admission.wait, "reserved": admission.reserved}

    # the fork lands while the limiter's state is being updated (its lock held), as when a
    # SyncClient's loop thread asks for a slot at that moment; no thread of the child will
    # ever let go of it
    with limiter._lock:
        outcome = in_forked_child(ask)
    assert outcome["reserved"] is True
    assert 0.0 <= outcome["wait"] <= limiter.margin  # at most the pacing after the first
    # the parent's is untouched
    assert asyncio.run(limiter.acquire("pool", Network.MAINNET)).reserved
