"""``RedisCache``: cached reference data for every process of a fleet, kept in Redis.

cache = RedisCache("redis://127.0.0.1:6379/0", name="my-bots")
async with cache, Client(base_url=..., cache=cache) as client:
    tokens = await client.tokens()

An entry is one hash (the body as received, and a small JSON of status, headers, validators,
stored-at and freshness) with an expiry. When an entry is missing or stale, one process takes
a short lock (``SET NX PX``) and fetches; the others register as waiters and block on a list
of their own (``BLPOP``) until the fetcher stores the answer and pushes to every waiter, or
until their attempt's timeout, after which they fetch themselves. Every key written expires.
Any failure of Redis is logged (a WARNING on the ``asyncapi_client`` logger) and the call
goes to the server as if uncached. Exported as ``asyncapi_client.fleet.RedisCache``.
"""

from __future__ import annotations

import asyncio
import logging
import math
import secrets
import time
from collections.abc import Awaitable, Callable, Mapping
from types import TracebackType
from typing import Any, Final, Self, TypeVar

import orjson
from multidict import CIMultiDict, CIMultiDictProxy

from ._cache import CacheBackend, Entry, _Unavailable
from ._limiters import OperationName
from ._redisclient import RedisError, aredis, check_name, redis_client

__all__ = ["RedisCache"]

T = TypeVar("T")

log: Final = logging.getLogger("asyncapi_client")

#: Connections of the pool a cache built from a URL opens at most (calls queue beyond).
MAX_CONNECTIONS: Final = 32
#: At most this many waits for another process's fetch at once (each holds a connection
#: while it blocks): the rest of the pool stays free for storing entries and waking the
#: waiters of other processes, so two processes waiting on each other's fetches never take
#: every connection. A wait beyond it queues; its wake-up is kept in Redis meanwhile.
MAX_WAITS: Final = MAX_CONNECTIONS // 2
#: The lock a fetcher takes lives this long past the waiters' bound (ms).
LOCK_MARGIN_MS: Final = 1000
#: A wake-up pushed to a waiter that has gone expires after this long (ms).
WAKE_MS: Final = 60_000
#: At most one WARNING per this many seconds while Redis keeps failing.
WARN_EVERY: Final = 30.0
#: After a failure, Redis is not asked again for this long (s): calls go straight to the
#: server instead of each waiting for a Redis that does not answer.
PAUSE_AFTER_FAILURE: Final = 1.0
_FAILURES: Final = (RedisError, OSError, TimeoutError)

#: KEYS: lock, waiters. ARGV: token, lock ms, waiter id. 1: the caller fetches; 0: it waits.
LOCK: Final = """
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then return 1 end
redis.call('RPUSH', KEYS[2], ARGV[3])
local ttl = redis.call('PTTL', KEYS[1])
if ttl < 1 then ttl = tonumber(ARGV[2]) end
redis.call('PEXPIRE', KEYS[2], ttl + 1000)
return 0
"""

#: KEYS: lock, waiters. ARGV: token, wake-key prefix, wake ms. Releases the lock if it is
#: still ours and wakes every waiter registered so far; returns how many.
UNLOCK: Final = """
if redis.call('GET', KEYS[1]) == ARGV[1] then redis.call('DEL', KEYS[1]) end
local ids = redis.call('LRANGE', KEYS[2], 0, -1)
redis.call('DEL', KEYS[2])
for _, id in ipairs(ids) do
  local key = ARGV[2] .. id
  redis.call('RPUSH', key, '1')
  redis.call('PEXPIRE', key, ARGV[3])
end
return #ids
"""

#: KEYS: entry. ARGV: body, meta, ms to keep. One entry, replaced whole, with its expiry.
PUT: Final = """
redis.call('DEL', KEYS[1])
redis.call('HSET', KEYS[1], 'b', ARGV[1], 'm', ARGV[2])
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return 1
"""


def _glob_escape(text: str) -> str:
    return "".join("\\" + c if c in "*?[]\\" else c for c in text)


def _meta(entry: Entry) -> bytes:
    return orjson.dumps(
        {
            "s": entry.status,
            "h": list(entry.headers.items()),
            "u": entry.url,
            "e": entry.etag,
            "l": entry.last_modified,
            "t": entry.stored_at,
            "f": entry.lifetime,
            "v": [list(pair) for pair in entry.varied],
        }
    )


def _entry(body: object, meta: object) -> Entry | None:
    """The entry stored as ``body`` and ``meta``; None if they are not what we write."""
    if not isinstance(body, bytes) or not isinstance(meta, bytes):
        return None
    try:
        m = orjson.loads(meta)
        headers: CIMultiDict[str] = CIMultiDict()
        for name, value in m["h"]:
            if not isinstance(name, str) or not isinstance(value, str):
                return None
            headers.add(name, value)
        status, url, etag, modified = m["s"], m["u"], m["e"], m["l"]
        stored_at, lifetime = float(m["t"]), float(m["f"])
        varied = tuple((name, value) for name, value in m.get("v", ()))
    except (orjson.JSONDecodeError, KeyError, TypeError, ValueError):
        return None
    if not all(isinstance(n, str) and isinstance(v, str | None) for n, v in varied):
        return None
    if (
        type(status) is not int
        or not isinstance(url, str)
        or not isinstance(etag, str | None)
        or not isinstance(modified, str | None)
        or not (math.isfinite(stored_at) and math.isfinite(lifetime))
    ):
        return None
    return Entry(
        body, status, CIMultiDictProxy(headers), url, etag, modified, stored_at, lifetime, varied
    )


class RedisCache(CacheBackend):
    """Cached answers for every process whose clients share a Redis and a ``name``.

    Built from a URL it owns its connection pool (close it with :meth:`aclose` or
    ``async with``); built from the caller's ``redis.asyncio.Redis`` it never closes it.
    Use it from one event loop, like a ``Client``.

    Args:
        url_or_redis_client: a ``redis://`` (``rediss://``, ``unix://``) URL, or a
            ``redis.asyncio.Redis`` (without ``decode_responses``).
        name: the fleet's name: caches with the same Redis and name share their entries.
        ttl: operation name -> seconds an answer stays fresh; only these operations are
            cached (default ``{"tokens": 300.0, "token_markets": 60.0}``).
        stale_if_error: seconds an entry may be stale and still be served when its
            refresh fails (connection failure, timeout, 5xx, 429) after its retries.
    """

    _shared = True

    def __init__(
        self,
        url_or_redis_client: str | aredis.Redis,
        *,
        name: str,
        ttl: Mapping[OperationName, float] | None = None,
        stale_if_error: float = 0.0,
    ) -> None:
        super().__init__(ttl, stale_if_error)
        self.name: str = check_name(name)
        if isinstance(url_or_redis_client, aredis.Redis):
            kwargs = url_or_redis_client.connection_pool.connection_kwargs
            if kwargs.get("decode_responses"):
                raise ValueError(
                    "RedisCache stores bodies as bytes: pass a redis.asyncio.Redis made "
                    "without decode_responses=True"
                )
        self._redis, self._address, self._owns = redis_client(
            url_or_redis_client,
            "RedisCache",
            max_connections=MAX_CONNECTIONS,
            connect_timeout=5.0,
        )
        self._closed = False
        self._prefix = f"asyncapi_client:cache:{{{self.name}}}:"
        self._lock_script = self._redis.register_script(LOCK)
        self._unlock_script = self._redis.register_script(UNLOCK)
        self._put_script = self._redis.register_script(PUT)
        #: This cache's waiter ids are this prefix and a counter.
        self._waiter = secrets.token_hex(8)
        self._waits = 0
        self._warned = -math.inf
        size = getattr(self._redis.connection_pool, "max_connections", MAX_CONNECTIONS)
        waits = MAX_WAITS if not isinstance(size, int) else max(1, min(MAX_WAITS, size // 2))
        self._wait_slots = asyncio.Semaphore(waits)
        self._paused_until = -math.inf

    def __repr__(self) -> str:
        return (
            f"RedisCache({self._address!r}, name={self.name!r}, ttl={dict(self.ttl)!r}, "
            f"stale_if_error={self.stale_if_error:g})"
        )

    @property
    def owns_client(self) -> bool:
        """True when the cache made its Redis client (from a URL) and closes it."""
        return self._owns

    # --- one call to Redis ------------------------------------------------------------

    def _warn(self, what: str, exc: BaseException) -> None:
        """One WARNING per WARN_EVERY seconds while Redis fails (never raised)."""
        now = time.monotonic()
        if now - self._warned >= WARN_EVERY:
            self._warned = now
            log.warning(
                "the cache %r could not %s (%s: %s); calls go to the server uncached",
                self.name,
                what,
                type(exc).__name__,
                exc,
            )

    async def _call(self, what: str, call: Callable[[], Awaitable[T]], bound: float) -> T:
        """``call()`` bounded by ``bound`` seconds; any failure logged and _Unavailable
        (and Redis left alone for PAUSE_AFTER_FAILURE seconds)."""
        if self._closed:
            raise RuntimeError(f"{self!r} is closed; create a new one")
        if time.monotonic() < self._paused_until:
            raise _Unavailable
        task = asyncio.current_task()
        cancelling = task.cancelling() if task is not None else 0
        try:
            async with asyncio.timeout(bound):
                reply = await call()
        except _FAILURES as exc:
            if task is not None and task.cancelling() > cancelling:
                raise asyncio.CancelledError from exc  # our own cancel, not Redis's timeout
            self._paused_until = time.monotonic() + PAUSE_AFTER_FAILURE
            self._warn(what, exc)
            raise _Unavailable from exc
        if task is not None and task.cancelling() > cancelling:
            raise asyncio.CancelledError  # cancelled during the call, swallowed by redis-py
        return reply

    # --- the backend --------------------------------------------------------------------

    async def _get(self, key: str, bound: float) -> Entry | None:
        reply = await self._call(
            "read an entry", lambda: self._redis.hmget(self._prefix + "e:" + key, ["b", "m"]), bound
        )
        body, meta = reply
        if body is None and meta is None:
            return None
        return _entry(body, meta)

    async def _put(self, key: str, entry: Entry, keep: float, bound: float) -> None:
        args = (entry.body, _meta(entry), max(1, math.ceil(keep * 1000)))
        try:
            await self._call(
                "store an entry",
                lambda: self._put_script(keys=[self._prefix + "e:" + key], args=args),
                bound,
            )
        except _Unavailable:
            pass

    async def _drop(self, key: str, bound: float) -> None:
        try:
            await self._call(
                "drop an entry", lambda: self._redis.delete(self._prefix + "e:" + key), bound
            )
        except _Unavailable:
            pass

    async def _lock(self, key: str, bound: float) -> object | None:
        token = secrets.token_hex(8)
        self._waits += 1
        waiter = f"{self._waiter}.{self._waits}"
        lock_ms = math.ceil(bound * 1000) + LOCK_MARGIN_MS
        keys = [self._prefix + "l:" + key, self._prefix + "w:" + key]
        started = time.monotonic()
        got = await self._call(
            "take the fetch lock",
            lambda: self._lock_script(keys=keys, args=(token, lock_ms, waiter)),
            bound,
        )
        if int(got) == 1:
            return token
        # Another process fetches: wait for its wake-up, bounded by the attempt's timeout
        # (BLPOP's own timeout a little shorter, so Redis answers before we give up on it).
        left = bound - (time.monotonic() - started)
        if left > 0.01:
            wake = self._prefix + "k:" + waiter
            try:
                await self._call(
                    "wait for another process's fetch",
                    lambda: self._wait(wake, left),
                    left,
                )
            except _Unavailable:
                pass  # read the entry (it may be there), else fetch ourselves
        return None

    async def _wait(self, wake: str, left: float) -> object:
        """Block on ``wake`` (BLPOP) until the fetcher pushes to it, a little less than
        ``left`` seconds, so that Redis answers before the caller's bound ends it."""
        loop = asyncio.get_running_loop()
        end = loop.time() + left
        async with self._wait_slots:
            left = end - loop.time()
            return await self._redis.blpop([wake], timeout=max(0.01, left * 0.9))

    async def _unlock(self, key: str, token: object, bound: float) -> None:
        keys = [self._prefix + "l:" + key, self._prefix + "w:" + key]
        try:
            await self._call(
                "wake the processes waiting for a fetch",
                lambda: self._unlock_script(
                    keys=keys, args=(str(token), self._prefix + "k:", WAKE_MS)
                ),
                bound,
            )
        except _Unavailable:
            pass  # the waiters' own bound ends their wait

    async def clear(self) -> None:
        """Drop every entry of this ``name`` (a failure of Redis is raised here)."""
        if self._closed:
            raise RuntimeError(f"{self!r} is closed; create a new one")
        pattern = _glob_escape(self._prefix) + "*"
        batch: list[Any] = []
        async for key in self._redis.scan_iter(match=pattern, count=500):
            batch.append(key)
            if len(batch) >= 500:
                await self._redis.unlink(*batch)
                batch.clear()
        if batch:
            await self._redis.unlink(*batch)

    # --- lifecycle ----------------------------------------------------------------------

    async def aclose(self) -> None:
        """Close the connection pool if the cache made it; a borrowed client stays open."""
        if self._closed:
            return
        self._closed = True
        if self._owns:
            await self._redis.aclose()

    async def __aenter__(self) -> Self:
        if self._closed:
            raise RuntimeError(f"{self!r} is closed; create a new one")
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()
