"""The attempt timeout on one timer per client (asyncapi_client/_timeouts.py).

What a user relies on: every attempt ends by ``timeout`` seconds after it began, whatever
the other attempts in flight are doing, redirects and all; a cancellation of the caller's
own is never mistaken for a timeout; nothing is left on the loop once the client closes.
"""

from __future__ import annotations

import asyncio
import contextlib
import selectors
import time
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest

from asyncapi_client import Client, Pool, RequestTimeoutError, TransportError
from asyncapi_client._timeouts import AttemptTimer
from tests._checks import nested_call
from tests._oracle import pool_json
from tests._rawserver import RawServer, hang, respond

#: What a timeout may overrun on this shared machine (loop latency, a busy core).
SLACK = 0.5


def sent_hook() -> tuple[aiohttp.TraceConfig, asyncio.Event]:
    """A trace config whose event is set once a request's headers are sent."""
    sent = asyncio.Event()

    async def on_sent(*_: object) -> None:
        sent.set()

    config = aiohttp.TraceConfig()
    config.on_request_headers_sent.append(on_sent)
    return config, sent


async def timed_pool(client: Client, pool_id: str = "p1") -> float:
    """Seconds until ``client.pool`` raised RequestTimeoutError (it must)."""
    started = time.monotonic()
    with pytest.raises(RequestTimeoutError, match="timed out"):
        await client.pool(pool_id)
    return time.monotonic() - started


async def test_redirects_share_one_attempts_timeout() -> None:
    # Three hops of 0.15 s each: within 0.3 s one by one (aiohttp's timer per request
    # allowed that), past it for the one attempt they make together.
    hop = respond(302, b"", headers={"Location": "/api/clob/pools/p1"}, delay=0.15)
    async with (
        RawServer([hop, hop, hop], default=respond(200, pool_json())) as server,
        Client(base_url=server.base_url, timeout=0.3, max_retries=0) as client,
    ):
        elapsed = await timed_pool(client)
    assert 0.3 <= elapsed < 0.3 + SLACK
    assert server.count == 2  # the third hop was never asked for

    async with (
        RawServer([hop, hop, hop], default=respond(200, pool_json())) as server,
        Client(base_url=server.base_url, timeout=2.0, max_retries=0) as client,
    ):
        assert (await client.pool("p1")).pool_id == "p1"
    assert server.count == 4


async def test_an_attempt_begun_later_has_its_whole_timeout() -> None:
    # The one timer is set for the first attempt; a later attempt must not end with it.
    timeout = 0.4
    async with (
        RawServer([respond(200, pool_json())], default=hang()) as server,
        Client(base_url=server.base_url, timeout=timeout, max_retries=0) as client,
    ):
        assert (await client.pool("p1")).pool_id == "p1"
        await asyncio.sleep(timeout / 2)  # the scenario: the next call begins later
        elapsed = await timed_pool(client)
    assert timeout <= elapsed < timeout + SLACK
    assert server.count == 2


async def test_attempts_in_flight_each_end_at_their_own_timeout() -> None:
    # Staggered starts: each attempt ends `timeout` after its own start, not the first's.
    timeout, calls = 0.3, 12
    async with (
        RawServer(default=hang()) as server,
        Client(base_url=server.base_url, timeout=timeout, max_retries=0) as client,
    ):

        async def one(index: int) -> float:
            await asyncio.sleep(index * 0.02)  # the scenario: calls begin 20 ms apart
            return await timed_pool(client, f"p{index}")

        elapsed = await asyncio.gather(*(one(i) for i in range(calls)))
    assert all(timeout <= e < timeout + SLACK for e in elapsed), elapsed
    assert server.count == calls


@contextlib.asynccontextmanager
async def call_in_flight(**options: Any) -> AsyncIterator[tuple[Client, asyncio.Task[Pool]]]:
    """A client of a server that never answers, and its ``pool()`` call, once in flight."""
    config, sent = sent_hook()
    async with (
        RawServer(default=hang()) as server,
        Client(
            base_url=server.base_url, max_retries=0, trace_configs=[config], **options
        ) as client,
    ):
        task = asyncio.create_task(client.pool("p1"))
        async with asyncio.timeout(5):
            await sent.wait()
        yield client, task


async def test_the_callers_cancellation_propagates_and_is_not_a_timeout() -> None:
    async with call_in_flight(timeout=30.0) as (_, task):
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    assert task.cancelled()


async def test_a_cancellation_landing_with_the_timeout_still_propagates() -> None:
    # The timer cancels the task; before the task runs again, its owner cancels it too. As
    # with asyncio.timeout(), the owner's cancellation wins: CancelledError, not a timeout.
    timer = AttemptTimer(0.01)
    waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    seen: list[bool] = []

    async def one_attempt() -> None:
        attempt = timer.start()
        try:
            await waiter
        except asyncio.CancelledError:
            seen.append(timer.expired(attempt))
            raise
        finally:
            timer.end(attempt)

    task = asyncio.create_task(one_attempt())
    # Runs in the same turn as the task's own wake-up, just before it (added first).
    waiter.add_done_callback(lambda _: task.cancel())
    with pytest.raises(asyncio.CancelledError):
        await task
    assert seen == [False]
    assert task.cancelled()
    timer.close()


async def test_a_timeout_leaves_the_task_uncancelled() -> None:
    timer = AttemptTimer(0.01)
    outcome: list[object] = []

    async def one_attempt() -> None:
        attempt = timer.start()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            outcome.append(timer.expired(attempt))
        finally:
            timer.end(attempt)
        me = asyncio.current_task()
        assert me is not None
        outcome.append(me.cancelling())
        await asyncio.sleep(0)  # no cancellation is left pending on the task

    await asyncio.create_task(one_attempt())
    assert outcome == [True, 0]
    timer.close()


async def test_no_timer_is_left_on_the_loop_once_the_client_closes() -> None:
    async with call_in_flight(timeout=30.0) as (client, task):
        timer = client._sender._timer
        assert timer is not None
        handle = timer._handle
        assert handle is not None
        assert not handle.cancelled()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await client.close()
        assert handle.cancelled()
        assert timer._handle is None


async def test_an_attempt_in_flight_at_close_keeps_its_timeout() -> None:
    # A caller's session stays open after close(): the attempt must still end on time.
    config, sent = sent_hook()
    async with (
        RawServer(default=hang()) as server,
        aiohttp.ClientSession(trace_configs=[config]) as session,
    ):
        client = Client(base_url=server.base_url, timeout=0.3, max_retries=0, session=session)
        started = time.monotonic()
        task = asyncio.create_task(client.pool("p1"))
        async with asyncio.timeout(5):
            await sent.wait()
        await client.close()
        with pytest.raises(RequestTimeoutError, match="timed out"):
            async with asyncio.timeout(5):
                await task
        assert 0.3 <= time.monotonic() - started < 0.3 + SLACK
        timer = client._sender._timer
        assert timer is not None
        assert timer._handle is None  # gone once the last attempt ended
    assert server.count == 1


@pytest.mark.parametrize("own_session", [True, False])
async def test_no_retry_is_sent_once_the_client_is_closed(own_session: bool) -> None:
    config, sent = sent_hook()
    async with (
        RawServer(default=hang()) as server,
        aiohttp.ClientSession(trace_configs=[config]) as session,
    ):
        client = Client(
            base_url=server.base_url,
            timeout=0.3,
            max_retries=3,
            session=None if own_session else session,
            trace_configs=[config] if own_session else None,
        )
        client.set_testing(True)  # no back-off
        task = asyncio.create_task(client.pool("p1"))
        async with asyncio.timeout(5):
            await sent.wait()
        await client.close()
        with pytest.raises(TransportError, match="closed during the call") as caught:
            async with asyncio.timeout(5):
                await task
        assert caught.value.attempts == 1
        assert client._sender.session is None
    assert server.count == 1


async def test_a_call_waiting_for_its_slot_at_close_sends_nothing() -> None:
    # One connection slot: the second call waits for it while the first hangs.
    async with call_in_flight(timeout=30.0, max_connections=1) as (client, first):
        second = asyncio.create_task(client.pool("p2"))
        await asyncio.sleep(0)  # the scenario: the second call is queued for the slot
        await client.close()
        for task in (first, second):
            with pytest.raises(TransportError):
                async with asyncio.timeout(5):
                    await task
        with pytest.raises(TransportError, match="closed during the call") as caught:
            second.result()
        assert caught.value.attempts == 0  # it never had its slot: nothing was sent
        assert client._sender.session is None


async def test_an_attempt_made_inside_another_of_the_same_task_keeps_both_timeouts() -> None:
    # A trace hook that makes a call of its own runs it in the task of the attempt it traces.
    nested: list[str] = []
    config = nested_call(nested, lambda: client)
    async with (
        RawServer([respond(200, pool_json())], default=hang()) as server,
        Client(
            base_url=server.base_url, timeout=0.3, max_retries=0, trace_configs=[config]
        ) as client,
    ):
        elapsed = await timed_pool(client)
    assert nested == ["asking", "p1"]  # the oracle's pool answers for any id
    assert 0.3 <= elapsed < 0.3 + SLACK


class _JumpingSelector(selectors.DefaultSelector):
    """Never sleeps: where the loop would wait, its virtual clock jumps ahead instead."""

    def __init__(self, clock: list[float]) -> None:
        super().__init__()
        self._clock = clock

    def select(self, timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:
        events = super().select(0)
        if not events and timeout:
            self._clock[0] += timeout
        return events


class _VirtualTimeLoop(asyncio.SelectorEventLoop):
    """A loop with virtual time, as test suites use: its clock is not the machine's."""

    def __init__(self) -> None:
        self._clock = [0.0]
        super().__init__(selector=_JumpingSelector(self._clock))

    def time(self) -> float:
        return self._clock[0]


def test_attempts_time_out_on_the_loops_own_clock() -> None:
    async def one_attempt() -> bool:
        timer = AttemptTimer(5.0)  # no real time at all on this loop
        attempt = timer.start()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            return timer.expired(attempt)
        finally:
            timer.end(attempt)
            timer.close()
        return False  # pragma: no cover - the wait never ends by itself

    started = time.monotonic()
    with asyncio.Runner(loop_factory=_VirtualTimeLoop) as runner:
        assert runner.run(one_attempt())
    assert time.monotonic() - started < 2.0  # not the 5 s of the machine's clock


def test_a_timeout_must_be_positive() -> None:
    with pytest.raises(ValueError, match="> 0"):
        AttemptTimer(0.0)
