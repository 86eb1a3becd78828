"""The pipeline without HTTP: a Sender of our own plugged into the Transport.

The seam :class:`asyncapi_client._request.Sender` is all the pipeline (coalescing, the
deadline, the limiter, the retry loop, the decode) sees of the aiohttp adapter.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

import pytest

from asyncapi_client import DecodeError, LocalLimiter, Network, ServerError
from asyncapi_client._errors import ApiError
from asyncapi_client._operations import TOKENS
from asyncapi_client._pipeline import Pipeline
from asyncapi_client._request import Reply, Request
from asyncapi_client._retry import RetryPolicy

BODY = b'{"tokens": []}'


class MemorySender:
    """Answers from a list: a Reply, or an ApiError to raise; records each attempt."""

    attempt_timeout = 1.0

    def __init__(self, *answers: Reply | ApiError, gate: asyncio.Event | None = None) -> None:
        self.answers = list(answers)
        self.sent: list[tuple[str, int]] = []
        self.gate = gate
        self.closed = False
        self.arrived = asyncio.Event()

    def open(self) -> None:
        return None

    def learn(self, network: Network, base: str) -> None:
        return None

    async def send(
        self, request: Request[Any], attempt: int, conditional: Mapping[str, str] | None = None
    ) -> Reply:
        self.sent.append((request.url, attempt))
        self.arrived.set()
        if self.gate is not None:
            await self.gate.wait()
        answer = self.answers.pop(0)
        if isinstance(answer, ApiError):
            raise answer
        return answer

    async def close(self) -> None:
        self.closed = True


def transport(sender: MemorySender, max_retries: int = 2) -> Pipeline:
    return Pipeline(
        sender=sender,
        retry=RetryPolicy(max_retries=max_retries, wait=False),
        max_connections=4,
        limiter=LocalLimiter(),
        deadline=None,
        coalesce=True,
    )


def tokens_request() -> Request[Any]:
    return TOKENS.request("http://x.example/api", Network.MAINNET, None, "", None)


def ok(body: bytes = BODY) -> Reply:
    return Reply(200, {"Content-Type": "application/json"}, body, "http://x.example/api/tokens")


def busy() -> ServerError:
    return ServerError("HTTP 503", status=503, url="http://x.example/api/tokens")


async def test_a_failed_attempt_is_retried_through_the_one_loop() -> None:
    sender = MemorySender(busy(), busy(), ok())
    pipeline = transport(sender)
    response = await pipeline.outcome(tokens_request())
    assert (response.value, response.status, response.attempts) == ((), 200, 3)
    assert sender.sent == [("http://x.example/api/tokens", n) for n in (1, 2, 3)]
    await pipeline.close()
    assert sender.closed


async def test_the_last_error_is_raised_with_the_story_of_the_call() -> None:
    sender = MemorySender(busy(), busy())
    pipeline = transport(sender, max_retries=1)
    with pytest.raises(ServerError) as caught:
        await pipeline.value(tokens_request())
    assert caught.value.attempts == 2
    assert isinstance(caught.value.__cause__, ServerError)


async def test_a_body_that_does_not_decode_is_final_and_names_the_url() -> None:
    sender = MemorySender(ok(b"[1"), ok())
    pipeline = transport(sender)
    with pytest.raises(DecodeError) as caught:
        await pipeline.value(tokens_request())
    assert caught.value.url == "http://x.example/api/tokens"
    assert len(sender.sent) == 1  # not retried


async def test_identical_calls_in_flight_share_one_attempt() -> None:
    gate = asyncio.Event()
    sender = MemorySender(ok(), gate=gate)
    pipeline = transport(sender)
    request = tokens_request()
    calls = [asyncio.create_task(pipeline.value(request)) for _ in range(5)]
    await sender.arrived.wait()
    gate.set()
    assert await asyncio.gather(*calls) == [()] * 5
    assert len(sender.sent) == 1
