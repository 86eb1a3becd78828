"""The fake server's threaded mode: its own loop in a thread, driven from code that is not async."""

from __future__ import annotations

import asyncio
import json
import threading
import urllib.error
import urllib.request
from typing import Any

import pytest

from asyncapi_client import Client
from asyncapi_client.testing import FakeExchange, FakeServer, Fault, Reply


def fetch(url: str) -> tuple[int, Any]:
    """A plain blocking GET: the kind of code under test that has no event loop."""
    try:
        with urllib.request.urlopen(url, timeout=30) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        with error:
            return error.code, json.loads(error.read())


def exchange() -> FakeExchange:
    return FakeExchange.generate(seed=4, users=2, pools=2, tokens=5)


def test_in_thread_serves_sync_code_and_asyncio_run() -> None:
    with FakeServer(exchange()).in_thread() as server:
        assert threading.current_thread() is threading.main_thread()
        status, body = fetch(server.base_url + "/api/tokens")
        assert (status, len(body["tokens"])) == (200, 5)
        server.script("pool", Reply(503))
        server.set_fault("user", Fault(error_rate=1.0, error_status=502))
        pool_id = next(iter(server.exchange.pools))
        assert fetch(f"{server.base_url}/api/clob/pools/{pool_id}")[0] == 503
        address = next(iter(server.exchange.users))
        assert fetch(f"{server.testnet_base_url}/api/clob/users/{address}")[0] == 502

        async def bot() -> str:  # a program that runs its own loop, as the CLI does
            async with Client(base_url=server.base_url) as client:
                return (await client.pool(pool_id)).pool_id

        assert asyncio.run(bot()) == pool_id
        assert [r.status for r in server.requests] == [200, 503, 502, 200]
        url = server.base_url + "/api/tokens"
    assert "closed" in repr(server)
    with pytest.raises(urllib.error.URLError):  # nothing listens any more
        fetch(url)


def test_a_gate_from_sync_code() -> None:
    with FakeServer(exchange()).in_thread() as server, server.gate("tokens") as gate:
        results: list[int] = []
        caller = threading.Thread(
            target=lambda: results.append(fetch(server.base_url + "/api/tokens")[0])
        )
        caller.start()
        gate.wait_arrived(1)
        assert (server.in_flight, gate.held, results) == (1, 1, [])
        gate.release()
        caller.join()
        assert results == [200]
        with pytest.raises(TimeoutError, match="1 of 2"):
            gate.wait_arrived(2, timeout=0.01)
        gate.wait_arrived(1)  # already there: returns at once


def test_in_thread_needs_a_fresh_server() -> None:
    server = FakeServer(exchange())
    with server.in_thread():
        pass
    with pytest.raises(RuntimeError, match="never started"), server.in_thread():
        pass


def test_a_failed_start_ends_the_thread() -> None:
    with FakeServer(exchange()).in_thread() as first:
        taken = first.port
        before = threading.active_count()
        with pytest.raises(OSError), FakeServer(exchange(), port=taken).in_thread():
            pass  # pragma: no cover - the port is taken
        assert threading.active_count() == before


async def test_wait_until_from_another_loop_while_the_server_runs_in_a_thread() -> None:
    with FakeServer(exchange()).in_thread() as server, server.gate("tokens") as gate:
        async with Client(base_url=server.base_url) as client:
            call = asyncio.ensure_future(client.tokens())
            await server.wait_until(lambda: server.in_flight == 1)
            gate.release()
            await server.wait_until(lambda: server.requests[0].status == 200)
            assert len(await call) == 5
