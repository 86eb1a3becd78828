"""The fake's activity: a steady rate of seeded changes, applied on the server's event loop."""

from __future__ import annotations

import asyncio
import math
from collections.abc import Callable
from typing import Final

__all__ = ["Activity", "check_rate"]

#: The shortest wait between two turns: a high rate applies a few changes a turn.
_MIN_TICK: Final = 0.005


def check_rate(value: object) -> float | None:
    """``activity=`` as changes a second (None: none); a clear error for anything else."""
    if value is None:
        return None
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not math.isfinite(value)
        or not 0 <= value <= 100_000
    ):
        raise ValueError(f"activity must be changes a second in [0, 100000] or None, got {value!r}")
    return float(value) or None


class Activity:
    """Calls ``apply(n)`` so that ``rate`` changes a second are applied, on the running loop,
    from :meth:`start` until :meth:`stop`. Nothing is left scheduled once stopped."""

    def __init__(self, rate: float, apply: Callable[[int], object]) -> None:
        self.rate = rate
        self._apply = apply
        self._loop: asyncio.AbstractEventLoop | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._started = 0.0
        self._due = 0  # changes applied (or skipped) since the start

    def start(self) -> None:
        loop = asyncio.get_running_loop()
        self._loop = loop
        self._started = loop.time()
        self._due = 0
        self._schedule(loop.time())

    def stop(self) -> None:
        timer, self._timer = self._timer, None
        if timer is not None:
            timer.cancel()
        self._loop = None

    def _schedule(self, now: float) -> None:
        loop = self._loop
        if loop is None:
            return
        next_due = self._started + (self._due + 1) / self.rate
        self._timer = loop.call_at(max(next_due, now + _MIN_TICK), self._turn)

    def _turn(self) -> None:
        loop = self._loop
        if loop is None:
            return
        now = loop.time()
        due = math.floor((now - self._started) * self.rate) - self._due
        # After a stall (a debugger, a blocked loop) at most a second's worth is caught up.
        burst = max(1, math.ceil(self.rate))
        if due > burst:
            self._due += due - burst
            due = burst
        if due > 0:
            self._due += due
            self._apply(due)
        self._schedule(now)
