"""``write_parquet``: the orders of many users into one Parquet file, or into a dataset
partitioned by a column, read back exactly with pyarrow; its refusals come before any
request, and a failure leaves nothing behind."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any, cast

import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest

import asyncapi_client
from asyncapi_client import Client, Order, Walk, write_parquet
from asyncapi_client.testing import FakeExchange, FakeServer, Reply

EXCHANGE = FakeExchange.generate(seed=21, users=20, orders_per_user=45, leaderboard_size=30)
USERS = list(EXCHANGE.orders)
DECIMALS = ("price", "size", "filled_size")


@pytest.fixture
async def served() -> AsyncIterator[tuple[FakeServer, Client]]:
    async with FakeServer(EXCHANGE) as server, Client(base_url=server.base_url) as client:
        client.set_testing(True, max_retries=0)
        yield server, client


def names(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir())


def walks(client: Client, users: list[str] = USERS) -> list[Walk[Order]]:
    return [client.iter_orders(user, page_size=20) for user in users]


def assert_exact(rows: list[dict[str, Any]], wire: list[dict[str, Any]]) -> None:
    """The rows are the wire's orders, in order, every decimal equal to the text sent."""
    assert [row["transaction_id"] for row in rows] == [o["transactionId"] for o in wire]
    for row, order in zip(rows, wire, strict=True):
        assert row["user"] == order["user"]
        assert row["timestamp"] == order["timestamp"]
        for name, key in zip(DECIMALS, ("price", "size", "filledSize"), strict=True):
            assert isinstance(row[name], Decimal)
            assert row[name] == Decimal(order[key]), (name, order[key])


async def test_twenty_users_into_one_file(
    served: tuple[FakeServer, Client], tmp_path: Path
) -> None:
    _, client = served
    path = tmp_path / "orders.parquet"
    rows = await write_parquet(walks(client), path, rows_per_group=100)
    expected = [order for user in USERS for order in EXCHANGE.orders[user]]
    assert rows == len(expected) == 900
    assert_exact(pq.read_table(path).to_pylist(), expected)
    metadata = pq.ParquetFile(path).metadata
    sizes = [metadata.row_group(i).num_rows for i in range(metadata.num_row_groups)]
    assert sizes == [100] * 9  # row groups fill across walks
    assert (
        pq.read_schema(path).remove_metadata()
        == (await client.iter_orders(USERS[0]).to_arrow()).schema
    )
    assert names(tmp_path) == ["orders.parquet"]


async def test_twenty_users_into_a_dataset_partitioned_by_user(
    served: tuple[FakeServer, Client], tmp_path: Path
) -> None:
    _, client = served
    path = tmp_path / "orders"

    async def taken_one_at_a_time() -> AsyncIterator[Walk[Order]]:
        for walk in walks(client):
            yield walk

    rows = await write_parquet(taken_one_at_a_time(), path, partition_by="user")
    assert rows == 900
    assert names(path) == sorted(f"user={user}" for user in USERS)
    for user in USERS:
        files = names(path / f"user={user}")
        assert files == ["part-00000.parquet"]
        # the file's own schema (reading it as a table would add the folder's column)
        inside = pq.ParquetFile(path / f"user={user}" / files[0]).schema_arrow
        assert "user" not in inside.names  # in the folder name only
    partitioning = ds.partitioning(pa.schema([("user", pa.string())]), flavor="hive")
    table = pq.read_table(path, partitioning=partitioning)
    for user in USERS:
        mine = table.filter(pa.compute.equal(table.column("user"), user)).to_pylist()
        assert_exact(mine, EXCHANGE.orders[user])


async def test_a_dataset_of_the_same_column_is_replaced_and_other_directories_are_refused(
    served: tuple[FakeServer, Client], tmp_path: Path
) -> None:
    server, client = served
    path = tmp_path / "orders"
    await write_parquet(walks(client, USERS[:3]), path, partition_by="user")
    await write_parquet(walks(client, USERS[3:5]), path, partition_by="user")
    assert names(path) == sorted(f"user={user}" for user in USERS[3:5])
    assert names(tmp_path) == ["orders"]

    (path / "notes.txt").write_text("mine")
    requests = len(server.requests)
    with pytest.raises(FileExistsError, match="holds files other than a dataset"):
        await write_parquet(walks(client), path, partition_by="user")
    with pytest.raises(FileExistsError, match="not a directory"):
        await write_parquet(walks(client), path / "notes.txt", partition_by="user")
    assert len(server.requests) == requests
    assert (path / "notes.txt").read_text() == "mine"


async def test_refusals_come_before_any_request(
    served: tuple[FakeServer, Client], tmp_path: Path
) -> None:
    server, client = served
    orders = client.iter_orders(USERS[0])
    mixed: Any = [orders, client.iter_leaderboard()]
    with pytest.raises(ValueError, match="the walks must be of one kind"):
        await write_parquet(mixed, tmp_path / "x.parquet")
    with pytest.raises(TypeError, match="got one walk: pass \\[walk\\]"):
        await write_parquet(cast(Any, orders), tmp_path / "x.parquet")
    with pytest.raises(TypeError, match="must hold walks"):
        await write_parquet(cast(Any, [USERS[0]]), tmp_path / "x.parquet")
    with pytest.raises(TypeError, match="walks of items"):
        await write_parquet(cast(Any, [client.iter_order_pages(USERS[0])]), tmp_path / "x")
    with pytest.raises(ValueError, match="walks is empty"):
        await write_parquet([], tmp_path / "x.parquet")
    with pytest.raises(ValueError, match="path is empty"):
        await write_parquet([orders], "")
    with pytest.raises(ValueError, match="one of transaction_id, pool_id, user, side"):
        await write_parquet([orders], tmp_path / "x", partition_by="price")
    with pytest.raises(TypeError, match="partition_by must be a column name"):
        await write_parquet([orders], tmp_path / "x", partition_by=cast(Any, 3))
    with pytest.raises(IsADirectoryError):
        await write_parquet([orders], tmp_path)
    with pytest.raises(ValueError, match="rows_per_group must be a positive int"):
        await write_parquet([orders], tmp_path / "x", rows_per_group=0)
    assert server.requests == []
    assert names(tmp_path) == []


async def test_a_walk_of_another_kind_met_late_fails_and_leaves_nothing(
    served: tuple[FakeServer, Client], tmp_path: Path
) -> None:
    _, client = served

    def lazily() -> Iterator[Walk[Any]]:
        yield client.iter_orders(USERS[0])
        yield client.iter_leaderboard()

    with pytest.raises(ValueError, match="a walk of LeaderboardEntry items after"):
        await write_parquet(lazily(), tmp_path / "x.parquet")
    assert names(tmp_path) == []


@pytest.mark.parametrize("partition_by", [None, "user"])
async def test_a_failure_mid_walk_leaves_nothing_and_the_walk_where_it_was_taken(
    served: tuple[FakeServer, Client], tmp_path: Path, partition_by: str | None
) -> None:
    server, client = served
    server.script("orders", Reply(), Reply(), Reply(), Reply(), Reply(503))  # user 2, page 2
    taken = walks(client, USERS[:3])
    with pytest.raises(asyncapi_client.ServerError):
        await write_parquet(taken, tmp_path / "out", partition_by=partition_by)
    assert names(tmp_path) == []
    assert taken[1].checkpoint.last is None  # nothing of it was written
    assert taken[2].checkpoint.last is None  # never started
