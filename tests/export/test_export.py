"""Columnar export of item walks: Arrow tables, record batches, Parquet files (real pyarrow).

Against the fake exchange: the table equals the models (decimals exact to the last digit at
two scales), values that do not fit are refused with their field and position, the
checkpoint after a partial or failed export, batches and row groups full but the last, the
Parquet file appearing only whole, and the ImportError without pyarrow.
"""

from __future__ import annotations

import asyncio
import inspect
import re
import subprocess
import sys
import textwrap
import threading
from collections.abc import AsyncIterator
from decimal import Decimal
from pathlib import Path
from typing import Any, cast

import attrs
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from asyncapi_client import (
    Client,
    LeaderboardEntry,
    Order,
    OrderStatus,
    Pool,
    ServerError,
    Side,
    Token,
    Walk,
)
from asyncapi_client._export import CHUNK, DEFAULT_ROWS, _PartFile, _plan, arrow_schema
from asyncapi_client.testing import FakeExchange, FakeServer, Reply, WireDict
from tests._checks import stray_tasks

pytestmark = pytest.mark.filterwarnings("error")

SEED = FakeExchange.generate(seed=11, users=2, orders_per_user=230, leaderboard_size=97)
ADDRESS = next(iter(SEED.orders))

#: Wire texts at the edges of decimal128(38, 18), exactly representable there.
EDGES_18 = [
    "99999999999999999999.999999999999999999",
    "-99999999999999999999.999999999999999999",
    "0.000000000000000001",
    "-0.000000000000000001",
    "1.000000000000000000000000000000000000000000000",  # pyarrow itself refuses this one
    "12345678901234567890.123456789012345678",
    "1E+5",
    "2.5e-3",
    "-0.0",
    "0",
]
#: ... and of decimal128(38, 6).
EDGES_6 = [
    "99999999999999999999999999999999.999999",
    "-0.000001",
    "7.000000000000000000000",
    "4E+31",
    "123.4",
]


def exchange_with(orders: list[WireDict], board: list[WireDict] | None = None) -> FakeExchange:
    """SEED with ``orders`` as ADDRESS's orders (and ``board`` as the leaderboard)."""
    exchange = FakeExchange.generate(seed=11, users=2, orders_per_user=230, leaderboard_size=97)
    exchange.orders[ADDRESS] = orders
    if board is not None:
        exchange.leaderboard = board
    return exchange


def edged(values: list[str], at: int = 3) -> list[WireDict]:
    """SEED's orders with the prices, sizes and filled sizes of a few set to ``values``."""
    orders = [dict(order) for order in SEED.orders[ADDRESS]]
    for i, value in enumerate(values):
        for j, field in enumerate(("price", "size", "filledSize")):
            orders[at + 7 * i + j][field] = value
    return orders


def places(text: str) -> int:
    exponent = Decimal(text).as_tuple().exponent
    assert isinstance(exponent, int)
    return -exponent


def names(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir())


def row_of(model: Any) -> dict[str, Any]:
    """What a row must hold for a model: every attribute, an enum as its value."""
    return {
        field.name: (
            value.value
            if isinstance(value := getattr(model, field.name), Side | OrderStatus)
            else value
        )
        for field in attrs.fields(type(model))
    }


def assert_rows_equal(table: pa.Table, models: list[Any]) -> None:
    rows = table.to_pylist()
    assert len(rows) == len(models)
    for row, model in zip(rows, models, strict=True):
        expected = row_of(model)
        assert row == expected
        for name, value in expected.items():  # exact: same number, and the same type
            assert type(row[name]) is (str if isinstance(value, str) else type(value)), name


@pytest.fixture
async def served() -> AsyncIterator[tuple[FakeServer, Client]]:
    async with (
        FakeServer(SEED) as server,
        Client(base_url=server.base_url) as client,
    ):
        client.set_testing(True, max_retries=0)
        yield server, client


async def serve(exchange: FakeExchange) -> tuple[FakeServer, Client]:
    server = FakeServer(exchange)
    await server.start()
    client = Client(base_url=server.base_url)
    client.set_testing(True, max_retries=0)
    return server, client


async def everything(walk: Walk[Any]) -> list[Any]:
    return [item async for item in walk]


# --- the schema ---------------------------------------------------------------------------


def test_the_schema_comes_from_the_attrs_fields() -> None:
    orders = arrow_schema(Order)
    assert orders.names == [field.name for field in attrs.fields(Order)]
    decimal = pa.decimal128(38, 18)
    assert orders.types == [
        pa.string(), pa.string(), pa.string(), pa.string(),
        decimal, decimal, decimal, pa.string(), pa.int64(),
    ]  # fmt: skip
    assert not any(field.nullable for field in orders)
    assert arrow_schema(Order, decimal_scale=4).field("price").type == pa.decimal128(38, 4)
    board = arrow_schema(LeaderboardEntry)
    assert board == pa.schema(
        [
            pa.field("rank", pa.int64(), nullable=False),
            pa.field("address", pa.string(), nullable=False),
            pa.field("score", pa.float64(), nullable=False),
        ]
    )
    token = arrow_schema(Token)
    assert [(f.name, f.nullable) for f in token][-2:] == [("logo_uri", True), ("price_usd", True)]
    pool = arrow_schema(Pool)
    assert pool.field("base_token").type == pa.struct(list(token))
    assert pool.names == [field.name for field in attrs.fields(Pool)]


def test_a_nested_model_is_a_struct_and_its_errors_name_the_nested_field() -> None:
    token = Token("0xt", "Token", "TOK", 18, Decimal("1000000000.000000000000000001"), None, 1.5)
    quote = attrs.evolve(token, address="0xq", logo_uri="https://logo", price_usd=None)
    pool = Pool("p1", token, quote, 2.5, -0.1, 1e6, 3e6)
    plan = _plan(Pool, 18)
    batch = plan.chunk(pa, [pool, pool], 0)
    assert batch.to_pylist()[1]["base_token"] == {
        **attrs.asdict(token),
        "total_supply": Decimal("1000000000.000000000000000001"),
    }
    assert batch.to_pylist()[0]["quote_token"]["logo_uri"] == "https://logo"
    assert batch.column("quote_token").field("price_usd").null_count == 2
    huge = attrs.evolve(pool, quote_token=attrs.evolve(quote, total_supply=Decimal("1E+30")))
    with pytest.raises(ValueError, match=r"^quote_token\.total_supply of item 8 ") as caught:
        plan.chunk(pa, [pool, huge], 7)
    assert "1E+30" in str(caught.value)


# --- round trips --------------------------------------------------------------------------


async def test_to_arrow_equals_the_models_of_the_same_walk(
    served: tuple[FakeServer, Client],
) -> None:
    _, client = served
    models = await everything(client.iter_orders(ADDRESS, page_size=40))
    table = await client.iter_orders(ADDRESS, page_size=40).to_arrow()
    assert table.schema == arrow_schema(Order)
    assert_rows_equal(table, models)
    entries = await everything(client.iter_leaderboard(page_size=10))
    board = await client.iter_leaderboard(page_size=10).to_arrow()
    assert board.schema == arrow_schema(LeaderboardEntry)
    assert_rows_equal(board, entries)


@pytest.mark.parametrize(("scale", "edges"), [(18, EDGES_18), (6, EDGES_6)], ids=["18", "6"])
async def test_decimals_are_exact_to_the_last_digit(scale: int, edges: list[str]) -> None:
    orders = edged(edges)
    if scale == 6:  # the generated sizes have more digits than 6: keep those that fit
        orders = [
            o
            for o in orders
            if all(o[f] in edges or places(o[f]) <= 6 for f in ("price", "size", "filledSize"))
        ]
    server, client = await serve(exchange_with(orders))
    async with server, client:
        models = await everything(client.iter_orders(ADDRESS, page_size=33))
        table = await client.iter_orders(ADDRESS, page_size=33).to_arrow(decimal_scale=scale)
    assert table.schema.field("price").type == pa.decimal128(38, scale)
    assert_rows_equal(table, models)
    exported = {v for name in ("price", "size") for v in table.column(name).to_pylist()}
    assert {Decimal(text) for text in edges} <= exported


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    values=st.lists(
        st.decimals(allow_nan=False, allow_infinity=False, places=None).filter(
            lambda d: len(d.as_tuple().digits) <= 128 and -128 <= d.adjusted() <= 128
        ),
        min_size=1,
        max_size=5,
    ),
    scale=st.integers(0, 38),
)
def test_a_decimal_is_exported_exactly_or_refused(values: list[Decimal], scale: int) -> None:
    """Against the definition: it fits when value * 10**scale is a whole number of at most
    38 digits; then the column holds exactly the value, else ValueError names it."""
    base = Order("t", "p", "u", Side.BUY, Decimal(0), Decimal(0), Decimal(0), OrderStatus.OPEN, 1)
    orders = [attrs.evolve(base, size=value) for value in values]

    def fits(value: Decimal) -> bool:
        _, digits, exponent = value.as_tuple()
        assert isinstance(exponent, int)
        moved = exponent + scale
        number: int = int("".join(map(str, digits)) or "0")
        if moved < 0:
            number, rest = divmod(number, 10 ** (-moved))
            if rest:
                return False
        else:
            number *= 10**moved
        return number < 10**38

    bad = [i for i, value in enumerate(values) if not fits(value)]
    plan = _plan(Order, scale)
    if bad:
        with pytest.raises(ValueError, match=rf"^size of item {bad[0] + 5} "):
            plan.chunk(pa, orders, 5)
        return
    column = plan.chunk(pa, orders, 5).column("size")
    assert column.type == pa.decimal128(38, scale)
    assert column.to_pylist() == values


# --- values that do not fit ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("field", "wire", "value", "why"),
    [
        ("price", "price", "1.0000000000000000001", "more than 18 digits after the point"),
        (
            "size",
            "size",
            "100000000000000000000",
            "too many digits before the point: decimal128(38, 18) holds 20",
        ),
        (
            "filled_size",
            "filledSize",
            "1E+20",
            "too many digits before the point: decimal128(38, 18) holds 20",
        ),
        ("timestamp", "timestamp", 1735653816205.5, "fractional"),
    ],
)
async def test_a_value_that_does_not_fit_is_refused_with_its_position(
    field: str, wire: str, value: Any, why: str, tmp_path: Path
) -> None:
    orders = [dict(order) for order in SEED.orders[ADDRESS]]
    orders[150][wire] = value
    orders[151][wire] = value  # the first one is named
    server, client = await serve(exchange_with(orders))
    async with server, client:
        # to_arrow, from where the walk stands: 10 items consumed first, so item 140
        walk = client.iter_orders(ADDRESS, page_size=40)
        for _ in range(10):
            await anext(walk)
        before = walk.checkpoint
        with pytest.raises(ValueError, match=rf"^{field} of item 140 \(counted from 0") as caught:
            await walk.to_arrow()
        assert why in str(caught.value)
        assert str(value) in str(caught.value)
        assert walk.checkpoint == before  # nothing was handed out
        assert await anext(walk, None) is None  # the walk ended

        # record_batches of 64: batches 0 and 1 handed out, batch 2 (rows 128..191) is not
        walk = client.iter_orders(ADDRESS, page_size=40)
        batches = walk.record_batches(rows=64)
        got = [await anext(batches), await anext(batches)]
        with pytest.raises(ValueError, match=rf"^{field} of item 150 "):
            await anext(batches)
        assert [batch.num_rows for batch in got] == [64, 64]
        assert walk.checkpoint == await checkpoint_after(client, 128)

        # to_parquet: no file, and the walk stands where the export began
        walk = client.iter_orders(ADDRESS, page_size=40)
        start = walk.checkpoint
        with pytest.raises(ValueError, match=rf"^{field} of item 150 "):
            await walk.to_parquet(tmp_path / "refused.parquet", rows_per_group=16)
        assert walk.checkpoint == start
    assert names(tmp_path) == []
    assert not stray_tasks()


async def test_an_integral_float_timestamp_is_an_int() -> None:
    orders = [dict(order) for order in SEED.orders[ADDRESS][:5]]
    orders[2]["timestamp"] = 1735653816205.0
    server, client = await serve(exchange_with(orders))
    async with server, client:
        table = await client.iter_orders(ADDRESS).to_arrow()
    assert table.column("timestamp").to_pylist()[2] == 1735653816205


async def checkpoint_after(client: Client, count: int) -> Any:
    """The checkpoint of a fresh walk after ``count`` items."""
    walk = client.iter_orders(ADDRESS, page_size=40)
    for _ in range(count):
        await anext(walk)
    checkpoint = walk.checkpoint
    await walk.aclose()
    return checkpoint


# --- batches, row groups and the checkpoint -----------------------------------------------


async def test_batches_are_full_but_the_last_and_the_checkpoint_follows_them(
    served: tuple[FakeServer, Client],
) -> None:
    _, client = served
    models = await everything(client.iter_orders(ADDRESS, page_size=40))
    walk = client.iter_orders(ADDRESS, page_size=40)
    await anext(walk)  # from where the walk stands
    sizes = []
    async with asyncio.timeout(30):
        batches = walk.record_batches(rows=50)
        async for batch in batches:
            sizes.append(batch.num_rows)
            assert walk.checkpoint == await checkpoint_after(client, 1 + sum(sizes))
            if len(sizes) == 3:
                break
    assert sizes == [50, 50, 50]
    # the walk goes on just after the last row handed out: by hand, then exported again
    assert await anext(walk) == models[151]
    rest = await walk.to_arrow()
    assert_rows_equal(rest, models[152:])
    # a whole walk: full batches, a short last one, nothing lost
    all_sizes = [b.num_rows async for b in client.iter_orders(ADDRESS).record_batches(rows=50)]
    assert all_sizes == [50, 50, 50, 50, 30]


async def test_the_checkpoint_after_a_partial_export_resumes_exactly(
    served: tuple[FakeServer, Client],
) -> None:
    _, client = served
    models = await everything(client.iter_leaderboard(page_size=10))
    walk = client.iter_leaderboard(page_size=10)
    seen = []
    async for batch in walk.record_batches(rows=25):
        seen.append(batch)
        if len(seen) == 2:
            break
    text = walk.checkpoint.to_json()
    resumed = client.iter_leaderboard(page_size=10, resume=text)
    rest = await resumed.to_arrow()
    assert_rows_equal(pa.Table.from_batches(seen), models[:50])
    assert_rows_equal(rest, models[50:])


async def test_a_long_walk_is_built_in_chunks_and_batches_of_the_size_asked(
    tmp_path: Path,
) -> None:
    """More rows than one chunk: batches span chunks and pages, and stay full."""
    group = CHUNK // 2 + 1000  # a row group: part of a chunk; a batch: more than one
    many = FakeExchange.generate(seed=3, users=1, orders_per_user=CHUNK * 2 + 500)
    address = next(iter(many.orders))
    async with FakeServer(many) as server, Client(base_url=server.base_url) as client:
        models = await everything(client.iter_orders(address, page_size=500))
        path = tmp_path / "many.parquet"
        rows = await client.iter_orders(address, page_size=500).to_parquet(
            path, rows_per_group=group
        )
        walk = client.iter_orders(address, page_size=500)
        batches = [b async for b in walk.record_batches(rows=CHUNK + 1000)]
    assert rows == len(models) == CHUNK * 2 + 500
    meta = pq.ParquetFile(path).metadata
    groups = [meta.row_group(i).num_rows for i in range(meta.num_row_groups)]
    assert groups == [group, group, group, len(models) - 3 * group]
    assert_rows_equal(pq.read_table(path), models)
    assert [b.num_rows for b in batches] == [CHUNK + 1000, len(models) - CHUNK - 1000]
    assert_rows_equal(pa.Table.from_batches(batches), models)


async def test_to_parquet_writes_row_groups_and_returns_the_rows(
    served: tuple[FakeServer, Client], tmp_path: Path
) -> None:
    _, client = served
    path = tmp_path / "orders.parquet"
    path.write_bytes(b"an older file")
    walk = client.iter_orders(ADDRESS, page_size=40, max_items=200)
    for _ in range(3):
        await anext(walk)
    assert await walk.to_parquet(str(path), rows_per_group=64, decimal_scale=24) == 197
    assert walk.checkpoint == await checkpoint_after(client, 200)
    meta = pq.ParquetFile(path).metadata
    assert [meta.row_group(i).num_rows for i in range(meta.num_row_groups)] == [64, 64, 64, 5]
    models = (await everything(client.iter_orders(ADDRESS, page_size=40)))[3:200]
    table = pq.read_table(path)
    assert table.schema == arrow_schema(Order, decimal_scale=24)
    assert_rows_equal(table, models)
    assert names(tmp_path) == ["orders.parquet"]
    # an empty walk: a file with the schema and no rows
    empty = tmp_path / "empty.parquet"
    assert (
        await client.iter_orders(ADDRESS, status="EXPIRED", side="BUY", market="0xnone").to_parquet(
            empty
        )
        == 0
    )
    assert pq.read_table(empty).schema == arrow_schema(Order)


async def test_the_file_appears_only_complete_and_a_cancel_leaves_nothing(
    tmp_path: Path,
) -> None:
    server, client = await serve(SEED)
    path = tmp_path / "held.parquet"
    path.write_bytes(b"the previous export")
    async with server, client, server.gate("orders") as gate:
        gate.release(3)
        walk = client.iter_orders(ADDRESS, page_size=20)
        task = asyncio.create_task(walk.to_parquet(path, rows_per_group=16))
        await gate.arrived(4)  # page 4 held: 3 row groups of 16 are written or on their way
        parts = [name for name in names(tmp_path) if name != "held.parquet"]
        assert [name[: len(".held.parquet.")] for name in parts] == [".held.parquet."]
        assert path.read_bytes() == b"the previous export"
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert walk.checkpoint == client.iter_orders(ADDRESS, page_size=20).checkpoint
        assert names(tmp_path) == ["held.parquet"]
        assert path.read_bytes() == b"the previous export"
    assert not stray_tasks()


async def test_a_failure_mid_walk_leaves_no_file(tmp_path: Path) -> None:
    server, client = await serve(SEED)
    async with server, client:
        server.script("orders", Reply(200), Reply(200), Reply(503))
        walk = client.iter_orders(ADDRESS, page_size=50)
        with pytest.raises(ServerError):
            await walk.to_parquet(tmp_path / "failed.parquet", rows_per_group=20)
        assert walk.checkpoint == client.iter_orders(ADDRESS, page_size=50).checkpoint
        server.script("orders", Reply(200), Reply(503))
        with pytest.raises(ServerError):
            await client.iter_orders(ADDRESS, page_size=50).to_arrow()
    assert names(tmp_path) == []


# --- what is refused before anything is read ----------------------------------------------


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda w: w.record_batches(rows=0), "rows must be a positive int"),
        (lambda w: w.record_batches(rows=True), "rows must be a positive int"),
        (lambda w: w.record_batches(decimal_scale=39), "decimal_scale must be an int from 0"),
        (lambda w: w.to_arrow(decimal_scale=-1), "decimal_scale must be an int from 0"),
        (
            lambda w: w.to_parquet("never-written.parquet", rows_per_group=1.5),
            "rows_per_group must be",
        ),
    ],
)
async def test_bad_arguments_are_refused_before_a_request(
    served: tuple[FakeServer, Client], call: Any, message: str
) -> None:
    server, client = served
    walk = client.iter_orders(ADDRESS)

    async def export() -> None:
        result = call(walk)
        if asyncio.iscoroutine(result):
            await result

    with pytest.raises(ValueError, match=message):
        await export()
    assert server.requests == []
    await walk.aclose()


async def test_a_directory_or_missing_one_is_refused_before_a_request(
    served: tuple[FakeServer, Client], tmp_path: Path
) -> None:
    server, client = served
    with pytest.raises(IsADirectoryError):
        await client.iter_orders(ADDRESS).to_parquet(tmp_path)
    with pytest.raises(FileNotFoundError):
        await client.iter_orders(ADDRESS).to_parquet(tmp_path / "no" / "such.parquet")
    assert server.requests == []


async def test_a_walk_of_pages_has_no_export(served: tuple[FakeServer, Client]) -> None:
    _, client = served
    pages: Any = client.iter_order_pages(ADDRESS)
    with pytest.raises(TypeError, match="walks of items"):
        await pages.to_arrow()
    with pytest.raises(TypeError, match="walks of items"):
        pages.record_batches()
    await pages.aclose()


# --- without pyarrow ----------------------------------------------------------------------

NO_PYARROW = textwrap.dedent(
    """
    import asyncio, sys
    sys.modules["pyarrow"] = None  # import pyarrow raises ImportError, as when not installed
    import asyncapi_client, asyncapi_client._cli
    from asyncapi_client import Client
    assert not [m for m in sys.modules if m.startswith("pyarrow") and sys.modules[m]]

    async def main():
        async with Client(base_url="http://127.0.0.1:9") as client:
            walk = client.iter_orders("0xabc")
            try:
                walk.record_batches()
            except ImportError as exc:
                print("record_batches:", exc)
            for name, coro in (("to_arrow", walk.to_arrow()), ("to_parquet", walk.to_parquet("x"))):
                try:
                    await coro
                except ImportError as exc:
                    print(f"{name}:", exc)
    asyncio.run(main())
    """
)


def test_without_pyarrow_each_export_raises_an_import_error_naming_the_extra() -> None:
    done = subprocess.run(
        [sys.executable, "-c", NO_PYARROW],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        cwd=Path(__file__).resolve().parents[2],
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert [line.partition(":")[0] for line in lines] == [
        "record_batches",
        "to_arrow",
        "to_parquet",
    ]
    assert all("pip install 'asyncapi-client[arrow]'" in line for line in lines), lines


def test_the_defaults_of_the_methods_are_the_exports() -> None:
    for method, name in ((Walk.to_parquet, "rows_per_group"), (Walk.record_batches, "rows")):
        assert inspect.signature(method).parameters[name].default == DEFAULT_ROWS


def test_importing_the_package_does_not_import_pyarrow() -> None:
    """Nor the export module: the start-up cost of the package does not grow with it."""
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys, asyncapi_client, asyncapi_client._cli; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] == 'pyarrow' "
            "or m == 'asyncapi_client._export'))",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert done.stdout.strip() == "[]"


# --- every column refuses what it cannot hold ---------------------------------------------

ORDER = Order("t", "p", "u", Side.BUY, Decimal(1), Decimal(2), Decimal(0), OrderStatus.OPEN, 7)
ENTRY = LeaderboardEntry(1, "0xa", 2.5)


def odd(model: Any, **changes: Any) -> Any:
    """``model`` with values its annotations do not allow (what a column must refuse)."""
    return attrs.evolve(model, **changes)


@pytest.mark.parametrize(
    ("item", "message"),
    [
        (odd(ORDER, timestamp=2**63), "timestamp of item 4 .* does not fit int64"),
        (odd(ORDER, timestamp=-(2**63) - 1), "timestamp of item 4 .* does not fit int64"),
        (odd(ORDER, timestamp=1e19), "timestamp of item 4 .* does not fit int64"),
        (odd(ORDER, timestamp=float("inf")), "timestamp of item 4 .* is fractional"),
        (odd(ORDER, timestamp=True), "timestamp of item 4 .* is not a number"),
        (odd(ORDER, timestamp="7"), "timestamp of item 4 .* is not a number"),
        (odd(ORDER, price=Decimal("NaN")), "price of item 4 .* not a finite number"),
        (odd(ORDER, size="1.5"), "size of item 4 .* is not a decimal"),
        (odd(ORDER, user=5), "user of item 4 .* is not text"),
        (
            odd(ORDER, price=Decimal("1" * 61)),
            r"price of item 4 .*: (1{28})\.\.\.\1 \(61 characters\)",
        ),
        (odd(ENTRY, score=2**60 + 1), "score of item 4 .* cannot be a float64 exactly"),
        (odd(ENTRY, score=10**400), "score of item 4 .* cannot be a float64 exactly"),
        (odd(ENTRY, score="x"), "score of item 4 .* is not a number"),
        (odd(ENTRY, rank=1.5), "rank of item 4 .* is fractional"),
    ],
)
def test_each_column_refuses_what_it_cannot_hold(item: Any, message: str) -> None:
    good: Any = ORDER if isinstance(item, Order) else ENTRY
    plan = _plan(Order if isinstance(item, Order) else LeaderboardEntry, 18)
    with pytest.raises(ValueError, match=message):
        plan.chunk(pa, [good, item, good], 3)


def test_whole_numbers_are_taken_where_a_column_expects_another_kind() -> None:
    entries = [odd(ENTRY, rank=2.0, score=3), ENTRY]
    assert _plan(LeaderboardEntry, 18).chunk(pa, entries, 0).to_pylist() == [
        {"rank": 2, "address": "0xa", "score": 3.0},
        {"rank": 1, "address": "0xa", "score": 2.5},
    ]


async def test_a_cancel_waits_for_the_row_group_being_written(
    served: tuple[FakeServer, Client], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The file in progress is removed only once the thread writing to it has finished."""
    _, client = served
    entered, release, finished = threading.Event(), threading.Event(), threading.Event()
    write = _PartFile.write

    def slow_write(self: _PartFile, table: pa.Table, rows: int) -> None:
        entered.set()
        release.wait(30)
        write(self, table, rows)
        finished.set()

    monkeypatch.setattr(_PartFile, "write", slow_write)
    task = asyncio.create_task(client.iter_orders(ADDRESS).to_parquet(tmp_path / "o.parquet"))
    assert await asyncio.to_thread(entered.wait, 30)
    task.cancel()
    done, _ = await asyncio.wait([task], timeout=0.05)
    assert not done  # still waiting for the thread: the file is not removed under it
    assert len(names(tmp_path)) == 1
    release.set()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert finished.is_set()
    assert names(tmp_path) == []


async def test_a_path_must_be_text(served: tuple[FakeServer, Client]) -> None:
    _, client = served
    with pytest.raises(TypeError, match="path must be a str or a path"):
        await client.iter_orders(ADDRESS).to_parquet(cast(Any, b"orders.parquet"))


# --- the guide ----------------------------------------------------------------------------

GUIDE = Path(__file__).resolve().parents[2] / "docs" / "guides" / "export.md"


def guide_programs() -> list[str]:
    """Every code block of the guide not marked ``<!-- fragment -->``: Python programs."""
    text = GUIDE.read_text(encoding="utf-8")
    programs = []
    for match in re.finditer(r"(<!-- fragment -->\n)?```(\w+)\n(.*?)```", text, re.DOTALL):
        fragment, language, body = match.groups()
        if fragment:
            continue
        if language == "sh":  # the install line
            assert body.startswith("pip install"), body
            continue
        if language == "text":  # what a program prints (tests/docs/test_examples.py checks it)
            continue
        assert language == "python", language
        programs.append(body)
    return programs


def test_the_guide_has_runnable_programs() -> None:
    assert len(guide_programs()) == 4


@pytest.mark.parametrize("number", [0, 1, 2, 3])
def test_each_program_of_the_guide_runs(number: int, tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-c", guide_programs()[number]],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout
