"""Checks shared by the fault, resilience, stream and observability tests: nothing left running,
and a record of each attempt aiohttp makes."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

import aiohttp

if TYPE_CHECKING:
    from asyncapi_client import Client

__all__ = ["TraceRecorder", "assert_clean", "nested_call", "settled", "stray_tasks"]


def stray_tasks() -> set[asyncio.Task[Any]]:
    """Every task of the running loop except the current one."""
    return asyncio.all_tasks() - {asyncio.current_task()}


async def settled(condition: Callable[[], bool], turns: int = 2000) -> bool:
    """Let the loop turn until ``condition`` holds, at most ``turns`` times; return it.

    Why a loop of ``sleep(0)``: after ``break`` out of an ``async for`` (without
    ``aclosing``) the generator is closed by the event loop's asyncgen finalizer hook
    (PEP 525), which schedules ``aclose()`` as a new task on a later turn of the loop, and
    its cleanup takes a few more turns. Waiting for that is part of the contract; the
    bound keeps a leak from hanging the test.
    """
    for _ in range(turns):
        if condition():
            return True
        await asyncio.sleep(0)
    return condition()


async def assert_clean(connector: aiohttp.BaseConnector | None = None) -> None:
    """No task of ours left pending and, given a connector, no connection checked out."""

    def clean() -> bool:
        return not stray_tasks() and (connector is None or len(connector._acquired) == 0)

    await settled(clean)
    assert not stray_tasks(), f"tasks left behind: {stray_tasks()}"
    if connector is not None:
        assert len(connector._acquired) == 0, f"connections checked out: {connector._acquired}"


class TraceRecorder:
    """An aiohttp TraceConfig that records each attempt's ``trace_request_ctx`` and URL.

    ``on_failure`` (optional) is awaited when an attempt fails, before the client retries.
    """

    def __init__(self, on_failure: Callable[[], Awaitable[None]] | None = None) -> None:
        self.config = aiohttp.TraceConfig()
        self.starts: list[dict[str, Any]] = []
        self.urls: list[str] = []
        self.ends: list[int] = []
        self.failures: list[BaseException] = []
        self._on_failure = on_failure
        self.config.on_request_start.append(self._start)
        self.config.on_request_end.append(self._end)
        self.config.on_request_exception.append(self._failed)

    async def _start(
        self,
        session: aiohttp.ClientSession,
        ctx: SimpleNamespace,
        params: aiohttp.TraceRequestStartParams,
    ) -> None:
        self.starts.append(dict(ctx.trace_request_ctx))
        self.urls.append(str(params.url))

    async def _end(
        self,
        session: aiohttp.ClientSession,
        ctx: SimpleNamespace,
        params: aiohttp.TraceRequestEndParams,
    ) -> None:
        self.ends.append(params.response.status)

    async def _failed(
        self,
        session: aiohttp.ClientSession,
        ctx: SimpleNamespace,
        params: aiohttp.TraceRequestExceptionParams,
    ) -> None:
        self.failures.append(params.exception)
        if self._on_failure is not None:
            await self._on_failure()

    @property
    def attempts(self) -> int:
        return len(self.starts)


def nested_call(nested: list[str], client: Callable[[], Client]) -> aiohttp.TraceConfig:
    """A trace config whose hook, at the first request's start, makes a call of its own
    (``pool("p2")`` of ``client()``): in the task of the attempt it traces. ``nested``
    records ``"asking"``, then the pool id answered."""

    async def on_start(*_: object) -> None:
        if not nested:  # once (the nested call's own start comes here too)
            nested.append("asking")
            nested.append((await client().pool("p2")).pool_id)

    config = aiohttp.TraceConfig()
    config.on_request_start.append(on_start)
    return config
