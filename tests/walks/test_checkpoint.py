"""Checkpoints: their JSON, every way a bad one is refused, and resuming against the fake.

Resuming is proven against the shipped fake exchange (``asyncapi_client.testing``): a walk
stopped anywhere and resumed from its checkpoint in a fresh Client yields exactly the rest
of the uninterrupted walk; a walk that fails under faults and is resumed until done yields
every order once.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable
from typing import Any

import attrs
import orjson
import pytest

from asyncapi_client import (
    ApiError,
    Checkpoint,
    Client,
    Network,
    Order,
    OrderStatus,
    PaginationError,
    Walk,
)
from asyncapi_client.testing import FakeExchange, FakeServer, Fault
from tests._checks import settled, stray_tasks

EXCHANGE = FakeExchange.generate(seed=11, users=2, orders_per_user=60, leaderboard_size=40)
USER = next(iter(EXCHANGE.orders))


@pytest.fixture(autouse=True)
async def _no_stray_tasks() -> AsyncIterator[None]:
    yield
    assert await settled(lambda: not stray_tasks()), stray_tasks()


@pytest.fixture
async def fake() -> AsyncIterator[FakeServer]:
    async with FakeServer(attrs.evolve(EXCHANGE)) as server:
        yield server


def client_of(server: FakeServer, **kwargs: Any) -> Client:
    return Client(base_url=server.base_url, testnet_base_url=server.testnet_base_url, **kwargs)


def orders_cp(**changes: Any) -> Checkpoint:
    values: dict[str, Any] = {
        "operation": "orders",
        "network": Network.MAINNET,
        "page_size": 10,
        "address": USER,
        "cursor": "abc",
        "consumed": 3,
        "last": "0xtx",
    }
    return Checkpoint(**(values | changes))


def board_cp(**changes: Any) -> Checkpoint:
    values: dict[str, Any] = {
        "operation": "leaderboard",
        "network": Network.TESTNET,
        "page_size": None,
        "page": 2,
        "consumed": 1,
        "last": "0xabc",
    }
    return Checkpoint(**(values | changes))


# --- the value and its JSON -------------------------------------------------------------------


@pytest.mark.parametrize(
    "checkpoint",
    [orders_cp(), board_cp(), orders_cp(cursor=None, consumed=0, last=None, status="OPEN")],
)
def test_json_round_trip_is_exact_compact_and_versioned(checkpoint: Checkpoint) -> None:
    text = checkpoint.to_json()
    assert Checkpoint.from_json(text) == checkpoint
    assert Checkpoint.from_json(text.encode()) == checkpoint
    assert "\n" not in text
    assert " " not in text
    data = orjson.loads(text)
    assert data["version"] == 1
    assert data["operation"] == checkpoint.operation
    assert data["network"] == checkpoint.network.value


def test_an_orders_checkpoint_names_the_walk_and_the_position() -> None:
    data = orjson.loads(orders_cp(market="p", side="BUY").to_json())
    assert data == {
        "version": 1,
        "operation": "orders",
        "network": "mainnet",
        "address": USER,
        "market": "p",
        "status": None,
        "side": "BUY",
        "page_size": 10,
        "cursor": "abc",
        "consumed": 3,
        "last": "0xtx",
    }
    assert set(orjson.loads(board_cp().to_json())) == {
        "version",
        "operation",
        "network",
        "page_size",
        "page",
        "consumed",
        "last",
    }


def test_a_checkpoint_is_a_frozen_value() -> None:
    checkpoint = orders_cp()
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        checkpoint.consumed = 4  # type: ignore[misc]
    assert hash(checkpoint) == hash(orders_cp())


GOOD = orjson.loads(orders_cp().to_json())
GOOD_BOARD = orjson.loads(board_cp().to_json())

BAD_TEXT: dict[str, object] = {
    "not json": "checkpoint",
    "empty": "",
    "a list": "[1, 2]",
    "a number": "1",
    "null": "null",
    "no version": orjson.dumps({k: v for k, v in GOOD.items() if k != "version"}).decode(),
    "version 2": orjson.dumps(GOOD | {"version": 2}).decode(),
    "version as text": orjson.dumps(GOOD | {"version": "1"}).decode(),
    "version true": orjson.dumps(GOOD | {"version": True}).decode(),
    "unknown operation": orjson.dumps(GOOD | {"operation": "tokens"}).decode(),
    "operation not text": orjson.dumps(GOOD | {"operation": 7}).decode(),
    "missing cursor": orjson.dumps({k: v for k, v in GOOD.items() if k != "cursor"}).decode(),
    "unknown field": orjson.dumps(GOOD | {"extra": 1}).decode(),
    "board with a cursor": orjson.dumps(GOOD_BOARD | {"cursor": "c"}).decode(),
    "unknown network": orjson.dumps(GOOD | {"network": "devnet"}).decode(),
    "network not text": orjson.dumps(GOOD | {"network": 1}).decode(),
    "page_size zero": orjson.dumps(GOOD | {"page_size": 0}).decode(),
    "page_size text": orjson.dumps(GOOD | {"page_size": "10"}).decode(),
    "page_size float": orjson.dumps(GOOD | {"page_size": 10.0}).decode(),
    "page_size true": orjson.dumps(GOOD | {"page_size": True}).decode(),
    "consumed negative": orjson.dumps(GOOD | {"consumed": -1}).decode(),
    "consumed text": orjson.dumps(GOOD | {"consumed": "3"}).decode(),
    "consumed without last": orjson.dumps(GOOD | {"last": None}).decode(),
    "last without consumed": orjson.dumps(GOOD | {"consumed": 0}).decode(),
    "last not text": orjson.dumps(GOOD | {"last": 5}).decode(),
    "empty cursor": orjson.dumps(GOOD | {"cursor": ""}).decode(),
    "cursor a list": orjson.dumps(GOOD | {"cursor": ["a"]}).decode(),
    "address empty": orjson.dumps(GOOD | {"address": ""}).decode(),
    "address null": orjson.dumps(GOOD | {"address": None}).decode(),
    "status a number": orjson.dumps(GOOD | {"status": 1}).decode(),
    "market an object": orjson.dumps(GOOD | {"market": {}}).decode(),
    "page zero": orjson.dumps(GOOD_BOARD | {"page": 0}).decode(),
    "page null": orjson.dumps(GOOD_BOARD | {"page": None}).decode(),
    "page float": orjson.dumps(GOOD_BOARD | {"page": 2.0}).decode(),
    "not text": 12,
    "a dict, not its text": GOOD,
}


@pytest.mark.parametrize("bad", list(BAD_TEXT))
def test_a_bad_checkpoint_text_is_a_value_error_with_a_clear_message(bad: str) -> None:
    with pytest.raises(ValueError, match=r"checkpoint|JSON") as caught:
        Checkpoint.from_json(BAD_TEXT[bad])  # type: ignore[arg-type]
    assert type(caught.value) is ValueError  # not a KeyError, TypeError or decoder's class
    assert len(str(caught.value)) < 300


@pytest.mark.parametrize("checkpoint", [orders_cp(), board_cp()])
def test_every_truncation_of_a_checkpoint_is_a_value_error(checkpoint: Checkpoint) -> None:
    text = checkpoint.to_json()
    for cut in range(len(text)):
        with pytest.raises(ValueError, match="checkpoint"):
            Checkpoint.from_json(text[:cut])


def test_the_version_message_says_which_version_is_read() -> None:
    with pytest.raises(
        ValueError, match="version 2 is not supported: this library reads version 1"
    ):
        Checkpoint.from_json(BAD_TEXT["version 2"])  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "changes",
    [
        {"operation": "pools"},
        {"network": "mainnet"},
        {"page": 2},
        {"address": None},
        {"consumed": 1, "last": None},
    ],
)
def test_the_constructor_checks_its_fields_too(changes: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match="invalid checkpoint"):
        orders_cp(**changes)


def test_a_checkpoint_with_text_that_has_no_utf8_form_cannot_be_written() -> None:
    with pytest.raises(ValueError, match="cannot be written as JSON"):
        orders_cp(market="\ud800").to_json()


# --- resume= is checked before any request ----------------------------------------------------


def _start_of(walk: Walk[Any]) -> Checkpoint:
    return walk.checkpoint


WRONG_RESUMES: dict[str, tuple[Callable[[Client, Any], Walk[Any]], Callable[[Checkpoint], Any]]] = {
    # name: (the walk to make with resume=, how to spoil a good checkpoint of that walk)
    "leaderboard checkpoint to orders": (
        lambda c, r: c.iter_orders(USER, page_size=10, resume=r),
        lambda good: board_cp(network=Network.MAINNET, page_size=10),
    ),
    "orders checkpoint to leaderboard": (
        lambda c, r: c.iter_leaderboard(page_size=10, resume=r),
        lambda good: orders_cp(),
    ),
    "another network": (
        lambda c, r: c.iter_orders(USER, page_size=10, resume=r),
        lambda good: attrs.evolve(good, network=Network.TESTNET),
    ),
    "another user": (
        lambda c, r: c.iter_orders(USER, page_size=10, resume=r),
        lambda good: attrs.evolve(good, address="0xsomeone"),
    ),
    "another status": (
        lambda c, r: c.iter_orders(USER, page_size=10, resume=r),
        lambda good: attrs.evolve(good, status="OPEN"),
    ),
    "another side": (
        lambda c, r: c.iter_order_pages(USER, page_size=10, resume=r),
        lambda good: attrs.evolve(good, side="SELL"),
    ),
    "another market": (
        lambda c, r: c.iter_orders(USER, page_size=10, resume=r),
        lambda good: attrs.evolve(good, market="0xpool"),
    ),
    "another page size": (
        lambda c, r: c.iter_orders(USER, page_size=10, resume=r),
        lambda good: attrs.evolve(good, page_size=20),
    ),
    "no page size": (
        lambda c, r: c.iter_leaderboard_pages(page_size=10, resume=r),
        lambda good: attrs.evolve(good, page_size=None),
    ),
    "leaderboard on another network": (
        lambda c, r: c.iter_leaderboard(page_size=10, network="testnet", resume=r),
        lambda good: attrs.evolve(good, network=Network.MAINNET),
    ),
    "as text": (
        lambda c, r: c.iter_orders(USER, page_size=10, resume=r),
        lambda good: attrs.evolve(good, page_size=20).to_json(),
    ),
    "malformed text": (
        lambda c, r: c.iter_leaderboard(resume=r),
        lambda good: good.to_json()[:-5],
    ),
    "not a checkpoint": (
        lambda c, r: c.iter_orders(USER, resume=r),
        lambda good: {"cursor": "x"},
    ),
}


@pytest.mark.parametrize("case", list(WRONG_RESUMES))
async def test_a_checkpoint_of_another_walk_is_refused_before_any_request(
    fake: FakeServer, case: str
) -> None:
    make, spoil = WRONG_RESUMES[case]
    async with client_of(fake) as client:
        good = _start_of(make(client, None))
        with pytest.raises(ValueError, match=r"checkpoint|resume"):
            make(client, spoil(good))
    assert fake.requests == []


async def test_the_mismatch_message_names_each_difference(fake: FakeServer) -> None:
    async with client_of(fake) as client:
        theirs = client.iter_orders(USER, status="open", page_size=5, network="testnet")
        with pytest.raises(ValueError) as caught:
            client.iter_orders(USER, page_size=10, resume=theirs.checkpoint)
    message = str(caught.value)
    assert "network 'testnet' (this walk: 'mainnet')" in message
    assert "status 'OPEN' (this walk: None)" in message
    assert "page_size 5 (this walk: 10)" in message


async def test_filters_given_as_enum_or_text_in_any_case_are_the_same_walk(
    fake: FakeServer,
) -> None:
    async with client_of(fake) as client:
        walk = client.iter_orders(USER, status=OrderStatus.FILLED, side="sell", page_size=4)
        async with contextlib.aclosing(walk):
            first = await anext(walk)
        rest = [
            o
            async for o in client.iter_orders(
                USER, status="filled", side="SELL", page_size=4, resume=walk.checkpoint
            )
        ]
        every = [
            o async for o in client.iter_orders(USER, status="FILLED", side="SELL", page_size=4)
        ]
    assert [first, *rest] == every


# --- what a walk's checkpoint says ------------------------------------------------------------


async def test_checkpoint_before_the_first_item_is_the_start(fake: FakeServer) -> None:
    async with client_of(fake) as client:
        orders = client.iter_orders(USER, page_size=5)
        board = client.iter_leaderboard_pages()
        assert (orders.checkpoint.cursor, orders.checkpoint.consumed, orders.checkpoint.last) == (
            None,
            0,
            None,
        )
        assert (board.checkpoint.page, board.checkpoint.consumed, board.checkpoint.last) == (
            1,
            0,
            None,
        )
    assert fake.requests == []


async def test_checkpoint_moves_item_by_item_and_names_the_last_order(fake: FakeServer) -> None:
    served = EXCHANGE.orders[USER]
    async with client_of(fake) as client:
        walk = client.iter_orders(USER, page_size=5)
        positions = []
        async for order in walk:
            point = walk.checkpoint
            positions.append((point.consumed, point.last == order.transaction_id))
            if len(positions) == 7:
                break
        await walk.aclose()
        second_page_cursor = walk.checkpoint.cursor
        page2 = await client.orders(USER, limit=5, cursor=second_page_cursor)
    assert positions == [
        (1, True),
        (2, True),
        (3, True),
        (4, True),
        (5, True),
        (1, True),
        (2, True),
    ]
    assert second_page_cursor is not None
    assert [o.transaction_id for o in page2.orders] == [o["transactionId"] for o in served[5:10]]


async def test_page_walks_checkpoint_at_page_boundaries(fake: FakeServer) -> None:
    async with client_of(fake) as client:
        pages = client.iter_order_pages(USER, page_size=7)
        async with contextlib.aclosing(pages):
            page = await anext(pages)
            point = pages.checkpoint
        board = client.iter_leaderboard_pages(page_size=6)
        async with contextlib.aclosing(board):
            await anext(board)
            board_page = await anext(board)
            board_point = board.checkpoint
    assert (point.cursor, point.consumed, point.last) == (None, 7, page.orders[-1].transaction_id)
    assert (board_point.page, board_point.consumed) == (2, 6)
    assert board_point.last == board_page.leaderboard[-1].address


async def test_a_failed_walk_keeps_the_checkpoint_of_its_last_item(fake: FakeServer) -> None:
    served = EXCHANGE.orders[USER]
    async with client_of(fake, max_retries=0) as client:
        walk = client.iter_orders(USER, page_size=10)
        got: list[Order] = []

        async def consume() -> None:
            async for order in walk:
                got.append(order)
                if len(got) == 15:
                    fake.set_fault("orders", Fault(error_rate=1.0))  # page 3 fails

        with pytest.raises(ApiError):
            await consume()
        fake.clear_faults()
        assert len(got) == 20
        assert walk.checkpoint.last == got[-1].transaction_id
        rest = [o async for o in client.iter_orders(USER, page_size=10, resume=walk.checkpoint)]
    assert [o.transaction_id for o in got + rest] == [o["transactionId"] for o in served]


async def test_max_items_with_resume_counts_the_items_of_the_resumed_walk(fake: FakeServer) -> None:
    served = [o["transactionId"] for o in EXCHANGE.orders[USER]]
    async with client_of(fake) as client:
        first = client.iter_orders(USER, page_size=4, max_items=6)
        head = [o.transaction_id async for o in first]
        second = client.iter_orders(USER, page_size=4, max_items=6, resume=first.checkpoint)
        middle = [o.transaction_id async for o in second]
        board = client.iter_leaderboard(page_size=4, max_items=5)
        top = [e.address async for e in board]
        more = [
            e.address
            async for e in client.iter_leaderboard(
                page_size=4, max_items=5, resume=board.checkpoint
            )
        ]
    assert head + middle == served[:12]
    assert top + more == [e["address"] for e in EXCHANGE.leaderboard[:10]]


async def test_resuming_a_finished_walk_yields_nothing(fake: FakeServer) -> None:
    async with client_of(fake) as client:
        walk = client.iter_orders(USER, page_size=25)
        every = [o async for o in walk]
        after = [o async for o in client.iter_orders(USER, page_size=25, resume=walk.checkpoint)]
        board = client.iter_leaderboard_pages(page_size=25)
        pages = [p async for p in board]
        after_board = [
            p async for p in client.iter_leaderboard_pages(page_size=25, resume=board.checkpoint)
        ]
    assert len(every) == len(EXCHANGE.orders[USER])
    assert after == []
    assert sum(len(p.leaderboard) for p in pages) == len(EXCHANGE.leaderboard)
    assert after_board == []


async def test_a_page_walk_resumed_mid_page_first_yields_the_rest_of_that_page(
    fake: FakeServer,
) -> None:
    served = [o["transactionId"] for o in EXCHANGE.orders[USER]]
    async with client_of(fake) as client:
        items = client.iter_orders(USER, page_size=10, max_items=13)
        _ = [o async for o in items]
        pages = [
            p async for p in client.iter_order_pages(USER, page_size=10, resume=items.checkpoint)
        ]
    assert [len(p.orders) for p in pages][:2] == [7, 10]
    assert [o.transaction_id for p in pages for o in p.orders] == served[13:]


async def test_an_item_walk_resumes_from_a_page_walk_checkpoint(fake: FakeServer) -> None:
    entries = [e["address"] for e in EXCHANGE.leaderboard]
    async with client_of(fake) as client:
        pages = client.iter_leaderboard_pages(page_size=9, concurrency=2)
        async with contextlib.aclosing(pages):
            await anext(pages)
            await anext(pages)
        rest = [
            e.address
            async for e in client.iter_leaderboard(page_size=9, resume=pages.checkpoint.to_json())
        ]
    assert rest == entries[18:]


# --- the data changed: PaginationError, never a silent skip or repeat ---------------------------


async def test_the_last_order_handed_out_removed_is_a_pagination_error(fake: FakeServer) -> None:
    async with client_of(fake) as client:
        walk = client.iter_orders(USER, page_size=10, max_items=14)
        _ = [o async for o in walk]
        del fake.exchange.orders[USER][13]  # the position's own order is gone
        with pytest.raises(PaginationError, match=r"cannot resume.*item 4.*changed"):
            _ = [o async for o in client.iter_orders(USER, page_size=10, resume=walk.checkpoint)]


async def test_a_first_page_that_lost_orders_is_a_pagination_error(fake: FakeServer) -> None:
    async with client_of(fake) as client:
        walk = client.iter_orders(USER, page_size=10, max_items=6)
        _ = [o async for o in walk]
        fake.exchange.orders[USER][:] = fake.exchange.orders[USER][:4]
        with pytest.raises(PaginationError, match="only 4 item"):
            _ = [
                o async for o in client.iter_order_pages(USER, page_size=10, resume=walk.checkpoint)
            ]


async def test_a_leaderboard_that_shrank_below_the_position_is_a_pagination_error(
    fake: FakeServer,
) -> None:
    async with client_of(fake) as client:
        walk = client.iter_leaderboard(page_size=8, max_items=14)
        _ = [e async for e in walk]
        del fake.exchange.leaderboard[12:]
        with pytest.raises(PaginationError, match=r"page 2 had .* as item 6 .*only 4 item"):
            _ = [
                e async for e in client.iter_leaderboard_pages(page_size=8, resume=walk.checkpoint)
            ]


async def test_a_leaderboard_that_moved_is_a_pagination_error(fake: FakeServer) -> None:
    async with client_of(fake) as client:
        walk = client.iter_leaderboard(page_size=8, max_items=11)
        _ = [e async for e in walk]
        board = fake.exchange.leaderboard
        board.insert(0, board.pop())  # the last account jumps to the top: everyone moves down
        with pytest.raises(PaginationError, match=r"page 2 had '0x[0-9a-f]+' as item 3"):
            _ = [e async for e in client.iter_leaderboard(page_size=8, resume=walk.checkpoint)]
