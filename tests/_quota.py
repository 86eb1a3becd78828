"""A server with a quota it advertises in rate-limit headers, counting requests where they land.

``QuotaServer(limit, window, headers="ietf")`` answers ``GET /api/clob/pools/{id}`` on
127.0.0.1 with a pool's body. At most ``limit`` requests are answered in each fixed window of
``window`` seconds (windows start when the server starts); past it the answer is 429 with
``Retry-After`` (seconds to the window's end, rounded up, at least 1), and refused requests do
not count. ``headers`` says how the quota is advertised on every answer, 429s included:
``"ietf"`` (``RateLimit-Policy`` and ``RateLimit``), ``"split"`` (``RateLimit-Limit``,
``-Remaining``, ``-Reset`` in seconds), ``"x"`` (``X-RateLimit-*``, the reset a Unix time),
None (no headers), or a callable that returns the headers to send (malformed ones, say).
``server.quota = (limit, window)`` changes the limit at once (for the current window too).
Every answer is recorded: when it arrived (``time.monotonic()``), its window and status.
"""

from __future__ import annotations

import math
import socket
import time
from collections import Counter
from collections.abc import Callable, Mapping
from types import TracebackType
from typing import Literal, Self

import attrs
from aiohttp import web

from tests._oracle import pool_wire

__all__ = ["Landed", "QuotaServer"]

Mode = Literal["ietf", "split", "x"] | Callable[[], Mapping[str, str]] | None


@attrs.frozen
class Landed:
    """One request as the server saw it: when it arrived, in which window, what it answered."""

    at: float
    window: int
    status: int
    worker: str


class QuotaServer:
    """The quota, its headers and the record of every request (see the module docs)."""

    def __init__(self, limit: int, window: float, headers: Mode = "ietf") -> None:
        self.quota = (limit, window)
        self.headers = headers
        self.landed: list[Landed] = []
        self._used: Counter[int] = Counter()
        self._started = 0.0
        self._runner: web.AppRunner | None = None
        self.port = 0

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def window_at(self, now: float) -> tuple[int, float]:
        """The window ``now`` falls in, and the seconds to its end."""
        seconds = self.quota[1]
        index = math.floor((now - self._started) / seconds)
        return index, self._started + (index + 1) * seconds - now

    def _advertised(self, remaining: int, reset: float) -> dict[str, str]:
        limit, window = self.quota
        mode = self.headers
        if mode is None:
            return {}
        if callable(mode):
            return dict(mode())
        seconds = math.ceil(reset)
        if mode == "ietf":
            return {
                "RateLimit-Policy": f'"default";q={limit};w={math.ceil(window)}',
                "RateLimit": f'"default";r={remaining};t={seconds}',
            }
        if mode == "split":
            return {
                "RateLimit-Limit": str(limit),
                "RateLimit-Remaining": str(remaining),
                "RateLimit-Reset": str(seconds),
            }
        return {
            "X-RateLimit-Limit": str(limit),
            "X-RateLimit-Remaining": str(remaining),
            "X-RateLimit-Reset": str(math.ceil(time.time() + reset)),
        }

    async def _answer(self, request: web.Request) -> web.Response:
        now = time.monotonic()
        index, reset = self.window_at(now)
        limit = self.quota[0]
        worker = request.headers.get("X-Worker", "")
        if self._used[index] >= limit:
            self.landed.append(Landed(now, index, 429, worker))
            headers = self._advertised(0, reset)
            headers["Retry-After"] = str(max(1, math.ceil(reset)))
            return web.json_response({"error": "too many requests"}, status=429, headers=headers)
        self._used[index] += 1
        self.landed.append(Landed(now, index, 200, worker))
        headers = self._advertised(max(0, limit - self._used[index]), reset)
        pool = pool_wire(request.match_info["pool"], "mainnet")
        return web.json_response(pool, headers=headers)

    def answered(self, window: int) -> int:
        """How many requests of ``window`` were answered (not refused)."""
        return self._used[window]

    def refused(self, *, after: float = -math.inf) -> list[Landed]:
        """The 429s, those that arrived after ``after`` only."""
        return [each for each in self.landed if each.status == 429 and each.at > after]

    async def __aenter__(self) -> Self:
        app = web.Application()
        app.router.add_get("/api/clob/pools/{pool}", self._answer)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.bind(("127.0.0.1", 0))
        self.port = sock.getsockname()[1]
        await web.SockSite(self._runner, sock).start()
        self._started = time.monotonic()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        assert self._runner is not None
        await self._runner.cleanup()
