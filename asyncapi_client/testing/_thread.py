"""An event loop in a daemon thread: where a server runs when the code under test is not async,
or when the test's own loop must hold nothing but the client's tasks."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine
from typing import Any, Self, TypeVar

__all__ = ["LoopThread"]

T = TypeVar("T")

_SHARED_LOCK = threading.Lock()


class LoopThread:
    """A running event loop in a daemon thread; coroutines are handed to it from outside."""

    def __init__(self, name: str) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name=name, daemon=True)
        self._thread.start()

    @classmethod
    def shared(cls) -> Self:
        """One loop (per class) for the whole process, started on first use, never stopped."""
        with _SHARED_LOCK:
            found: Self | None = cls.__dict__.get("_shared_instance")
            if found is None:
                found = cls(f"{cls.__name__}-shared")
                setattr(cls, "_shared_instance", found)  # noqa: B010 - per class, not inherited
            return found

    def call(self, coro: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
        """Run ``coro`` on the loop and block until its result (from a thread without a loop)."""
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    async def run(self, coro: Coroutine[Any, Any, T], within: float = 10.0) -> T:
        """Run ``coro`` on the loop and await its result from another event loop."""
        future = asyncio.run_coroutine_threadsafe(coro, self.loop)
        return await asyncio.wait_for(asyncio.wrap_future(future), within)

    def stop(self) -> None:
        """Stop the loop, end the thread and close the loop."""
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join()
        self.loop.close()
