"""What the RedisCache tests share: a client on the fake exchange, the keys the cache writes,
a Redis frozen for a while (SIGSTOP), and a fleet member in a process of its own
(tests/_cache_worker.py) to kill with SIGKILL."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import redis.asyncio as aredis

from asyncapi_client import Client
from asyncapi_client.fleet import RedisCache
from asyncapi_client.testing import FakeServer
from tests._env import worker_env

if TYPE_CHECKING:
    from tests._redis import RedisServer

__all__ = [
    "WAIT",
    "client_for",
    "entry_key",
    "frozen",
    "report",
    "run_in",
    "until_waiting",
    "worker",
]

ROOT = Path(__file__).resolve().parent.parent
#: How long a condition may take to hold on a loaded machine (a bound, not a pace).
WAIT = 30.0


def client_for(server: FakeServer, cache: RedisCache, **options: Any) -> Client:
    """A client of ``server`` through ``cache``, without retries unless asked."""
    options.setdefault("max_retries", 0)
    return Client(
        base_url=server.base_url, testnet_base_url=server.testnet_base_url, cache=cache, **options
    )


def entry_key(name: str, server: FakeServer, path: str = "/api/tokens") -> str:
    """The Redis key of the entry of ``path`` on ``server``'s mainnet, cache ``name``."""
    return f"asyncapi_client:cache:{{{name}}}:e:mainnet {server.base_url}{path}"


async def until_waiting(url: str, count: int) -> None:
    """Until ``count`` callers are registered as waiting for a fetch (a bounded poll of
    Redis: nothing there notifies the test)."""
    redis = aredis.Redis.from_url(url)
    try:
        async with asyncio.timeout(WAIT):
            while True:
                waiting = 0
                async for key in redis.scan_iter(match="asyncapi_client:cache:*:w:*"):
                    waiting += await redis.llen(key)
                if waiting >= count:
                    return
                await asyncio.sleep(0.005)
    finally:
        await redis.aclose()


@contextlib.contextmanager
def frozen(server: RedisServer) -> Iterator[None]:
    """Redis stopped (SIGSTOP: it holds its connections and answers nothing), then let go."""
    assert server.process is not None
    pid = server.process.pid
    os.kill(pid, signal.SIGSTOP)
    try:
        yield
    finally:
        os.kill(pid, signal.SIGCONT)


@contextlib.contextmanager
def worker(prelude: Sequence[str] = ()) -> Iterator[subprocess.Popen[str]]:
    """A fleet member (tests/_cache_worker.py) in a process of its own, ready for a config
    line; ``prelude``: Python statements run in it first. Killed by PID at the end."""
    run = "runpy.run_module('tests._cache_worker', run_name='__main__')"
    code = "; ".join([*prelude, "import runpy", run])
    proc = subprocess.Popen(
        [sys.executable, "-c", code],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        cwd=ROOT,
        env=worker_env(PYTHONPATH=str(ROOT)),
        text=True,
    )
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline() == "ready\n", "the worker failed to start"
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=WAIT)
        for stream in (proc.stdin, proc.stdout):
            if stream is not None:
                stream.close()


def run_in(proc: subprocess.Popen[str], config: dict[str, Any]) -> None:
    """Start one run of the worker ``proc`` with ``config``."""
    assert proc.stdin is not None
    proc.stdin.write(json.dumps(config) + "\n")
    proc.stdin.flush()


async def report(proc: subprocess.Popen[str]) -> dict[str, Any]:
    """The report of the worker's run (read in a thread: the loop serves the fake meanwhile)."""
    assert proc.stdout is not None
    async with asyncio.timeout(WAIT):
        line = await asyncio.to_thread(proc.stdout.readline)
    result: dict[str, Any] = json.loads(line)
    return result
