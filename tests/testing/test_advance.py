"""``FakeExchange.advance``: seeded changes that the same seed and calls repeat, journalled, and
orders that only move forward."""

from __future__ import annotations

import time
from collections import Counter
from decimal import Decimal

import pytest

from asyncapi_client.testing import Change, FakeExchange, WireDict

WORKING = ("OPEN", "PARTIALLY_FILLED")
FINAL = ("FILLED", "CANCELLED", "EXPIRED")
# status -> the statuses an update may move it to
FORWARD = {
    "OPEN": {"PARTIALLY_FILLED", "FILLED", "CANCELLED", "EXPIRED"},
    "PARTIALLY_FILLED": {"PARTIALLY_FILLED", "FILLED", "CANCELLED", "EXPIRED"},
}
POOL_MOVES = {"price", "priceChange24h", "volume24h", "tvl"}


def small(seed: int = 5) -> FakeExchange:
    return FakeExchange.generate(
        seed=seed, users=3, orders_per_user=40, leaderboard_size=30, pools=4, tokens=10
    )


def test_the_same_seed_and_calls_give_equal_journals_and_data() -> None:
    one, two = small(), small()
    for exchange in (one, two):
        exchange.advance()
        exchange.advance(199)
        exchange.advance(300)
    assert len(one.journal) == 500
    assert one.journal == two.journal
    assert one == two
    other = small()
    other.advance(500)  # the same seed and another split of the calls: the same stream
    assert other.journal == one.journal
    different = small(seed=6)
    different.advance(500)
    assert [c.kind for c in different.journal] != [c.kind for c in one.journal]


def test_advance_returns_what_it_applied_and_journals_it() -> None:
    exchange = small()
    before = time.time()
    first = exchange.advance(3)
    second = exchange.advance(400)
    after = time.time()
    assert exchange.journal == first + second
    assert [c.seq for c in exchange.journal] == list(range(1, 404))
    assert all(before <= c.at <= after for c in exchange.journal)
    assert [c.at for c in exchange.journal] == sorted(c.at for c in exchange.journal)
    kinds = Counter(c.kind for c in exchange.journal)
    assert set(kinds) == {"order.new", "order.update", "pool.update", "leaderboard.update"}
    for change in exchange.journal:
        assert isinstance(change, Change)
        assert (change.before is None) == (change.kind == "order.new")
        if change.kind.startswith("order."):
            assert change.key == change.after["transactionId"]
            assert change.address == change.after["user"]
        elif change.kind == "pool.update":
            assert change.key == change.after["poolId"]
            assert change.address is None
        else:
            assert change.key == change.after["address"]
            assert change.address is None


def test_changes_are_copies_that_later_changes_leave_alone() -> None:
    exchange = small()
    journal = exchange.advance(300)
    updated = next(c for c in journal if c.kind == "order.update" and c.after["status"] in FINAL)
    snapshot = dict(updated.after)
    exchange.advance(300)
    assert updated.after == snapshot
    assert updated.before is not None
    assert updated.before["status"] in WORKING


def _amount(order: WireDict, name: str) -> Decimal:
    return Decimal(order[name])


def _check_update(change: Change, last: WireDict) -> None:
    """One order update against what was last seen of that order."""
    before, after = change.before, change.after
    assert before == last, "an update starts from what the order was"
    assert before["status"] in WORKING, "a final order never changes again"
    assert after["status"] in FORWARD[before["status"]]
    assert {k for k in after if after[k] != before[k]} <= {"status", "filledSize"}
    assert _amount(after, "filledSize") >= _amount(before, "filledSize")
    if after["status"] == "FILLED":
        assert after["filledSize"] == after["size"]
    if after["status"] == "PARTIALLY_FILLED":
        assert 0 < _amount(after, "filledSize") < _amount(after, "size")
    if after["status"] in ("CANCELLED", "EXPIRED"):
        assert after["filledSize"] == before["filledSize"]


def test_orders_only_move_forward_over_thousands_of_changes() -> None:
    exchange = small()
    last: dict[str, WireDict] = {
        o["transactionId"]: o.copy() for orders in exchange.orders.values() for o in orders
    }
    created: dict[str, list[str]] = {address: [] for address in exchange.orders}
    for change in exchange.advance(6000):
        if change.kind == "order.new":
            assert change.key not in last
            assert change.after["status"] == "OPEN"
            assert Decimal(change.after["filledSize"]) == 0 < Decimal(change.after["size"])
            created[change.address or ""].insert(0, change.key)
        elif change.kind == "order.update":
            _check_update(change, last[change.key])
        else:
            continue
        last[change.key] = change.after
    updates = Counter(c.after["status"] for c in exchange.journal if c.kind == "order.update")
    assert set(updates) == {"PARTIALLY_FILLED", "FILLED", "CANCELLED", "EXPIRED"}
    for address, orders in exchange.orders.items():
        # new orders are at the front, newest first; the data is what the journal says
        fresh = created[address]
        assert [o["transactionId"] for o in orders[: len(fresh)]] == fresh
        assert all(o == last[o["transactionId"]] for o in orders)
        working = [o for o in orders if o["status"] in WORKING]
        assert exchange.users[address]["orders"] == working


def test_pools_and_the_leaderboard_move() -> None:
    exchange = small()
    board_size = len(exchange.leaderboard)
    for change in exchange.advance(1500):
        if change.kind == "pool.update":
            assert change.before is not None
            moved = {k for k in change.after if change.after[k] != change.before[k]}
            assert moved <= POOL_MOVES
        elif change.kind == "leaderboard.update":
            assert change.before is not None
            assert change.after["score"] != change.before["score"]
            board = exchange.leaderboard
            assert [e["rank"] for e in board] == list(range(1, board_size + 1))
            scores = [e["score"] for e in board]
            assert scores == sorted(scores, reverse=True)
    moved_pools = {c.key for c in exchange.journal if c.kind == "pool.update"}
    assert len(moved_pools) == len(exchange.pools)
    for pool_id in moved_pools:
        last = [c for c in exchange.journal if c.key == pool_id][-1]
        assert last.after == exchange.pools[pool_id]
        first = next(c for c in exchange.journal if c.key == pool_id)
        assert first.before is not None
        assert {k for k in POOL_MOVES if last.after[k] != first.before[k]} == POOL_MOVES


def test_a_leaderboard_entry_after_carries_its_recomputed_rank() -> None:
    exchange = small()
    for _ in range(300):
        (change,) = exchange.advance()
        if change.kind != "leaderboard.update":
            continue
        position = next(i for i, e in enumerate(exchange.leaderboard) if e["address"] == change.key)
        assert change.after == exchange.leaderboard[position]
        assert change.after["rank"] == position + 1


@pytest.mark.parametrize("n", [-1, 1.5, True, "3", None])
def test_advance_takes_a_count_of_changes(n: object) -> None:
    with pytest.raises(ValueError, match="n must be an int >= 0"):
        small().advance(n)  # type: ignore[arg-type]


def test_advance_of_nothing_changes_nothing() -> None:
    exchange = small()
    assert exchange.advance(0) == []
    assert exchange.journal == []
    assert exchange == small()


def test_an_exchange_with_nothing_to_change_says_so() -> None:
    with pytest.raises(ValueError, match="nothing left to change"):
        FakeExchange().advance(1)


def test_an_exchange_of_hand_made_orders_moves_them_forward() -> None:
    orders = [
        {
            "transactionId": f"0x{i:064x}",
            "poolId": "p",
            "user": "0xabc",
            "side": "BUY",
            "price": "1.5",
            "size": "10",
            "filledSize": "0",
            "status": "OPEN",
            "timestamp": 1_700_000_000_000 + i,
        }
        for i in range(3, 0, -1)
    ]
    exchange = FakeExchange(seed=1, orders={"0xabc": orders})
    for _ in range(100):  # each update may close its order; then there is nothing left
        if all(o["status"] in FINAL for o in orders):
            break
        exchange.advance(1)
    assert {c.kind for c in exchange.journal} == {"order.update"}
    assert all(o["status"] in FINAL for o in exchange.orders["0xabc"])
    with pytest.raises(ValueError, match="nothing left to change"):
        exchange.advance(1)


def test_an_order_closed_by_an_edit_is_left_alone() -> None:
    exchange = small()
    exchange.advance(1)  # the working orders are known from here on
    address = next(iter(exchange.orders))
    closed = [o for o in exchange.orders[address] if o["status"] in WORKING]
    for order in closed:
        order["status"] = "CANCELLED"  # the test closes them by hand
    exchange.advance(500)
    assert all(o["status"] == "CANCELLED" for o in closed)
    made_since = {c.key for c in exchange.journal if c.kind == "order.new"}
    touched = {c.key for c in exchange.journal if c.kind == "order.update" and c.address == address}
    assert touched <= made_since
