"""Gates: hold the requests of an operation at the fake server until the test releases them.

A held request has arrived and been recorded but gets no answer, so a test can see exactly
what is in flight at once (``gate.arrived(3)``), then let the answers go (``gate.release()``),
without a single sleep. Every method is safe to call from any thread and any event loop.
"""

from __future__ import annotations

import asyncio
import threading
from collections import deque
from collections.abc import Callable
from types import TracebackType
from typing import Final, Self

__all__ = ["DEFAULT_WAIT", "Gate", "check_timeout"]

#: How long ``arrived()`` waits by default before it gives up (seconds): a bound, not a pace.
DEFAULT_WAIT: Final = 30.0


def _wake(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


def _resolve(future: asyncio.Future[None]) -> None:
    """Wake ``future`` from any thread; nothing to do if its loop is gone."""
    try:
        future.get_loop().call_soon_threadsafe(_wake, future)
    except RuntimeError:  # pragma: no cover - the loop is closed: nobody waits on it any more
        pass


def _check_count(count: object, name: str = "count") -> int:
    if isinstance(count, bool) or not isinstance(count, int) or count < 0:
        raise ValueError(f"{name} must be an int >= 0, got {count!r}")
    return count


def check_timeout(timeout: object) -> float:
    if isinstance(timeout, bool) or not isinstance(timeout, int | float) or not timeout > 0:
        raise ValueError(f"timeout must be a number of seconds > 0, got {timeout!r}")
    return float(timeout)


class Gate:
    """Holds the requests of one operation (or ``"*"``: every operation without its own gate).

    Made by ``FakeServer.gate(operation)`` and closed on leaving its ``with`` or ``async with``
    block (or by ``close()``), which lets every held request go and removes the gate.
    ``operation`` is the operation it holds.
    """

    def __init__(self, operation: str, on_close: Callable[[Gate], None]) -> None:
        self.operation = operation
        self._on_close = on_close
        self._lock = threading.Lock()
        self._arrivals = 0
        self._held: deque[asyncio.Future[None]] = deque()
        self._allowance = 0  # requests that may still pass without waiting
        self._open = False
        self._closed = False
        self._waiters: list[tuple[int, Callable[[], None]]] = []

    # --- what the test sees -----------------------------------------------------------

    @property
    def arrivals(self) -> int:
        """How many requests have reached this gate so far, held or let through."""
        return self._arrivals

    @property
    def held(self) -> int:
        """How many requests wait at the gate now."""
        return sum(not future.done() for future in self._held)

    @property
    def is_open(self) -> bool:
        """True once ``release()`` without a count (or ``close()``) opened it for good."""
        return self._open

    # A default bound, so that a test whose requests never come fails instead of hanging.
    async def arrived(self, count: int, *, timeout: float = DEFAULT_WAIT) -> None:  # noqa: ASYNC109
        """Wait until ``count`` requests have reached the gate (in total, since it was made).

        Raises TimeoutError, saying how many came, if they do not within ``timeout`` seconds.
        """
        count = _check_count(count)
        timeout = check_timeout(timeout)
        loop = asyncio.get_running_loop()
        future: asyncio.Future[None] = loop.create_future()

        def notify() -> None:
            if not loop.is_closed():
                loop.call_soon_threadsafe(_wake, future)

        if not self._register(count, notify):
            return
        try:
            async with asyncio.timeout(timeout):
                await future
        except TimeoutError:
            raise TimeoutError(self._shortfall(count, timeout)) from None
        finally:
            self._unregister(notify)

    def wait_arrived(self, count: int, *, timeout: float = DEFAULT_WAIT) -> None:
        """Blocking ``arrived()``, for code that is not async (the server runs ``in_thread()``).

        Args:
            count: requests to wait for (in total, since the gate was made).
            timeout: seconds before ``TimeoutError``, which says how many came.
        """
        count = _check_count(count)
        timeout = check_timeout(timeout)
        event = threading.Event()
        notify = event.set
        if not self._register(count, notify):
            return
        try:
            if not event.wait(timeout):
                raise TimeoutError(self._shortfall(count, timeout))
        finally:
            self._unregister(notify)

    def release(self, count: int | None = None) -> None:
        """Let requests go: all of them for good (no count), or the next ``count`` in order.

        With a count, requests not yet arrived are let through when they come, up to the
        count; the gate holds the ones after that.
        """
        if count is not None:
            count = _check_count(count)
        with self._lock:
            waiting = [future for future in self._held if not future.done()]
            if count is None:
                self._open = True
                freed = waiting
                self._held.clear()
            else:
                freed = waiting[:count]
                self._held = deque(waiting[count:])
                self._allowance += count - len(freed)
        for future in freed:
            _resolve(future)

    def close(self) -> None:
        """Open the gate for good and remove it from its server. Calling it twice is fine."""
        self.release()
        with self._lock:
            if self._closed:
                return
            self._closed = True
        self._on_close(self)

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "open" if self._open else f"holding {self.held}"
        return f"<Gate {self.operation!r} {state}, {self._arrivals} arrived>"

    # --- the server's side ------------------------------------------------------------

    async def pass_through(self) -> None:
        """Called by the server for each request: returns when the request may be answered."""
        with self._lock:
            self._arrivals += 1
            ready = [notify for wanted, notify in self._waiters if wanted <= self._arrivals]
            future: asyncio.Future[None] | None = None
            if self._open:
                pass
            elif self._allowance > 0:
                self._allowance -= 1
            else:
                future = asyncio.get_running_loop().create_future()
                self._held.append(future)
        for notify in ready:
            notify()
        if future is not None:
            await future  # cancelled while held: done, so neither counted nor released

    # --- helpers ----------------------------------------------------------------------

    def _register(self, count: int, notify: Callable[[], None]) -> bool:
        """Add a waiter for ``count`` arrivals; False if they have arrived already."""
        with self._lock:
            if self._arrivals >= count:
                return False
            self._waiters.append((count, notify))
            return True

    def _unregister(self, notify: Callable[[], None]) -> None:
        with self._lock:
            self._waiters = [(n, f) for n, f in self._waiters if f is not notify]

    def _shortfall(self, count: int, timeout: float) -> str:
        return (
            f"gate on {self.operation!r}: {self._arrivals} of {count} requests arrived "
            f"within {timeout:g} s"
        )
