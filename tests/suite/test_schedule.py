"""The suite's order: the waiting tests first on half the workers, no test lost or repeated."""

from __future__ import annotations

import pytest

from tests._schedule import waiting_first


def _split(order: list[int], workers: int) -> list[list[int]]:
    """The shares pytest-xdist's worksteal hands its workers first: contiguous, even."""
    shares, left, at = [], len(order), 0
    for share in range(workers):
        size = left // (workers - share)
        shares.append(order[at : at + size])
        left -= size
        at += size
    return shares


@pytest.mark.parametrize("workers", [1, 2, 3, 4, 6, 8])
@pytest.mark.parametrize("count", [0, 1, 7, 100, 3001])
def test_every_item_is_kept_once_and_the_others_keep_their_order(workers: int, count: int) -> None:
    items = list(range(count))
    waits = set(items[5::97]) | set(items[-3:])
    order = waiting_first(items, workers, waits.__contains__)
    assert sorted(order) == items
    assert [item for item in order if item not in waits] == [
        item for item in items if item not in waits
    ]


@pytest.mark.parametrize("workers", [1, 2, 4, 6])
def test_the_waiting_items_head_the_first_half_of_the_shares_dealt_in_turn(workers: int) -> None:
    items = list(range(3001))
    waits = [2900, 2950, 10, 1500, 3000, 700, 2000]
    order = waiting_first(items, workers, set(waits).__contains__)
    heads = max(1, workers // 2)
    shares = _split(order, workers)
    dealt = sorted(waits)
    for share, taken in enumerate(shares):
        mine = dealt[share::heads] if share < heads else []
        assert taken[: len(mine)] == mine
        assert not set(taken[len(mine) :]) & set(waits)
