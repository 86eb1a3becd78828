"""The order the suite runs in: tests that wait first, beside the others' work.

A test marked ``waits`` spends seconds waiting (quota windows, processes it starts and
kills, memory measured in a child) and little CPU. Left in file order they end the run: the
fleet's folder comes late, and its tests would wait alone at the end with the cores idle.
pytest-xdist's ``worksteal`` gives each worker a contiguous share of the collection and
steals from a share's tail, so a test at the head of a share starts at once on that worker.
``waiting_first`` puts the waiting tests at the heads of the first half of the shares: those
workers wait while the other half use the cores, and the run ends CPU-bound. The order is a
function of the collection and the worker count only, so every worker computes the same.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar

__all__ = ["waiting_first"]

T = TypeVar("T")


def waiting_first(items: Sequence[T], workers: int, waits: Callable[[T], bool]) -> list[T]:
    """``items`` reordered: those ``waits`` picks dealt out in turn to the heads of the first
    ``max(1, workers // 2)`` shares of worksteal's first split, every other item in its order.
    """
    workers = max(workers, 1)
    waiting = [item for item in items if waits(item)]
    others = [item for item in items if not waits(item)]
    heads = max(1, workers // 2)
    dealt = [waiting[share::heads] for share in range(heads)]
    order: list[T] = []
    left = len(items)
    for share in range(workers):
        size = left // (workers - share)  # worksteal's split
        left -= size
        head = dealt[share] if share < heads else []
        order += head
        taken = max(0, size - len(head))
        order += others[:taken]
        del others[:taken]
    return order  # the shares' sizes add up to len(items): every other item was taken
