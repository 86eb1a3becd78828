"""Connection slots: at most ``max_connections`` attempts of one client at once.

A semaphore of our own rather than ``asyncio.Semaphore``, for the hot path: a free slot is
taken and given back by two lines the pipeline inlines (``if slots.free: slots.free -= 1``;
``if slots.waiting: slots.give() else: slots.free += 1``), no coroutine and no call,
on every Python, with nothing private of asyncio. A slot given back while calls wait is
handed to the longest waiter directly (``free`` stays 0), so a newcomer never overtakes the
queue and ``free`` is never positive while someone waits.
"""

from __future__ import annotations

import asyncio
from collections import deque

__all__ = ["Slots"]


class Slots:
    """``size`` slots; ``free`` of them not taken, ``waiting`` the calls queued for one."""

    __slots__ = ("free", "size", "waiting")

    def __init__(self, size: int) -> None:
        self.size = size
        self.free = size
        #: Futures of the calls waiting for a slot, oldest first (resolved: handed one).
        self.waiting: deque[asyncio.Future[None]] = deque()

    async def take(self) -> None:
        """Wait for a slot (when none is free, or others wait first); it is held on return."""
        if self.free and not self.waiting:
            self.free -= 1
            return
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.waiting.append(waiter)
        try:
            await waiter
        except BaseException:
            if waiter.done() and not waiter.cancelled():
                self.give()  # handed a slot just as it was cancelled: it goes on
            elif waiter in self.waiting:  # (a slot given meanwhile may have passed it by)
                self.waiting.remove(waiter)
            raise

    def give(self) -> None:
        """Give back a slot: straight to the longest waiter still waiting, else it is free."""
        waiting = self.waiting
        while waiting:
            waiter = waiting.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return
        self.free += 1
