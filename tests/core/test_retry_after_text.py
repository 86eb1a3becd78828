"""A ``Retry-After`` as the server sent it: shown in messages, and an HTTP date read
against the answer's own ``Date``.

The fake exchange stamps each request as it arrives: waits are measured there.
"""

from __future__ import annotations

import email.utils
import time
from collections.abc import AsyncIterator

import pytest

from asyncapi_client import Client, RateLimitError, RequestTimeoutError, StatusError
from asyncapi_client.testing import FakeExchange, FakeServer, Reply

FAR = "Fri, 31 Dec 9999 23:59:59 GMT"


@pytest.fixture
async def server() -> AsyncIterator[FakeServer]:
    async with FakeServer(FakeExchange.generate(seed=3)) as srv:
        yield srv


@pytest.mark.parametrize("status", [429, 503])
async def test_a_far_http_date_is_named_as_sent(server: FakeServer, status: int) -> None:
    server.script("tokens", Reply(status, headers={"Retry-After": FAR}, json={"e": "x"}))
    async with Client(base_url=server.base_url, retry_after_cap=1.0) as client:
        with pytest.raises(StatusError) as caught:
            await client.tokens()
    message = str(caught.value)
    assert f"the server sent Retry-After: {FAR}, longer than retry_after_cap=1s" in message
    assert "wait 2" not in message  # no count of seconds to the year 9999


async def test_the_hold_of_a_far_http_date_is_named_as_sent(server: FakeServer) -> None:
    server.script("tokens", Reply(429, headers={"Retry-After": FAR}, json={"e": "x"}))
    async with Client(base_url=server.base_url, retry_after_cap=30.0) as client:
        with pytest.raises(RateLimitError) as first:
            await client.tokens()
        with pytest.raises(RequestTimeoutError) as held:
            await client.tokens(deadline=0.5)  # the 30 s hold is on: refused at once
    assert f"the server sent Retry-After: {FAR}," in str(first.value)
    assert f"a 429 hold (the server sent Retry-After: {FAR})" in str(held.value)
    assert len(server.requests) == 1


@pytest.mark.parametrize("status", [429, 503])
async def test_an_http_date_is_read_against_the_answers_date(
    server: FakeServer, status: int
) -> None:
    """A server whose clock runs 120 s ahead asks for one second: one second is waited."""
    ahead = int(time.time()) + 120
    headers = {
        "Date": email.utils.formatdate(ahead, usegmt=True),
        "Retry-After": email.utils.formatdate(ahead + 1, usegmt=True),
    }
    server.script("tokens", Reply(status, headers=headers, json={"e": "x"}))
    async with Client(base_url=server.base_url, max_retries=1) as client:
        await client.tokens()
    first, second = server.requests
    assert first.answered_at is not None
    waited = second.time - first.answered_at
    assert 1.0 - 0.05 <= waited < 1.0 + 0.5, waited


async def test_the_429s_retry_after_is_read_against_its_date(server: FakeServer) -> None:
    ahead = int(time.time()) + 120
    headers = {
        "Date": email.utils.formatdate(ahead, usegmt=True),
        "Retry-After": email.utils.formatdate(ahead + 5, usegmt=True),
    }
    server.script("tokens", Reply(429, headers=headers, json={"e": "x"}))
    async with Client(base_url=server.base_url, max_retries=0) as client:
        with pytest.raises(RateLimitError) as caught:
            await client.tokens()
        await client.limiter.clear_hold()
    assert caught.value.retry_after == 5.0
    assert "retry_after_cap" not in str(caught.value)
