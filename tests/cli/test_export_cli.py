"""``orders ADDRESS --all`` and ``leaderboard --all`` with ``--format parquet --output FILE``.

In-process runs compare the file with the JSON output of the same walk; real processes are
interrupted by SIGINT and SIGTERM while the fake holds a page, and must leave no file.
"""

from __future__ import annotations

import asyncio
import signal
import sys
from collections.abc import AsyncIterator, Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from asyncapi_client._decode import camel
from asyncapi_client.testing import FakeExchange, FakeServer, Reply
from tests._cli import Terminal, cli, hosts, subprocess_env

CLI = (sys.executable, "-m", "asyncapi_client")
RUN_TIMEOUT = 60.0
EXCHANGE = FakeExchange.generate(seed=4, users=2, orders_per_user=260, leaderboard_size=130)
ADDRESS = next(iter(EXCHANGE.orders))


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeServer]:
    with FakeServer(EXCHANGE).in_thread() as server:
        yield server


def names(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir())


def as_wire(row: dict[str, Any]) -> dict[str, Any]:
    """A Parquet row as the JSON output spells it: camelCase, decimals as numbers."""
    return {camel(name): value for name, value in row.items()}


def same_values(json_rows: list[dict[str, Any]], parquet_rows: list[dict[str, Any]]) -> None:
    assert len(json_rows) == len(parquet_rows)
    for wire, row in zip(json_rows, parquet_rows, strict=True):
        got = as_wire(row)
        assert got.keys() == wire.keys()
        for key, value in wire.items():
            if isinstance(got[key], Decimal):
                assert got[key] == Decimal(value), key  # exact, from the text sent
            else:
                assert got[key] == value, key
                assert type(got[key]) is type(value), key


@pytest.mark.parametrize(
    "command",
    [["orders", ADDRESS, "--limit", "45"], ["leaderboard", "--limit", "20"]],
    ids=["orders", "leaderboard"],
)
def test_the_parquet_file_holds_what_json_prints(
    fake: FakeServer, tmp_path: Path, command: list[str]
) -> None:
    env = hosts(fake.base_url)
    printed = cli("--format", "json", *command, "--all", env=env).ok().json()
    output = tmp_path / "walk.parquet"
    run = cli(
        *command, "--all", "--format", "parquet", "--output", str(output),
        "--rows-per-group", "100", env=env,
    )  # fmt: skip
    assert run.ok().stdout == ""
    same_values(printed, pq.read_table(output).to_pylist())
    meta = pq.ParquetFile(output).metadata
    sizes = [meta.row_group(i).num_rows for i in range(meta.num_row_groups)]
    assert sizes == [100] * (len(printed) // 100) + [len(printed) % 100]
    assert names(tmp_path) == ["walk.parquet"]


def test_a_decimal_scale_that_the_data_does_not_fit_fails_in_one_line(
    fake: FakeServer, tmp_path: Path
) -> None:
    output = tmp_path / "orders.parquet"
    run = cli(
        "orders", ADDRESS, "--all", "--format", "parquet", "--output", str(output),
        "--decimal-scale", "0", env=hosts(fake.base_url),
    )  # fmt: skip
    line = run.one_line_error(1)
    assert f"cannot write the output: {output}: price of item 0 " in line
    assert "more than 0 digits after the point" in line
    assert names(tmp_path) == []


def test_on_a_terminal_the_progress_goes_to_stderr(fake: FakeServer, tmp_path: Path) -> None:
    stderr = Terminal()
    output = tmp_path / "board.parquet"
    run = cli(
        "leaderboard", "--all", "--format", "parquet", "--output", str(output),
        env=hosts(fake.base_url), stderr=stderr,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    assert run.stdout == ""
    assert run.stderr.startswith(f"\r  {len(EXCHANGE.leaderboard)} entries, ")
    assert run.stderr.endswith(" s\x1b[K\n")
    assert pq.read_table(output).num_rows == len(EXCHANGE.leaderboard)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["leaderboard", "--all", "--format", "parquet"], "needs --output FILE"),
        (["orders", "A", "--format", "parquet", "--output", "f"], "needs --all"),
        (["tokens", "--format", "parquet"], "is for orders --all and leaderboard --all only"),
        (["orders", "A", "--all", "--output", "f"], "--output FILE is for --format parquet"),
        (["leaderboard", "--all", "--format", "parquet", "--output", ""], "the name is empty"),
        (["leaderboard", "--decimal-scale", "39"], "expected an integer from 0 to 38"),
        (["leaderboard", "--rows-per-group", "0"], "expected a positive integer"),
        (["leaderboard", "--rows-per-group", "67108865"], "expected at most 67,108,864 rows"),
    ],
)
def test_usage_errors_exit_2(tmp_path: Path, argv: list[str], message: str) -> None:
    run = cli(*argv, env=hosts("http://127.0.0.1:9"))
    assert run.returncode == 2, run.stderr
    assert message in run.stderr
    assert names(tmp_path) == []


def test_a_file_that_cannot_be_written_fails_in_one_line(fake: FakeServer, tmp_path: Path) -> None:
    missing = tmp_path / "no" / "such.parquet"
    run = cli(
        "leaderboard", "--all", "--format", "parquet", "--output", str(missing),
        env=hosts(fake.base_url),
    )  # fmt: skip
    assert run.one_line_error(1).endswith(f"{missing}: No such file or directory")
    run = cli(
        "leaderboard", "--all", "--format", "parquet", "--output", str(tmp_path),
        env=hosts(fake.base_url),
    )  # fmt: skip
    assert run.one_line_error(1).endswith(f"{tmp_path}: Is a directory")


# --- interrupted walks: real processes ----------------------------------------------------


@pytest.fixture
async def held() -> AsyncIterator[tuple[FakeServer, Any]]:
    """EXCHANGE's orders in pages of 20: 3 pages answer, then the server holds the rest."""
    async with FakeServer(EXCHANGE) as server, server.gate("orders") as gate:
        gate.release(3)
        yield server, gate


async def start_export(url: str, output: Path) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        *CLI, "orders", ADDRESS, "--all", "--limit", "20", "--format", "parquet",
        "--output", str(output), "--rows-per-group", "16",
        env=subprocess_env(ASYNCAPI_BASE_URL=url),
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip


@pytest.mark.parametrize(
    ("how", "status"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)], ids=["sigint", "sigterm"]
)
async def test_an_interrupted_export_leaves_no_file(
    held: tuple[FakeServer, Any], tmp_path: Path, how: signal.Signals, status: int
) -> None:
    server, gate = held
    output = tmp_path / "orders.parquet"
    proc = await start_export(server.base_url, output)
    try:
        await gate.arrived(4)  # 60 orders read, row groups written; page 4 is held
        parts = names(tmp_path)
        assert len(parts) == 1
        assert parts[0].startswith(".orders.parquet.")
        assert parts[0].endswith(".part")
        proc.send_signal(how)
        async with asyncio.timeout(RUN_TIMEOUT):
            stdout, stderr = await proc.communicate()
    finally:
        if proc.returncode is None:  # pragma: no cover - only when an assertion failed
            proc.kill()
            await proc.wait()
    assert proc.returncode == status, stderr
    assert stdout == b""
    name = how.name
    assert (
        stderr
        == f"asyncapi-client: error: interrupted by {name}; {output} was not written\n".encode()
    )
    assert names(tmp_path) == []


async def test_a_failure_mid_walk_exits_1_and_leaves_no_file(tmp_path: Path) -> None:
    output = tmp_path / "orders.parquet"
    async with FakeServer(EXCHANGE) as server:
        server.script("orders", Reply(200), Reply(200), Reply(404))
        proc = await start_export(server.base_url, output)
        async with asyncio.timeout(RUN_TIMEOUT):
            stdout, stderr = await proc.communicate()
    assert proc.returncode == 1, stderr
    assert stdout == b""
    assert stderr.startswith(b"asyncapi-client: error: HTTP 404")
    assert stderr.count(b"\n") == 1
    assert names(tmp_path) == []


async def test_an_export_runs_in_a_thread_too(fake: FakeServer, tmp_path: Path) -> None:
    """Off the main thread no signal handler can be set: the export runs without one."""
    output = tmp_path / "board.parquet"
    args = ("leaderboard", "--all", "--format", "parquet", "--output", str(output))
    run = await asyncio.to_thread(cli, *args, env=hosts(fake.base_url))
    run.ok()
    assert pq.read_table(output).num_rows == len(EXCHANGE.leaderboard)
