"""SyncWalk's columnar export: the async walk's export run on the SyncClient's loop, so a
notebook or a script gets the same Arrow table and Parquet file (real pyarrow, the threaded
fake exchange), batches pulled one at a time, and a checkpoint that follows them."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from asyncapi_client import Client, SyncClient
from asyncapi_client.testing import FakeExchange, FakeServer


@pytest.fixture(scope="module")
def server() -> Iterator[FakeServer]:
    exchange = FakeExchange.generate(seed=27, users=2, orders_per_user=230, leaderboard_size=97)
    with FakeServer(exchange).in_thread() as srv:
        yield srv


@pytest.fixture
def client(server: FakeServer) -> Iterator[SyncClient]:
    with SyncClient(base_url=server.base_url) as c:
        yield c


def user_of(server: FakeServer) -> str:
    return next(iter(server.exchange.orders))


def async_table(server: FakeServer, user: str, scale: int) -> pa.Table:
    async def export() -> pa.Table:
        async with Client(base_url=server.base_url) as c:
            return await c.iter_orders(user, page_size=40).to_arrow(decimal_scale=scale)

    return asyncio.run(export())


@pytest.mark.parametrize("scale", [18, 12])
def test_to_arrow_is_the_async_walks_table(
    server: FakeServer, client: SyncClient, scale: int
) -> None:
    user = user_of(server)
    table = client.iter_orders(user, page_size=40).to_arrow(decimal_scale=scale)
    assert table.num_rows == len(server.exchange.orders[user]) > 200
    assert table.equals(async_table(server, user, scale))
    ids = table.column("transaction_id").to_pylist()
    assert ids == [o.transaction_id for o in client.iter_orders(user, page_size=40)]


def test_a_value_that_does_not_fit_is_refused_as_the_async_walk_refuses_it(
    server: FakeServer, client: SyncClient
) -> None:
    user = user_of(server)
    with pytest.raises(ValueError, match=r"of item \d+ \(counted from 0") as refused:
        client.iter_orders(user, page_size=40).to_arrow(decimal_scale=2)
    with pytest.raises(ValueError) as refused_async:
        async_table(server, user, 2)
    assert str(refused.value) == str(refused_async.value)


def test_to_parquet_writes_the_same_rows(
    server: FakeServer, client: SyncClient, tmp_path: Path
) -> None:
    path = tmp_path / "board.parquet"
    rows = client.iter_leaderboard(page_size=30).to_parquet(path, rows_per_group=40)
    assert rows == len(server.exchange.leaderboard) == 97
    written = pq.ParquetFile(path)
    assert [written.metadata.row_group(i).num_rows for i in range(written.num_row_groups)] == [
        40,
        40,
        17,
    ]
    assert written.read().equals(client.iter_leaderboard(page_size=30).to_arrow())
    assert [p.name for p in tmp_path.iterdir()] == ["board.parquet"]  # no part file left


def test_record_batches_are_pulled_one_at_a_time_and_the_checkpoint_follows(
    server: FakeServer, client: SyncClient
) -> None:
    user = user_of(server)
    everything = [o.transaction_id for o in client.iter_orders(user, page_size=40)]
    with client.iter_orders(user, page_size=40) as walk:
        batches = walk.record_batches(rows=50)
        first = next(batches)
        assert first.num_rows == 50
        resumed = client.iter_orders(user, page_size=40, resume=walk.checkpoint)
        assert next(resumed).transaction_id == everything[50]  # just after the batch's last row
        resumed.close()
        rest = list(batches)
    assert [b.num_rows for b in rest] == [50, 50, 50, len(everything) - 200]
    ids = [i for b in [first, *rest] for i in b.column("transaction_id").to_pylist()]
    assert ids == everything


def test_leaving_record_batches_early_hands_the_walk_back_where_the_batch_ended(
    server: FakeServer, client: SyncClient
) -> None:
    user = user_of(server)
    everything = [o.transaction_id for o in client.iter_orders(user, page_size=40)]
    walk = client.iter_orders(user, page_size=40)
    batches = walk.record_batches(rows=30)
    assert next(batches).num_rows == 30
    batches.close()  # its generator on the client's loop ends now: the walk is free again
    assert next(walk).transaction_id == everything[30]  # just after the batch handed out
    walk.close()
    assert list(walk) == []


def test_bad_arguments_and_a_closed_walk_are_refused_clearly(
    server: FakeServer, client: SyncClient, tmp_path: Path
) -> None:
    walk = client.iter_orders(user_of(server), page_size=40)
    with pytest.raises(ValueError, match="rows"):
        walk.record_batches(rows=0)  # checked when called, before anything is read
    with pytest.raises(ValueError, match="decimal_scale"):
        walk.to_arrow(decimal_scale=39)
    walk.close()
    with pytest.raises(RuntimeError, match=r"to_parquet\(\): the walk is closed"):
        walk.to_parquet(tmp_path / "x.parquet")
    with pytest.raises(RuntimeError, match=r"record_batches\(\): the walk is closed"):
        walk.record_batches()
    assert not (tmp_path / "x.parquet").exists()
