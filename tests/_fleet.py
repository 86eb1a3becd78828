"""The fleet: four worker processes (tests/_fleet_worker.py), each with its own event loop,
Client and RedisLimiter, driven over their stdin and stdout. Shared by the fleet's tests
(tests/fleet/test_fleet_processes.py) and the fleet benchmark (benchmarks/_fleet.py).
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from tests._env import worker_env

__all__ = ["RUN_TIMEOUT", "START_DELAY", "WORKERS", "Fleet", "prioritized"]

ROOT = Path(__file__).resolve().parent.parent
WORKERS = 4
#: A run's bound beyond its length (a loaded machine is slow, but nothing may hang).
RUN_TIMEOUT = 30.0
#: Every worker starts calling this long after its run is sent (its warm-up comes first).
START_DELAY = 1.5


class Fleet:
    """The worker processes, started once for the module (start-up is the slow part)."""

    def __init__(self) -> None:
        env = worker_env(PYTHONPATH=str(ROOT))
        self.procs = [
            subprocess.Popen(
                [sys.executable, "-m", "tests._fleet_worker"],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                cwd=ROOT,
                env=env,
                text=True,
            )
            for _ in range(WORKERS)
        ]

    def wait_ready(self) -> None:
        for proc in self.procs:
            assert proc.stdout is not None
            assert proc.stdout.readline() == "ready\n", "a worker failed to start"

    async def run(
        self,
        base_url: str,
        redis_url: str,
        *,
        rates: Sequence[tuple[int, float]],
        seconds: float,
        concurrency: int,
        name: str,
        **options: float,
    ) -> list[dict[str, Any]]:
        """One run: every worker starts at once; what each reports when it is done.

        ``options``: ``margin``, ``retry_after_cap`` (the library's defaults when absent).
        """
        start = time.monotonic() + START_DELAY  # the same moment for every worker
        for worker, proc in enumerate(self.procs):
            config = {
                "worker": worker,
                "redis": redis_url,
                "rates": rates,
                "name": name,
                "base_url": base_url,
                "seconds": seconds,
                "concurrency": concurrency,
                "start": start,
                **options,
            }
            assert proc.stdin is not None
            proc.stdin.write(json.dumps(config) + "\n")
            proc.stdin.flush()
        async with asyncio.timeout(START_DELAY + seconds + RUN_TIMEOUT):
            # read in threads: this loop serves the fake exchange meanwhile
            lines = await asyncio.gather(
                *(asyncio.to_thread(proc.stdout.readline) for proc in self.procs if proc.stdout)
            )
        return [json.loads(line) for line in lines]

    def stop(self) -> None:
        for proc in self.procs:
            if proc.stdin is not None:
                proc.stdin.close()  # the worker's loop over stdin ends
        for proc in self.procs:
            try:
                proc.wait(timeout=RUN_TIMEOUT)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            if proc.stdout is not None:
                proc.stdout.close()


@contextmanager
def prioritized(*pids: int) -> Iterator[None]:
    """Run ``pids`` a little ahead of the rest of a loaded machine, where allowed (root).

    The runs are timed at the server: this process serves the fake exchange, Redis answers
    every admission, and on a shared machine either may wait tens of ms for a CPU, which
    moves requests from one second into the next. The workers renice themselves.
    """
    before: dict[int, int] = {}
    try:
        for pid in pids:
            niceness = os.getpriority(os.PRIO_PROCESS, pid)
            try:
                os.setpriority(os.PRIO_PROCESS, pid, niceness - 5)
            except OSError:
                continue  # not allowed here: run as we are
            before[pid] = niceness
        yield
    finally:
        for pid, niceness in before.items():
            os.setpriority(os.PRIO_PROCESS, pid, niceness)
