"""A long walk with every page cached stays within the cache's ``max_bytes`` plus the walk's
own bound, measured as the process's peak RSS (a process of its own, as the memory
benchmark measures it)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks._memory import CACHE_BYTES
from benchmarks._server import ServerProcess
from tests._env import worker_env

ROOT = Path(__file__).resolve().parents[2]
ORDERS = 200_000
#: What a walk without a cache may grow by (the memory benchmark's target for 1,000,000).
WALK_BOUND_MB = 30.0


def walk(server: ServerProcess, contender: str) -> dict[str, float]:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "benchmarks._memory",
            "--base-url",
            server.base_url,
            "--contender",
            contender,
            "--orders",
            str(ORDERS),
            "--page-size",
            "1000",
        ],
        cwd=ROOT,
        env=worker_env(),
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    result: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


@pytest.mark.waits
def test_a_walk_with_every_page_cached_stays_within_max_bytes_and_the_walks_bound() -> None:
    with ServerProcess(None) as server:
        cached = walk(server, "asyncapi_client, orders cached")
    assert cached["orders"] == ORDERS
    # 200 pages of about 250 KB: 50 MB of bodies, of which the cache keeps at most 16 MiB
    assert cached["growth_mb"] <= CACHE_BYTES / 2**20 + WALK_BOUND_MB
