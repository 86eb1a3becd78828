"""``--format parquet --output FILE --checkpoint CKPT``: a Parquet export killed at any point
and run again with the same arguments writes the complete file, every order once, without
fetching again what was already written; FILE still appears only complete.

The kill is a real SIGKILL of a real process, sent while the fake exchange holds a page
(a gate), so where the export stands is known without a single sleep.
"""

from __future__ import annotations

import asyncio
import errno
import json
import os
import sys
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from asyncapi_client._cli._checkpoint import CheckpointFile
from asyncapi_client._export import lock
from asyncapi_client.testing import FakeExchange, FakeServer, Reply
from tests._cli import cli, hosts, subprocess_env

CLI = (sys.executable, "-m", "asyncapi_client")
TIMEOUT = 60.0
#: Two users of 200 orders: 20 pages of 20, 10 row groups of 40 (two pages each).
EXCHANGE = FakeExchange.generate(seed=5, users=2, orders_per_user=200, leaderboard_size=5)
USERS = list(EXCHANGE.orders)
WIRE = [order for user in USERS for order in EXCHANGE.orders[user]]


def arguments(output: Path, checkpoint: Path, *more: str) -> list[str]:
    return [
        "--max-retries", "0", "orders", *USERS, "--all", "--page-size", "20",
        "--format", "parquet", "--output", str(output), "--rows-per-group", "40",
        "--checkpoint", str(checkpoint), *more,
    ]  # fmt: skip


def names(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir())


def orders_asked(server: FakeServer, since: int = 0) -> int:
    return sum(r.operation == "orders" for r in server.requests[since:])


def assert_complete(output: Path) -> None:
    """Every order once, in order, its decimals equal to the text sent; row groups full."""
    rows = pq.read_table(output).to_pylist()
    assert [row["transaction_id"] for row in rows] == [o["transactionId"] for o in WIRE]
    for row, order in zip(rows, WIRE, strict=True):
        assert row["price"] == Decimal(order["price"])
        assert row["filled_size"] == Decimal(order["filledSize"])
    meta = pq.ParquetFile(output).metadata
    assert [meta.row_group(i).num_rows for i in range(meta.num_row_groups)] == [40] * 10
    assert meta.metadata is None or b"asyncapi_client.export_checkpoint" not in meta.metadata


async def test_killed_at_about_half_then_run_again_writes_every_order_once(tmp_path: Path) -> None:
    output, checkpoint = tmp_path / "orders.parquet", tmp_path / "orders.ckpt"
    argv = arguments(output, checkpoint)
    async with FakeServer(EXCHANGE) as server:
        async with server.gate("orders") as gate:
            gate.release(11)
            proc = await asyncio.create_subprocess_exec(
                *CLI, *argv,
                env=subprocess_env(ASYNCAPI_BASE_URL=server.base_url),
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.DEVNULL,
                stderr=asyncio.subprocess.DEVNULL,
            )  # fmt: skip
            try:
                # Page 12 asked: pages 1-10 (the first user) are in five row groups, each
                # written as a part and in the checkpoint; page 11's orders wait for page 12.
                await gate.arrived(12)
                saved = json.loads(checkpoint.read_text())
                proc.kill()
                assert await proc.wait() == -9
            finally:
                if proc.returncode is None:  # pragma: no cover - only when the test failed
                    proc.kill()
                    await proc.wait()
        assert (saved["parts"], saved["walk"], saved["done"]) == (5, 0, False)
        assert names(tmp_path) == [".orders.parquet.parts", "orders.ckpt"]  # no FILE yet
        parts = tmp_path / ".orders.parquet.parts"
        assert [p for p in names(parts) if not p.startswith(".")] == [
            f"{n:06d}.parquet" for n in range(5)
        ]

        asked = len(server.requests)
        again = await asyncio.create_subprocess_exec(
            *CLI, *argv,
            env=subprocess_env(ASYNCAPI_BASE_URL=server.base_url),
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
        async with asyncio.timeout(TIMEOUT):
            stdout, stderr = await again.communicate()
        assert again.returncode == 0, stderr
        assert stdout == b""
        assert stderr == (
            f"asyncapi-client: resuming the walk from the checkpoint in {checkpoint}\n".encode()
        )
        # The first user's last page once more (where its checkpoint stands), then the
        # second user's ten: nothing of the five parts is fetched again.
        assert orders_asked(server, asked) == 11
    assert_complete(output)
    assert names(tmp_path) == ["orders.parquet"]  # the parts and the checkpoint are gone


@pytest.fixture
def server() -> Iterator[FakeServer]:
    with FakeServer(EXCHANGE).in_thread() as served:
        yield served


def test_a_failed_run_is_continued_and_a_written_part_not_yet_in_the_checkpoint_is_kept(
    server: FakeServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The third part is on disk when saving the checkpoint fails: the next run takes it
    from the part's own footer, so its rows are not fetched again."""
    output, checkpoint = tmp_path / "orders.parquet", tmp_path / "orders.ckpt"
    real_write = CheckpointFile._write
    saves = 0

    def write(path: Path, text: str) -> None:
        nonlocal saves
        if text:  # the writability probe writes "" and must pass
            saves += 1
            if saves == 3:
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        real_write(path, text)

    monkeypatch.setattr(CheckpointFile, "_write", staticmethod(write))
    first = cli(*arguments(output, checkpoint), env=hosts(server.base_url))
    assert "cannot save the checkpoint" in first.one_line_error(1)
    assert json.loads(checkpoint.read_text())["parts"] == 2
    assert not output.exists()

    monkeypatch.setattr(CheckpointFile, "_write", staticmethod(real_write))
    with FakeServer(EXCHANGE).in_thread() as again:
        second = cli(*arguments(output, checkpoint), env=hosts(again.base_url))
    assert second.returncode == 0, second.stderr
    assert orders_asked(again) == 1 + 14  # page 6 again, then pages 7-20
    assert_complete(output)
    assert names(tmp_path) == ["orders.parquet"]


def test_a_server_error_mid_walk_is_continued_by_the_next_run(
    server: FakeServer, tmp_path: Path
) -> None:
    output, checkpoint = tmp_path / "orders.parquet", tmp_path / "orders.ckpt"
    server.script("orders", *[Reply()] * 7, Reply(503))  # page 8 fails once
    first = cli(*arguments(output, checkpoint), env=hosts(server.base_url))
    assert "HTTP 503" in first.one_line_error(1)
    with FakeServer(EXCHANGE).in_thread() as again:
        second = cli(*arguments(output, checkpoint), env=hosts(again.base_url))
    assert second.returncode == 0, second.stderr
    assert orders_asked(again) == 1 + 14  # three parts kept: page 6 again, 7-20
    assert_complete(output)


@pytest.mark.parametrize(
    ("change", "says"),
    [
        (["--rows-per-group", "30"], "it is the checkpoint of another export"),
        (["--status", "FILLED"], "it is the checkpoint of another export"),
        ("parts gone", "the parts it counts on are gone"),
        ("a walk's checkpoint", "not the checkpoint of a Parquet export"),
    ],
    ids=["rows per group", "filters", "parts gone", "walk checkpoint"],
)
def test_a_checkpoint_that_does_not_fit_is_refused_before_any_request(
    server: FakeServer, tmp_path: Path, change: Any, says: str
) -> None:
    output, checkpoint = tmp_path / "orders.parquet", tmp_path / "orders.ckpt"
    server.script("orders", *[Reply()] * 5, Reply(503))
    assert cli(*arguments(output, checkpoint), env=hosts(server.base_url)).returncode == 1
    more: list[str] = []
    if change == "parts gone":
        (tmp_path / ".orders.parquet.parts" / "000001.parquet").unlink()
    elif change == "a walk's checkpoint":
        checkpoint.write_text('{"version": 1, "operation": "leaderboard"}')
    else:
        more = change
    with FakeServer(EXCHANGE).in_thread() as again:
        run = cli(*arguments(output, checkpoint, *more), env=hosts(again.base_url))
    line = run.one_line_error(2)
    assert line.startswith(f"asyncapi-client: error: --checkpoint {checkpoint}: "), line
    assert says in line
    assert again.requests == []
    assert checkpoint.exists()  # kept: it still belongs to the export that made it


def test_a_second_run_of_an_export_still_running_is_refused(
    server: FakeServer, tmp_path: Path
) -> None:
    output, checkpoint = tmp_path / "orders.parquet", tmp_path / "orders.ckpt"
    parts = tmp_path / ".orders.parquet.parts"
    parts.mkdir()
    running = lock(str(parts))  # what the run still going holds
    assert running is not None
    try:
        run = cli(*arguments(output, checkpoint), env=hosts(server.base_url))
    finally:
        os.close(running)
    assert "another run is writing this export" in run.one_line_error(2)
    assert server.requests == []
    assert names(tmp_path) == [".orders.parquet.parts"]


@pytest.mark.parametrize("where", ["missing directory", "a directory"])
def test_an_output_that_cannot_be_written_fails_before_any_request(
    server: FakeServer, tmp_path: Path, where: str
) -> None:
    output = tmp_path / "no" / "orders.parquet" if where == "missing directory" else tmp_path
    checkpoint = tmp_path / "orders.ckpt"
    run = cli(*arguments(output, checkpoint), env=hosts(server.base_url))
    assert run.one_line_error(1).startswith("asyncapi-client: error: cannot write the output: ")
    assert server.requests == []
    assert not checkpoint.exists()
