"""Shared by the fleet-watch tests and benchmark: the fake exchange's orders edited as a
user's orders change, and worker processes (tests/_fleet_watch_worker.py) that each watch the same
addresses through a ``RedisWatchState`` of their own and report every change they receive.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import json
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

import redis

from asyncapi_client.testing import FakeExchange

__all__ = [
    "OPEN",
    "WatchWorker",
    "add_order",
    "expiries",
    "move",
    "sync_profiles",
]

ROOT = Path(__file__).resolve().parent.parent
OPEN = ("OPEN", "PARTIALLY_FILLED")
#: Nothing a worker is waited for may take longer than this (s): a loaded machine is slow,
#: but nothing may hang.
WAIT = 30.0


def sync_profiles(exchange: FakeExchange) -> None:
    """Every profile lists exactly its user's open and partly filled orders, newest first."""
    for address, orders in exchange.orders.items():
        exchange.users[address]["orders"] = [o for o in orders if o["status"] in OPEN]


def add_order(exchange: FakeExchange, address: str, tx: str) -> dict[str, Any]:
    """A new open order of ``address``, first in its list."""
    order = copy.deepcopy(exchange.orders[address][0])
    order.update(transactionId=tx, status="OPEN", filledSize="0")
    exchange.orders[address].insert(0, order)
    sync_profiles(exchange)
    return order


def move(exchange: FakeExchange, order: dict[str, Any], status: str) -> None:
    """``order`` reaches ``status`` (partly filled: one unit; filled: its whole size)."""
    order["status"] = status
    if status == "PARTIALLY_FILLED":
        order["filledSize"] = "1"
    elif status == "FILLED":
        order["filledSize"] = order["size"]
    sync_profiles(exchange)


def expiries(url: str) -> dict[str, int]:
    """Every key in the Redis at ``url`` and its time to live (ms; -1: none)."""
    client = redis.Redis.from_url(url)
    try:
        return {key.decode(): int(client.pttl(key)) for key in client.scan_iter(count=1000)}
    finally:
        client.close()


class WatchWorker:
    """One worker process: it watches ``addresses`` with its own Client (``X-Worker:
    worker`` on every request) and ``RedisWatchState(consumer=consumer)``, and prints one
    JSON line per change it receives and per log record of the library; ``events`` holds
    them as they come (a thread reads them)."""

    def __init__(self, worker: str, config: Mapping[str, Any]) -> None:
        self.worker = worker
        self.config = {**config, "worker": worker}
        self.events: list[dict[str, Any]] = []
        self._changed = threading.Condition()
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tests._fleet_watch_worker", json.dumps(self.config)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            cwd=ROOT,
            env=env,
            text=True,
        )
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            event = json.loads(line)
            with self._changed:
                self.events.append(event)
                self._changed.notify_all()

    def changes(self, address: str | None = None) -> list[dict[str, Any]]:
        with self._changed:
            return [
                e
                for e in self.events
                if e["event"] == "change" and (address is None or e["address"] == address)
            ]

    def logs(self, level: str) -> list[str]:
        with self._changed:
            return [
                e["message"] for e in self.events if e["event"] == "log" and e["level"] == level
            ]

    async def wait_for(self, done: Callable[[list[dict[str, Any]]], bool], what: str) -> None:
        """Until ``done(events)`` holds (read in a thread: the caller's loop serves the fake)."""

        def wait() -> bool:
            with self._changed:
                return self._changed.wait_for(lambda: done(self.events), timeout=WAIT)

        if not await asyncio.to_thread(wait):
            raise AssertionError(f"worker {self.worker}: no {what} within {WAIT}s")

    async def wait_for_states(self, states: Iterable[tuple[str, str, str]]) -> None:
        """Until it has received each ``(address, transaction id, status)``."""
        wanted = set(states)
        await self.wait_for(
            lambda events: (
                wanted
                <= {(e["address"], e["tx"], e["status"]) for e in events if e["event"] == "change"}
            ),
            f"changes {sorted(wanted)}",
        )

    def kill(self) -> None:
        """SIGKILL, as a crash would."""
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=WAIT)
        self._reader.join(timeout=WAIT)

    def stop(self) -> int:
        """End it (its stdin closed: it closes its watches) and return its exit status."""
        assert self.proc.stdin is not None
        with contextlib.suppress(OSError):
            self.proc.stdin.close()  # its loop over stdin ends
        if self.proc.poll() is None:
            try:
                self.proc.wait(timeout=WAIT)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=WAIT)
        self._reader.join(timeout=WAIT)
        if self.proc.stdout is not None:
            self.proc.stdout.close()
        return self.proc.returncode
