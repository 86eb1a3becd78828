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
import time
from typing import Any, Final

__all__ = ["AttemptTimer"]

_Task = asyncio.Task[Any]

#: ``asyncio.current_task``: a C function from CPython 3.12 on.
_current_task: Final = asyncio.current_task


class AttemptTimer:
    """Bounds each attempt of one sender to ``timeout`` seconds, on the running loop.

    ``task = timer.start()`` as an attempt begins; after a ``CancelledError``,
    ``timer.expired(task)``: True when the cancellation was this timer's (the attempt timed
    out); ``timer.end(task)`` in a ``finally``. :meth:`close` cancels the loop's timer.
    """

    __slots__ = ("_due", "_expired", "_handle", "timeout")

    def __init__(self, timeout: float) -> None:
        if not timeout > 0:
            raise ValueError(f"an attempt timeout must be > 0 seconds, got {timeout!r}")
        self.timeout = timeout
        #: The attempts in flight, oldest first: task -> (when it expires on the monotonic
        #: clock, how many cancellations it had pending when the attempt began).
        self._due: dict[_Task, tuple[float, int]] = {}
        #: The tasks this timer cancelled whose attempt has not ended yet: task -> the
        #: pending cancellations it had when its attempt began.
        self._expired: dict[_Task, int] = {}
        self._handle: asyncio.TimerHandle | None = None

    def start(self) -> _Task:
        """An attempt of the current task begins (in the running loop); returns the task."""
        task = _current_task()
        if task is None:
            raise RuntimeError("an attempt runs inside a task")
        self._due[task] = (time.monotonic() + self.timeout, task.cancelling())
        if self._handle is None:
            loop = asyncio.get_running_loop()
            self._handle = loop.call_later(self.timeout, self._fire, loop)
        return task

    def end(self, task: _Task) -> None:
        """The attempt of ``task`` is over, whatever its outcome. If this timer cancelled it
        and the attempt ended some other way than :meth:`expired` was asked about (the
        cancellation swallowed, or turned into another error), the task is uncancelled."""
        self._due.pop(task, None)
        if self._expired and self._expired.pop(task, None) is not None:
            task.uncancel()

    def expired(self, task: _Task) -> bool:
        """After the attempt of ``task`` ended in ``CancelledError``: whether the
        cancellation was this timer's alone (then the task is uncancelled, and the attempt
        timed out); False for a cancellation from elsewhere, which must propagate."""
        entered = self._expired.pop(task, None)
        return entered is not None and task.uncancel() <= entered

    def _fire(self, loop: asyncio.AbstractEventLoop) -> None:
        """Cancel the attempts past their time; set the timer for the next oldest."""
        self._handle = None
        now = time.monotonic()
        due = self._due
        while due:
            task = next(iter(due))
            expires, entered = due[task]
            if expires > now:
                self._handle = loop.call_later(expires - now, self._fire, loop)
                return
            del due[task]
            if not task.done():
                self._expired[task] = entered
                task.cancel()

    def close(self) -> None:
        """No timer left on the loop (the sender is closed)."""
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None
