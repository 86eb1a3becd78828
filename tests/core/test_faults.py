"""Fault injection on a raw socket server: what is retried, what fails at once, the size cap.

Every server answers ``Connection: close``, so its count of requests is exact. aiohttp
itself resends an idempotent request once when the connection drops before the answer's
headers (RFC 9112 section 9.3.1); tests of a reset before the headers count that resend.
"""

from __future__ import annotations

import gzip
import json
import time
import tracemalloc
from collections.abc import AsyncIterator

import aiohttp
import pytest

from asyncapi_client import (
    BadRequestError,
    Client,
    DecodeError,
    NotFoundError,
    RateLimitError,
    RequestTimeoutError,
    ResponseTooLargeError,
    ServerError,
    StatusError,
    TransportError,
)
from asyncapi_client.testing import FakeServer, Reply
from tests._checks import TraceRecorder, settled, stray_tasks
from tests._oracle import pool_json
from tests._rawserver import (
    Behaviour,
    RawServer,
    big_body,
    close,
    cut_short,
    endless_chunks,
    hang,
    reserve_port,
    reset,
    reset_mid_body,
    respond,
)

MiB = 1024 * 1024


@pytest.fixture(autouse=True)
async def _no_stray_tasks() -> AsyncIterator[None]:
    """Every test must leave no task of ours behind."""
    yield
    assert await settled(lambda: not stray_tasks()), stray_tasks()


# --- retried, and recovered ------------------------------------------------------------------


@pytest.mark.parametrize("status", [429, 500, 502, 503, 504])
async def test_retryable_status_recovers_on_retry(status: int) -> None:
    trace = TraceRecorder()
    async with (
        RawServer([respond(status, {"error": "busy"})]) as server,
        Client(base_url=server.base_url, trace_configs=[trace.config]) as client,
    ):
        client.set_testing(True)
        pool = await client.pool("p1")
    assert pool.pool_id == "p1"
    assert server.count == 2
    assert trace.ends == [status, 200]


FAULTS: dict[str, tuple[list[Behaviour], int]] = {
    # name: (script, requests the server sees); one failed attempt of ours in each case
    "reset before the answer": ([reset()], 2),
    "closed before the answer": ([close()], 2),
    "reset in the middle of the body": ([reset_mid_body()], 2),
    "body shorter than its Content-Length": ([cut_short(announced=1000)], 2),
    "no answer within the attempt timeout": ([hang()], 2),
    "chunked body that never ends": ([endless_chunks(every=0.02)], 2),
}


@pytest.mark.parametrize("fault", list(FAULTS))
async def test_retryable_fault_recovers_on_retry(fault: str) -> None:
    script, requests = FAULTS[fault]
    trace = TraceRecorder()
    async with (
        RawServer(script) as server,
        Client(base_url=server.base_url, timeout=0.3, trace_configs=[trace.config]) as client,
    ):
        client.set_testing(True)
        pool = await client.pool("p1")
    assert pool.pool_id == "p1"
    assert server.count == requests
    assert [start["attempt"] for start in trace.starts] == [1, 2]


async def test_refused_connection_recovers_once_the_server_listens() -> None:
    server = RawServer(sock=reserve_port(), listen=False)
    trace = TraceRecorder(on_failure=server.listen)  # listen after the first refusal
    async with server, Client(base_url=server.base_url, trace_configs=[trace.config]) as client:
        client.set_testing(True)
        pool = await client.pool("p1")
    assert pool.pool_id == "p1"
    assert isinstance(trace.failures[0], aiohttp.ClientConnectorError)
    assert trace.attempts == 2
    assert server.count == 1


# --- not retried -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("status", "error"),
    [
        (400, BadRequestError),
        (401, StatusError),
        (403, StatusError),
        (404, NotFoundError),
        (418, StatusError),
    ],
)
async def test_non_retryable_status_fails_at_once(status: int, error: type[StatusError]) -> None:
    async with (
        RawServer(default=respond(status, {"error": "no"})) as server,
        Client(base_url=server.base_url) as client,
    ):
        with pytest.raises(error) as caught:
            await client.pool("p1")
    assert caught.value.status == status
    assert server.count == 1


@pytest.mark.parametrize(
    ("body", "path"),
    [(b"<html>not json</html>", None), (json.dumps({**pool_json(), "price": "x"}), "price")],
)
async def test_decode_error_fails_at_once(body: bytes | str, path: str | None) -> None:
    async with (
        RawServer(default=respond(200, body)) as server,
        Client(base_url=server.base_url) as client,
    ):
        with pytest.raises(DecodeError) as caught:
            await client.pool("p1")
    assert caught.value.path == path
    assert server.count == 1


async def test_response_too_large_fails_at_once() -> None:
    async with (
        RawServer(default=respond(200, pool_json() | {"pad": "x" * 5000})) as server,
        Client(base_url=server.base_url, max_response_bytes=1000) as client,
    ):
        with pytest.raises(ResponseTooLargeError):
            await client.pool("p1")
    assert server.count == 1


# --- the error after the last attempt ----------------------------------------------------------


async def test_last_status_seen_is_raised_after_the_last_attempt() -> None:
    script = [respond(status) for status in (500, 502, 503, 504)]
    async with (
        RawServer(script) as server,
        Client(base_url=server.base_url, max_retries=3) as client,
    ):
        client.set_testing(True)
        with pytest.raises(ServerError) as caught:
            await client.pool("p1")
    assert caught.value.status == 504
    assert server.count == 4


async def test_the_last_error_tells_the_story_of_every_attempt() -> None:
    """``__cause__`` is the attempt before; the first's is aiohttp's; each wire error's
    own aiohttp exception stays on ``__context__``."""
    script = [reset_mid_body(), respond(503), respond(429), reset_mid_body()]
    async with (
        RawServer(script) as server,
        Client(base_url=server.base_url, max_retries=3) as client,
    ):
        client.set_testing(True)
        with pytest.raises(TransportError) as caught:
            await client.pool("p1")
    last = caught.value
    assert last.attempts == 4
    assert "after 4 attempts" in str(last)
    assert isinstance(last.__context__, aiohttp.ClientPayloadError)
    too_many = last.__cause__
    assert isinstance(too_many, RateLimitError)
    assert too_many.attempts == 3
    unavailable = too_many.__cause__
    assert isinstance(unavailable, ServerError)
    assert unavailable.status == 503
    first = unavailable.__cause__
    assert isinstance(first, TransportError)
    assert first.attempts == 1
    assert "attempts" not in str(first)
    assert isinstance(first.__cause__, aiohttp.ClientPayloadError)
    assert last.url == f"{server.base_url}/api/clob/pools/p1"
    assert server.count == 4


async def test_a_call_that_fails_at_once_is_one_attempt_and_says_nothing_of_attempts() -> None:
    async with (
        RawServer(default=respond(404)) as server,
        Client(base_url=server.base_url, max_retries=3) as client,
    ):
        with pytest.raises(NotFoundError) as caught:
            await client.pool("p1")
    assert caught.value.attempts == 1
    assert "attempt" not in str(caught.value)
    assert caught.value.__cause__ is None


async def test_timeout_after_the_last_attempt_is_chained_to_the_timeout() -> None:
    async with (
        RawServer(default=hang()) as server,
        Client(base_url=server.base_url, timeout=0.2, max_retries=1) as client,
    ):
        client.set_testing(True)
        started = time.perf_counter()
        with pytest.raises(RequestTimeoutError) as caught:
            await client.pool("p1")
        elapsed = time.perf_counter() - started
    assert isinstance(caught.value, TimeoutError)
    assert caught.value.attempts == 2
    assert isinstance(caught.value.__context__, TimeoutError)
    assert isinstance(caught.value.__cause__, RequestTimeoutError)
    assert isinstance(caught.value.__cause__.__cause__, TimeoutError)
    assert server.count == 2
    assert 0.4 <= elapsed < 2.0


async def test_refused_after_the_last_attempt_is_chained_to_the_connector_error() -> None:
    sock = reserve_port()  # bound, never listening: every connection is refused
    port = sock.getsockname()[1]
    trace = TraceRecorder()
    try:
        async with Client(
            base_url=f"http://127.0.0.1:{port}", max_retries=2, trace_configs=[trace.config]
        ) as client:
            client.set_testing(True)
            with pytest.raises(TransportError, match="could not connect") as caught:
                await client.pool("p1")
    finally:
        sock.close()
    assert isinstance(caught.value.__context__, aiohttp.ClientConnectorError)
    assert isinstance(caught.value.__cause__, TransportError)
    assert "after 3 attempts" in str(caught.value)
    assert trace.attempts == 3


async def test_retry_after_beyond_the_cap_is_not_waited_for() -> None:
    async with (
        RawServer(default=respond(429, headers={"Retry-After": "120"})) as server,
        Client(base_url=server.base_url) as client,
    ):
        started = time.perf_counter()
        with pytest.raises(RateLimitError) as caught:
            await client.pool("p1")
        elapsed = time.perf_counter() - started
    assert caught.value.retry_after == 120
    assert "longer than retry_after_cap=60s: not waited for" in str(caught.value)
    assert server.count == 1
    assert elapsed < 1.0


async def test_retry_after_cap_is_the_clients_setting() -> None:
    script = [respond(503, headers={"Retry-After": "0.3"})]
    async with (
        RawServer(script) as server,
        Client(base_url=server.base_url, retry_after_cap=0.2) as client,
    ):
        with pytest.raises(ServerError, match=r"retry_after_cap=0.2s") as caught:
            await client.pool("p1")
    assert caught.value.attempts == 1
    assert server.count == 1


# --- the size cap ------------------------------------------------------------------------------


async def _peak_while(client: Client) -> tuple[ResponseTooLargeError, int]:
    """The error of ``client.pool`` and the peak growth of traced memory meanwhile."""
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        with pytest.raises(ResponseTooLargeError) as caught:
            await client.pool("p1")
        peak = tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()
    return caught.value, peak


async def test_a_chunked_body_under_the_cap_is_read_whole() -> None:
    body = pool_json() | {"pad": "x" * 5000}
    async with (
        RawServer(default=respond(200, body, chunked=True)) as server,
        Client(base_url=server.base_url, max_response_bytes=len(json.dumps(body))) as client,
    ):
        pool = await client.pool("p1")
    assert pool.pool_id == "p1"
    assert server.count == 1


async def test_a_compressed_body_is_capped_by_what_it_decompresses_to(server: FakeServer) -> None:
    """A Content-Length counts compressed bytes: a 40 KiB gzip body of 40 MiB (a zip bomb)
    is refused while it grows past the cap, and a small one is read as usual."""
    small = json.dumps(pool_json(pool_id="p1")).encode()
    bomb = gzip.compress(small[:-1] + b',"pad":"' + b"0" * (40 * MiB) + b'"}', 9)
    gz = {"Content-Encoding": "gzip"}
    server.script(
        "pool", Reply(body=gzip.compress(small), headers=gz), Reply(body=bomb, headers=gz)
    )
    async with Client(base_url=server.base_url, max_response_bytes=MiB) as client:
        pool = await client.pool("p1")
        error, peak = await _peak_while(client)
    assert pool.pool_id == "p1"
    assert len(bomb) < MiB  # under the cap as sent: only the decompressed size is over
    assert "it kept growing" in str(error)
    assert error.limit == MiB
    assert peak < 4 * MiB, peak
    assert len(server.requests) == 2  # refused, not retried


@pytest.mark.parametrize(
    ("announce", "cap", "peak_limit"),
    [
        (True, 32 * MiB, 4 * MiB),  # refused from the header: nothing of the body is read
        (False, 4 * MiB, 8 * MiB),  # chunked: refused as soon as it passes the cap
        (False, 32 * MiB, 40 * MiB),  # the default cap itself is what a body may take
    ],
    ids=["content-length, default cap", "chunked, 4 MiB cap", "chunked, default cap"],
)
async def test_a_64_mib_body_is_refused_without_reading_it_all(
    announce: bool, cap: int, peak_limit: int
) -> None:
    async with (
        RawServer(default=big_body(64 * MiB, announce=announce)) as server,
        Client(base_url=server.base_url, max_response_bytes=cap) as client,
    ):
        error, peak = await _peak_while(client)
    assert f"max_response_bytes={cap}" in str(error)
    assert "pass a larger max_response_bytes= to Client" in str(error)
    assert error.limit == cap
    assert server.count == 1  # never retried
    sent = server.conns[0].sent
    assert sent < 64 * MiB, sent  # the server never got to send it all
    assert peak < peak_limit, peak
    print(f"announce={announce} cap={cap // MiB} MiB: sent {sent} bytes, peak {peak} bytes")
