"""Export paths: an empty one is refused at the call, before any request; the part file of
an export killed before it completed is removed by the next export to the same path, and
the part of an export still running (in another process or this one) is not."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from asyncapi_client import Client, SyncClient, write_parquet
from asyncapi_client.testing import FakeExchange, FakeServer
from tests._cli import subprocess_env

CLI = (sys.executable, "-m", "asyncapi_client")
EXCHANGE = FakeExchange.generate(seed=8, users=1, orders_per_user=120, leaderboard_size=40)
(ADDRESS,) = EXCHANGE.orders


@pytest.fixture
async def served() -> AsyncIterator[tuple[FakeServer, Client]]:
    async with FakeServer(EXCHANGE) as server, Client(base_url=server.base_url) as client:
        client.set_testing(True, max_retries=0)
        yield server, client


def names(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir())


async def test_an_empty_path_is_refused_before_any_request(
    served: tuple[FakeServer, Client],
) -> None:
    server, client = served
    with pytest.raises(ValueError, match="path is empty"):
        await client.iter_orders(ADDRESS).to_parquet("")
    with pytest.raises(ValueError, match="path is empty"):
        await write_parquet([client.iter_orders(ADDRESS)], "")
    assert server.requests == []


def test_an_empty_path_is_refused_by_the_sync_client_too() -> None:
    with FakeServer(EXCHANGE).in_thread() as server, SyncClient(base_url=server.base_url) as c:
        with pytest.raises(ValueError, match="path is empty"):
            c.iter_orders(ADDRESS).to_parquet("")
        assert server.requests == []


#: Files beside the output that no export to it made: never removed.
NOT_OURS = [".orders.parquet.backup", ".other.parquet.1-0123abcd.part", "orders.parquet.part"]


async def test_a_killed_exports_part_goes_with_the_next_export_and_a_running_ones_stays(
    tmp_path: Path,
) -> None:
    output = tmp_path / "orders.parquet"
    for name in NOT_OURS:
        (tmp_path / name).write_text("not ours to remove")
    async with (
        FakeServer(EXCHANGE) as server,
        server.gate("orders") as gate,
        Client(base_url=server.base_url) as client,
    ):
        gate.release(2)
        proc = await asyncio.create_subprocess_exec(
            *CLI, "orders", ADDRESS, "--all", "--page-size", "20", "--format", "parquet",
            "--output", str(output), "--rows-per-group", "16",
            env=subprocess_env(ASYNCAPI_BASE_URL=server.base_url),
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.DEVNULL,
        )  # fmt: skip
        try:
            await gate.arrived(3)  # 40 orders read, two row groups written; page 3 is held
            (part,) = set(names(tmp_path)) - set(NOT_OURS)
            assert part.startswith(f".orders.parquet.{proc.pid}-")
            assert part.endswith(".part")

            # Another export to the same path while that one runs: its part stays.
            assert await client.iter_leaderboard().to_parquet(output) == 40
            assert names(tmp_path) == sorted([*NOT_OURS, part, "orders.parquet"])

            proc.kill()
            assert await proc.wait() == -9
        finally:
            if proc.returncode is None:  # pragma: no cover - only when an assertion failed
                proc.kill()
                await proc.wait()
        assert names(tmp_path) == sorted([*NOT_OURS, part, "orders.parquet"])  # left by the kill

        # The next export to the path removes it.
        assert await client.iter_leaderboard().to_parquet(output) == 40
        assert names(tmp_path) == sorted([*NOT_OURS, "orders.parquet"])
        assert pq.read_table(output).num_rows == 40
