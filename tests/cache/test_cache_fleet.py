"""A fleet of real processes behind one RedisCache, counted by the fake exchange's own log.

Four worker processes (tests/_cache_worker.py), each with its own event loop, Client and
RedisCache on the same Redis and name, start together and ask for the same keys: the server
sees one request per key, and every key the cache wrote in Redis expires.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections import Counter
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from asyncapi_client.testing import FakeExchange, FakeServer
from tests._env import worker_env
from tests._rediscache import keys_and_ttls, until_waiting

if TYPE_CHECKING:
    from tests._redis import RedisServer

pytest_plugins = ("tests._redis",)

ROOT = Path(__file__).resolve().parents[2]
WORKERS = 4
TOKENS = 5
#: A run's bound (a loaded machine is slow, but nothing may hang).
RUN_TIMEOUT = 60.0


@pytest.fixture
async def server() -> AsyncIterator[FakeServer]:
    async with FakeServer(FakeExchange.generate(seed=21)) as started:
        yield started


@pytest.fixture(scope="module")
def workers() -> Iterator[list[subprocess.Popen[str]]]:
    """The worker processes, started once for the module (start-up is the slow part)."""
    env = worker_env(PYTHONPATH=str(ROOT))
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "tests._cache_worker"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            cwd=ROOT,
            env=env,
            text=True,
        )
        for _ in range(WORKERS)
    ]
    try:
        for proc in procs:
            assert proc.stdout is not None
            assert proc.stdout.readline() == "ready\n", "a worker failed to start"
        yield procs
    finally:
        for proc in procs:
            if proc.stdin is not None:
                proc.stdin.close()
        for proc in procs:
            try:
                proc.wait(timeout=RUN_TIMEOUT)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            if proc.stdout is not None:
                proc.stdout.close()


def start(procs: list[subprocess.Popen[str]], config: dict[str, Any]) -> None:
    for proc in procs:
        assert proc.stdin is not None
        proc.stdin.write(json.dumps(config) + "\n")
        proc.stdin.flush()


async def reports(procs: list[subprocess.Popen[str]]) -> list[dict[str, Any]]:
    async with asyncio.timeout(RUN_TIMEOUT):
        # read in threads: this loop serves the fake exchange meanwhile
        lines = await asyncio.gather(
            *(asyncio.to_thread(proc.stdout.readline) for proc in procs if proc.stdout)
        )
    return [json.loads(line) for line in lines]


async def test_processes_that_start_together_send_one_request_per_key(
    server: FakeServer, redis_url: str, workers: list[subprocess.Popen[str]]
) -> None:
    tokens = [t["address"] for t in server.exchange.tokens[:TOKENS]]
    keys = 1 + TOKENS
    config = {
        "redis": redis_url,
        "name": "fleet",
        "base_url": server.base_url,
        "testnet_base_url": server.testnet_base_url,
        "tokens": tokens,
        "timeout": 30.0,
    }
    with server.gate("*") as gate:
        start(workers, config)
        await gate.arrived(keys)  # one fetcher per key...
        await until_waiting(redis_url, keys * (WORKERS - 1))  # ...and every other one waits
        gate.release()
        done = await reports(workers)
    per_path = Counter(r.path for r in server.requests)
    assert len(per_path) == keys
    assert set(per_path.values()) == {1}, per_path
    assert all(not d["errors"] and d["tasks_left"] == 0 for d in done), done
    states = sum((Counter(d["states"]) for d in done), Counter())
    assert states == {"miss": keys, "hit": keys * (WORKERS - 1)}
    ttls = await keys_and_ttls(redis_url)
    assert len(ttls) >= keys
    assert all(ttl > 0 for ttl in ttls.values()), ttls

    # The same fleet again: every answer is a hit, and no request is sent.
    start(workers, config)
    again = await reports(workers)
    assert sum((Counter(d["states"]) for d in again), Counter()) == {"hit": keys * WORKERS}
    assert len(server.requests) == keys


async def test_with_redis_killed_the_fleet_is_still_answered(
    server: FakeServer, own_redis: RedisServer, workers: list[subprocess.Popen[str]]
) -> None:
    tokens = [t["address"] for t in server.exchange.tokens[:TOKENS]]
    keys = 1 + TOKENS
    config = {
        "redis": own_redis.url,
        "name": "fleet",
        "base_url": server.base_url,
        "testnet_base_url": server.testnet_base_url,
        "tokens": tokens,
        "timeout": 10.0,
    }
    start(workers, config)
    before = await reports(workers)
    assert all(not d["errors"] for d in before), before
    own_redis.kill()
    server.requests.clear()
    start(workers, config)
    after = await reports(workers)
    assert all(not d["errors"] and d["tasks_left"] == 0 for d in after), after
    states = sum((Counter(d["states"]) for d in after), Counter())
    assert states == {"miss": keys * WORKERS}  # each went to the server as if uncached
    assert len(server.requests) == keys * WORKERS
    assert {r.status for r in server.requests} == {200}
