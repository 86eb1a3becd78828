"""The attempt timeout of a sender: one loop timer for all its attempts, not one each.

aiohttp's ``ClientTimeout(total=...)`` makes a timer for every request and cancels it once the
answer is read (a handle, a push on the loop's heap, a context manager, the cancelled handle
popped again): measured, 8 % of a ``pool()`` call's CPU at concurrency 1 and 13 % at 64
(benchmarks/ab-request-path.md). Every attempt of one sender has the same timeout, so the
attempts in flight expire in the order they began. :class:`AttemptTimer` keeps them in that
order (a dict) with one timer on the loop, set for the oldest: when it fires it cancels the
tasks of the attempts past their time and sets itself for the next oldest. An attempt it
cancelled ends in ``TimeoutError``, as inside ``asyncio.timeout()``: its task is uncancelled,
and a cancellation from elsewhere still propagates as ``CancelledError``.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Callable
from typing import Any, Final

__all__ = ["AttemptTimer"]

_Task = asyncio.Task[Any]
#: One attempt: when it expires (on the loop's clock) and its task. Unique per attempt, even
#: for two attempts of one task (a trace hook or a middleware may make a call inside one).
Attempt = tuple[float, _Task]

#: ``asyncio.current_task``: a C function from CPython 3.12 on.
_current_task: Final = asyncio.current_task


def _clock(loop: asyncio.AbstractEventLoop) -> Callable[[], float]:
    """The loop's clock: ``time.monotonic`` itself where that is what ``loop.time()`` reads
    (asyncio's own loops: one Python call less per attempt), else ``loop.time``."""
    if getattr(loop.time, "__func__", None) is asyncio.BaseEventLoop.time:
        return time.monotonic
    return loop.time


class AttemptTimer:
    """Bounds each attempt of one sender to ``timeout`` seconds, on the running loop.

    ``attempt = timer.start()`` as an attempt begins; after a ``CancelledError``,
    ``timer.expired(attempt)``: True when the cancellation was this timer's (the attempt
    timed out); ``timer.end(attempt)`` in a ``finally``. :meth:`close` takes the loop's timer
    away once no attempt is in flight (those still in flight keep their timeout).
    """

    __slots__ = ("_closing", "_due", "_expired", "_handle", "_loop", "_now", "timeout")

    def __init__(self, timeout: float) -> None:
        if not (timeout > 0 and math.isfinite(timeout)):
            raise ValueError(f"an attempt timeout must be > 0 seconds, got {timeout!r}")
        self.timeout = timeout
        #: The attempts in flight, oldest first -> how many cancellations their task had
        #: pending when the attempt began.
        self._due: dict[Attempt, int] = {}
        #: The attempts this timer cancelled that have not ended yet -> the same count.
        self._expired: dict[Attempt, int] = {}
        self._handle: asyncio.TimerHandle | None = None
        self._now: Callable[[], float] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._closing = False

    def start(self) -> Attempt:
        """An attempt of the current task begins (in the loop of the first attempt: the
        pipeline lets no call run in another)."""
        loop = self._loop
        if loop is None:
            loop = self._loop = asyncio.get_running_loop()
            self._now = _clock(loop)
        # The loop given: on CPython 3.11, finding the running loop asks the kernel for the
        # process id each time (a system call per attempt).
        task = _current_task(loop)
        if task is None:
            raise RuntimeError("an attempt runs inside a task")
        now = self._now
        assert now is not None
        attempt = (now() + self.timeout, task)
        due = self._due
        if attempt in due:  # pragma: no cover - two attempts of a task in one clock tick
            attempt = (math.nextafter(attempt[0], math.inf), task)
        due[attempt] = task.cancelling()
        if self._handle is None:
            self._handle = loop.call_later(self.timeout, self._fire, loop)
        return attempt

    def end(self, attempt: Attempt) -> None:
        """``attempt`` is over, whatever its outcome. If this timer cancelled it and it
        ended some other way than :meth:`expired` was asked about (the cancellation
        swallowed, or turned into another error), its task is uncancelled."""
        self._due.pop(attempt, None)
        if self._expired and self._expired.pop(attempt, None) is not None:
            attempt[1].uncancel()
        if self._closing and not self._due and not self._expired:
            self.close()

    def expired(self, attempt: Attempt) -> bool:
        """After ``attempt`` ended in ``CancelledError``: whether the cancellation was this
        timer's alone (then its task is uncancelled, and the attempt timed out); False for
        a cancellation from elsewhere, which must propagate."""
        entered = self._expired.pop(attempt, None)
        return entered is not None and attempt[1].uncancel() <= entered

    def _fire(self, loop: asyncio.AbstractEventLoop) -> None:
        """Cancel the attempts past their time; set the timer for the next oldest."""
        self._handle = None
        assert self._now is not None  # set by the first start()
        now = self._now()
        due = self._due
        while due:
            attempt = next(iter(due))
            expires, task = attempt
            if expires > now:
                self._handle = loop.call_later(expires - now, self._fire, loop)
                return
            self._expired[attempt] = due.pop(attempt)
            if not task.cancel():  # pragma: no cover - done: its attempt has ended meanwhile
                del self._expired[attempt]
        if self._closing:
            self.close()

    def close(self) -> None:
        """No timer left on the loop: at once if no attempt is in flight, else once the
        last one ends (each keeps its timeout until then)."""
        if self._due or self._expired:
            self._closing = True
            return
        self._closing = False
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None
