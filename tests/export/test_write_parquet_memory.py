"""``write_parquet`` of many walks holds what one walk's export holds: the peak RSS of a
process writing 20 users' orders is about that of one user with as many orders.

Each export runs in a fresh process: it builds the exchange, serves it on loopback, warms up
(pyarrow, the worker thread) with a small export of the same kind, resets the process's
peak RSS to its RSS (Linux's ``/proc/self/clear_refs``), and measures how far the peak rises
above it while the big export is written. pyarrow allocates
from the system's malloc there: its default pool keeps freed memory for a while, by time,
which measures the machine's load rather than what the export holds. For the same reason
malloc keeps one arena: on a loaded machine the event loop's worker pool may start a
second thread for the writes, and a second arena's freed memory added up to 1.8 MiB of
noise (measured: dataset 6.6-8.4 MiB with the default arenas, 6.7-7.1 with one).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests._env import worker_env

ROOT = Path(__file__).resolve().parents[2]
ORDERS = 32_000  # in all, either way
ROWS_PER_GROUP = 2_048

MEASURE = (
    textwrap.dedent(
        """
    import asyncio, gc, json, sys
    import asyncapi_client
    from asyncapi_client import Client
    from asyncapi_client.testing import FakeExchange, FakeServer

    users, out, mode = int(sys.argv[1]), sys.argv[2], sys.argv[3]
    exchange = FakeExchange.generate(
        seed=5, users=users, orders_per_user=ORDERS // users, leaderboard_size=1
    )

    def status(field: str) -> int:
        with open("/proc/self/status") as file:
            line = next(line for line in file if line.startswith(field + ":"))
        return int(line.split()[1]) * 1024

    def peak_from_now() -> int:  # the peak RSS reset to the RSS now, which is returned
        with open("/proc/self/clear_refs", "w") as file:
            file.write("5")
        return status("VmRSS")

    async def main() -> None:
        async with FakeServer(exchange) as server, Client(base_url=server.base_url) as client:
            walks = [client.iter_orders(user, page_size=500) for user in exchange.orders]
            partition_by = "user" if mode == "dataset" else None
            await asyncapi_client.write_parquet(  # pyarrow's code and pools warmed up
                [client.iter_orders(next(iter(exchange.orders)), max_items=600)],
                out + ".warm", rows_per_group=300, partition_by=partition_by,
            )
            gc.collect()
            before = peak_from_now()
            if mode == "held":  # the control: every order held at once, as models
                held = [order for walk in walks async for order in walk]
                rows = len(held)
            else:
                rows = await asyncapi_client.write_parquet(
                    walks, out, rows_per_group=ROWS_PER_GROUP, partition_by=partition_by
                )
            print(json.dumps({"rows": rows, "growth": status("VmHWM") - before}))

    asyncio.run(main())
    """
    )
    .replace("ORDERS", str(ORDERS))
    .replace("ROWS_PER_GROUP", str(ROWS_PER_GROUP))
)


def growth(users: int, out: Path, mode: str = "file") -> int:
    """How far the peak RSS grows while the walks of ``users`` users are written."""
    done = subprocess.run(
        [sys.executable, "-c", MEASURE, str(users), str(out), mode],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        cwd=ROOT,
        env=worker_env(ARROW_DEFAULT_MEMORY_POOL="system", MALLOC_ARENA_MAX="1"),
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["rows"] == ORDERS
    return int(result["growth"])


@pytest.mark.skipif(
    not os.path.exists("/proc/self/clear_refs"), reason="resets the peak RSS the Linux way"
)
@pytest.mark.waits
def test_twenty_walks_take_the_memory_of_one(tmp_path: Path) -> None:
    one = growth(1, tmp_path / "one.parquet")
    twenty = growth(20, tmp_path / "twenty.parquet")
    dataset = growth(20, tmp_path / "dataset", mode="dataset")
    held = growth(20, tmp_path / "held", mode="held")
    mib = 2**20
    sizes = f"one {one / mib:.1f} MiB, twenty {twenty / mib:.1f}, dataset {dataset / mib:.1f}"
    sizes += f", all held {held / mib:.1f}"
    assert twenty <= one + 4 * mib, sizes
    assert dataset <= one + 4 * mib, sizes
    assert max(one, twenty, dataset) < held / 2, sizes  # the measure sees what is held
