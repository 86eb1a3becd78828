"""``RedisCache``: cached reference data for every process of a fleet, kept in Redis.

cache = RedisCache("redis://127.0.0.1:6379/0", name="my-bots")
async with cache, Client(base_url=..., cache=cache) as client:
    tokens = await client.tokens()

An entry is one hash (the body as received, and a small JSON of status, headers, validators,
stored-at and freshness) with an expiry. When an entry is missing or stale, one process takes
a short lock (``SET NX PX``) and fetches; the others register as waiters and block on a list
of their own (``BLPOP``) until an entry is stored (by anyone: storing wakes every waiter of
its key), the lock is released, or the lock's life ends, after which they fetch themselves.
Every key written expires. Each question to Redis is bounded by ``redis_timeout``; storing
and waking happen in the background, so the caller who has the answer never waits for Redis.
Any failure of Redis is logged (a WARNING on the ``asyncapi_client`` logger, naming Redis and
the cause) and the call goes to the server as if uncached. Ages are measured on the Redis
server's clock (``TIME``), which every process shares and a step of this machine's wall clock
does not move. Exported as ``asyncapi_client.fleet.RedisCache``.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import itertools
import logging
import math
import os
import secrets
import threading
import time
import weakref
from collections.abc import Awaitable, Callable, Mapping
from types import TracebackType
from typing import Any, Final, Self, TypeVar

import orjson
from multidict import CIMultiDict, CIMultiDictProxy
from redis.exceptions import ResponseError

from ._cache import CacheBackend, Entry, _Unavailable, validators
from ._limiters import OperationName
from ._redisclient import LoopRedis, RedisError, aredis, check_name

__all__ = ["RedisCache"]

T = TypeVar("T")

log: Final = logging.getLogger("asyncapi_client")

#: Connections of the pool a cache built from a URL opens at most, on each event loop
#: (calls queue beyond).
MAX_CONNECTIONS: Final = 32
#: At most this many waits for another process's fetch at once, per event loop (each holds
#: a connection while it blocks): the rest of the pool stays free for storing entries and
#: waking the waiters of other processes, so two processes waiting on each other's fetches
#: never take every connection. A wait beyond it queues; its wake-up is kept in Redis.
MAX_WAITS: Final = MAX_CONNECTIONS // 2
#: The bound of each question to Redis unless ``redis_timeout`` says otherwise (s).
REDIS_TIMEOUT: Final = 0.5
#: A wake-up pushed to a waiter that has gone expires after this long (ms).
WAKE_MS: Final = 60_000
#: At most one WARNING per this many seconds while Redis keeps failing.
WARN_EVERY: Final = 30.0
#: After a failure, Redis is not asked again for this long (s): calls go straight to the
#: server instead of each waiting for a Redis that does not answer.
PAUSE_AFTER_FAILURE: Final = 1.0
#: Redis's clock is read again (``TIME``, with an entry's read) after this long (s).
CLOCK_EVERY: Final = 30.0
#: ``aclose()`` lets the writes in the background finish for at most this many
#: ``redis_timeout``s (each write is bounded by one), then cancels them.
CLOSE_WAIT: Final = 3
_FAILURES: Final = (RedisError, OSError, TimeoutError)

#: Wakes every waiter registered on a list (KEYS-like ``waiters``), pushing to each one's
#: own key (``prefix`` .. id, kept ``ms``); a key of another type is replaced.
_WAKE: Final = """
local function wake(waiters, prefix, ms)
  local ids = {}
  if redis.call('TYPE', waiters).ok == 'list' then
    ids = redis.call('LRANGE', waiters, 0, -1)
  end
  redis.call('DEL', waiters)
  for _, id in ipairs(ids) do
    local key = prefix .. id
    redis.call('DEL', key)
    redis.call('RPUSH', key, '1')
    redis.call('PEXPIRE', key, ms)
  end
  return #ids
end
"""

#: KEYS: lock, waiters. ARGV: token, lock ms, waiter id. {1, 0}: the caller fetches;
#: {0, ms}: it is registered to wait, and the lock lives ms more. A lock key that is not one
#: (another type, or no expiry: not written by a cache) is replaced, and so is a waiters key
#: of another type.
LOCK: Final = """
local kind = redis.call('TYPE', KEYS[1]).ok
if kind ~= 'none' and (kind ~= 'string' or redis.call('PTTL', KEYS[1]) < 0) then
  redis.call('DEL', KEYS[1])
end
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then return {1, 0} end
if redis.call('TYPE', KEYS[2]).ok ~= 'list' then redis.call('DEL', KEYS[2]) end
redis.call('RPUSH', KEYS[2], ARGV[3])
local ttl = redis.call('PTTL', KEYS[1])
if ttl < 1 then ttl = 1 end
redis.call('PEXPIRE', KEYS[2], ttl + 1000)
return {0, ttl}
"""

#: KEYS: lock, waiters. ARGV: token, wake-key prefix, wake ms. Releases the lock if it is
#: still ours and wakes every waiter registered so far; returns how many.
UNLOCK: Final = (
    _WAKE
    + """
if redis.call('TYPE', KEYS[1]).ok == 'string' and redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('DEL', KEYS[1])
end
return wake(KEYS[2], ARGV[2], ARGV[3])
"""
)

#: KEYS: entry, lock, waiters. ARGV: body, meta, ms to keep, wake-key prefix, wake ms. One
#: entry, replaced whole (whatever the key held), with its expiry; then nobody need wait for
#: a fetch of it: the lock goes, whoever held it, and every waiter is woken.
PUT: Final = (
    _WAKE
    + """
redis.call('DEL', KEYS[1])
redis.call('HSET', KEYS[1], 'b', ARGV[1], 'm', ARGV[2])
redis.call('PEXPIRE', KEYS[1], ARGV[3])
redis.call('DEL', KEYS[2])
return wake(KEYS[3], ARGV[4], ARGV[5])
"""
)


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


def _sendable(etag: str | None, modified: str | None) -> bool:
    """Whether the validators are what ``validators`` takes from an answer (a CR/LF, say,
    is not): only those may go into ``If-None-Match`` / ``If-Modified-Since``."""
    given = {}
    if etag is not None:
        given["ETag"] = etag
    if modified is not None:
        given["Last-Modified"] = modified
    return validators(given) == (etag, modified)


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
        or not _sendable(etag, modified)
    ):
        return None
    return Entry(
        body, status, CIMultiDictProxy(headers), url, etag, modified, stored_at, lifetime, varied
    )


def _cause(exc: BaseException, bound: float) -> str:
    """What failed, for a warning: ``TimeoutError: no answer within 0.5s`` for a bound that
    ran out (its own message is empty)."""
    text = str(exc)
    if isinstance(exc, TimeoutError) and not text:
        return f"TimeoutError: no answer within {bound:g}s"
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _wrong_type(reply: object) -> bool:
    """Whether ``reply`` is Redis refusing a command on a key of another type."""
    return isinstance(reply, ResponseError) and str(reply).startswith("WRONGTYPE")


def _check_redis_timeout(value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value < math.inf:
        raise ValueError(f"redis_timeout must be a finite number of seconds > 0, got {value!r}")
    return float(value)


class _Loop:
    """What the calls of one event loop share: the slots of waits (each holds a connection
    of that loop's pool), and the writes going on in the background, with the last one of
    each key (the next write of that key follows it: an entry is stored before its waiters
    are told the fetch is over)."""

    __slots__ = ("cancelling", "last", "slots", "tasks")

    def __init__(self, waits: int) -> None:
        self.slots = asyncio.Semaphore(waits)
        self.tasks: set[asyncio.Task[None]] = set()
        self.last: dict[str, asyncio.Task[None]] = {}
        #: Set when the cache itself cancels the writes (``aclose``): a cancel is then final.
        self.cancelling = False

    def forget(self, key: str, task: asyncio.Task[None]) -> None:
        self.tasks.discard(task)
        if self.last.get(key) is task:
            del self.last[key]


#: Every RedisCache of the process, so that a forked child can start them afresh.
_every: weakref.WeakSet[RedisCache] = weakref.WeakSet()


def _after_fork_in_child() -> None:
    """A fork may land while another thread holds a cache's lock, and the parent's loops,
    writes and waits are not the child's: each cache keeps its entries in Redis and starts
    its own state in this process afresh."""
    for cache in list(_every):
        cache._start_afresh()


if hasattr(os, "register_at_fork"):  # POSIX; elsewhere there is no fork
    os.register_at_fork(after_in_child=_after_fork_in_child)


class RedisCache(CacheBackend):
    """Cached answers for every process whose clients share a Redis and a ``name``.

    Built from a URL it owns its connection pools (close it with :meth:`aclose` or
    ``async with``); built from the caller's ``redis.asyncio.Redis`` it never closes it.
    Clients on several event loops may share it (two ``SyncClient``s, a ``SyncClient`` and
    an async ``Client``): each loop talks to Redis through a client of its own, closed when
    that loop ends.

    Args:
        url_or_redis_client: a ``redis://`` (``rediss://``, ``unix://``) URL, or a
            ``redis.asyncio.Redis`` (without ``decode_responses``).
        name: the fleet's name: caches with the same Redis and name share their entries.
        ttl: operation name -> seconds an answer stays fresh; only these operations are
            cached (default ``{"tokens": 300.0, "token_markets": 60.0}``).
        stale_if_error: seconds an entry may be stale and still be served when its
            refresh fails (connection failure, timeout, 5xx, 429) after its retries.
        redis_timeout: seconds each question to Redis may take (and what is left of the
            call's deadline, when that is shorter); a Redis that does not answer adds at
            most this to a call, which then goes to the server uncached.
    """

    _shared = True

    def __init__(
        self,
        url_or_redis_client: str | aredis.Redis,
        *,
        name: str,
        ttl: Mapping[OperationName, float] | None = None,
        stale_if_error: float = 0.0,
        redis_timeout: float = REDIS_TIMEOUT,
    ) -> None:
        super().__init__(ttl, stale_if_error)
        self.name: str = check_name(name)
        self.redis_timeout: float = _check_redis_timeout(redis_timeout)
        if isinstance(url_or_redis_client, aredis.Redis):
            kwargs = url_or_redis_client.connection_pool.connection_kwargs
            if kwargs.get("decode_responses"):
                raise ValueError(
                    "RedisCache stores bodies as bytes: pass a redis.asyncio.Redis made "
                    "without decode_responses=True"
                )
        self._loops = LoopRedis(
            url_or_redis_client,
            "RedisCache",
            max_connections=MAX_CONNECTIONS,
            connect_timeout=5.0,
        )
        self._address = self._loops.address
        self._closed = False
        self._prefix = f"asyncapi_client:cache:{{{self.name}}}:"
        self._lock_script = self._loops.script(LOCK)
        self._unlock_script = self._loops.script(UNLOCK)
        self._put_script = self._loops.script(PUT)
        #: This cache's waiter ids are this prefix and a serial number.
        self._waiter = secrets.token_hex(8)
        self._serial = itertools.count(1)
        self._warned = -math.inf
        size = getattr(self._loops.template.connection_pool, "max_connections", MAX_CONNECTIONS)
        self._max_waits = (
            MAX_WAITS if not isinstance(size, int) else max(1, min(MAX_WAITS, size // 2))
        )
        self._paused_until = -math.inf
        self._start_afresh()
        #: Redis's clock less this process's monotonic one (until Redis tells: the wall
        #: clock's), and when it was last read (monotonic).
        self._offset = time.time() - time.monotonic()
        self._offset_at = -math.inf
        _every.add(self)

    def _start_afresh(self) -> None:
        """The state of this process: per event loop, and the writes under way."""
        self._on_loops: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Loop] = (
            weakref.WeakKeyDictionary()
        )
        self._on_loops_lock = threading.Lock()
        #: By key, what this process is storing (None: dropping) in the background, with
        #: its serial number: its own reads see it before Redis does.
        self._pending: dict[str, tuple[int, Entry | None]] = {}

    def __repr__(self) -> str:
        return (
            f"RedisCache({self._address!r}, name={self.name!r}, ttl={dict(self.ttl)!r}, "
            f"stale_if_error={self.stale_if_error:g}, redis_timeout={self.redis_timeout:g})"
        )

    @property
    def owns_client(self) -> bool:
        """True when the cache made its Redis client (from a URL) and closes it."""
        return self._loops.owns

    def now(self) -> float:
        """The Redis server's clock (``TIME``), read again every ``CLOCK_EVERY`` seconds and
        followed meanwhile on this process's monotonic clock: every process of the fleet
        measures ages alike, and a step of this machine's wall clock changes none."""
        return time.monotonic() + self._offset

    def _on_loop(self) -> _Loop:
        loop = asyncio.get_running_loop()
        state = self._on_loops.get(loop)
        if state is None:
            with self._on_loops_lock:
                state = self._on_loops.setdefault(loop, _Loop(self._max_waits))
        return state

    # --- one call to Redis ------------------------------------------------------------

    def _warn(self, what: str, exc: BaseException, bound: float) -> None:
        """One WARNING per WARN_EVERY seconds while Redis fails (never raised)."""
        now = time.monotonic()
        if now - self._warned >= WARN_EVERY:
            self._warned = now
            log.warning(
                "the cache %r could not %s on Redis at %s (%s); calls go to the server uncached",
                self.name,
                what,
                self._address,
                _cause(exc, bound),
            )

    async def _call(
        self, what: str, call: Callable[[aredis.Redis], Awaitable[T]], bound: float
    ) -> T:
        """``call`` on this loop's client, bounded by ``bound`` seconds; any failure logged
        and _Unavailable (and Redis left alone for PAUSE_AFTER_FAILURE seconds)."""
        if self._closed:
            raise RuntimeError(f"{self!r} is closed; create a new one")
        return await self._ask(what, call, bound)

    async def _ask(
        self, what: str, call: Callable[[aredis.Redis], Awaitable[T]], bound: float
    ) -> T:
        if time.monotonic() < self._paused_until:
            raise _Unavailable
        task = asyncio.current_task()
        cancelling = task.cancelling() if task is not None else 0
        try:
            async with asyncio.timeout(bound):
                reply = await call(await self._loops.client())
        except _FAILURES as exc:
            if task is not None and task.cancelling() > cancelling:
                raise asyncio.CancelledError from exc  # our own cancel, not Redis's timeout
            self._paused_until = time.monotonic() + PAUSE_AFTER_FAILURE
            self._warn(what, exc, bound)
            raise _Unavailable from exc
        if task is not None and task.cancelling() > cancelling:
            raise asyncio.CancelledError  # cancelled during the call, swallowed by redis-py
        return reply

    def _behind(
        self,
        key: str,
        what: str,
        call: Callable[[aredis.Redis], Awaitable[object]],
        writes: bool = False,
        written: Entry | None = None,
    ) -> None:
        """``call`` in the background, after the writes of ``key`` before it on this loop:
        the caller does not wait for it; ``aclose`` does (bounded). When it ``writes`` the
        entry, this process reads ``written`` (None: no entry) until it is done."""
        if self._closed:
            return
        state = self._on_loop()
        previous = state.last.get(key)
        task = asyncio.get_running_loop().create_task(self._write(state, previous, what, call))
        state.tasks.add(task)
        state.last[key] = task
        task.add_done_callback(functools.partial(state.forget, key))
        if writes:
            serial = next(self._serial)
            with self._on_loops_lock:
                self._pending[key] = (serial, written)
            task.add_done_callback(functools.partial(self._written_one, key, serial))

    def _written_one(self, key: str, serial: int, task: asyncio.Task[None]) -> None:
        with self._on_loops_lock:
            if self._pending.get(key, (None,))[0] == serial:
                del self._pending[key]

    async def _written(self, bound: float | None = None) -> None:
        """Until the writes in the background on this loop are done (each is bounded by
        ``redis_timeout``), at most ``bound`` seconds; those still going then are cancelled."""
        state = self._on_loops.get(asyncio.get_running_loop())
        if state is None or not state.tasks:
            return
        _, late = await asyncio.wait(set(state.tasks), timeout=bound)
        if late:
            state.cancelling = True
            for task in late:
                task.cancel()
            await asyncio.wait(late)

    async def _write(
        self,
        state: _Loop,
        previous: asyncio.Task[None] | None,
        what: str,
        call: Callable[[aredis.Redis], Awaitable[object]],
    ) -> None:
        """One write, after ``previous``. Cancelled by its loop's end (``asyncio.run`` and a
        ``SyncClient``'s ``close()`` cancel every task), it is made once more, bounded: the
        last answers of a script are stored too (every write may be made twice)."""
        try:
            await self._write_once(previous, what, call)
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if state.cancelling or task is None:
                raise  # the cache's own cancel (aclose)
            task.uncancel()
            await self._write_once(previous, what, call)

    async def _write_once(
        self,
        previous: asyncio.Task[None] | None,
        what: str,
        call: Callable[[aredis.Redis], Awaitable[object]],
    ) -> None:
        if previous is not None:
            await asyncio.wait([previous])
        with contextlib.suppress(_Unavailable):
            await self._ask(what, call, self.redis_timeout)

    # --- the backend --------------------------------------------------------------------

    async def _get(self, key: str, bound: float) -> Entry | None:
        pending = self._pending.get(key)
        if pending is not None:
            return pending[1]  # being stored (or dropped) by this process
        name = self._prefix + "e:" + key
        learn = time.monotonic() - self._offset_at >= CLOCK_EVERY
        fields = await self._call(
            "read an entry",
            lambda redis: self._read(redis, name, learn),
            min(bound, self.redis_timeout),
        )
        if fields is None:
            return None  # a key of another type: a miss, replaced by the next store
        body, meta = fields
        if body is None and meta is None:
            return None
        return _entry(body, meta)

    async def _read(self, redis: aredis.Redis, name: str, learn: bool) -> list[Any] | None:
        """The entry's fields (None: the key holds another type), and when ``learn``,
        Redis's clock too (in the same round trip)."""
        if not learn:
            try:
                return await redis.hmget(name, ["b", "m"])
            except ResponseError as exc:
                if _wrong_type(exc):
                    return None
                raise
        async with redis.pipeline(transaction=False) as pipe:
            pipe.hmget(name, ["b", "m"])
            pipe.time()
            asked = time.monotonic()
            fields, clock = await pipe.execute(raise_on_error=False)
            answered = time.monotonic()
        if isinstance(clock, BaseException):
            raise clock
        seconds, micros = clock
        self._offset = seconds + micros / 1e6 - (asked + answered) / 2
        self._offset_at = answered
        if _wrong_type(fields):
            return None
        if isinstance(fields, BaseException):
            raise fields
        return list(fields)

    async def _put(self, key: str, entry: Entry, keep: float, bound: float) -> None:
        keys = [self._prefix + "e:" + key, self._prefix + "l:" + key, self._prefix + "w:" + key]
        args = (
            entry.body,
            _meta(entry),
            max(1, math.ceil(keep * 1000)),
            self._prefix + "k:",
            WAKE_MS,
        )
        self._behind(
            key,
            "store an entry",
            lambda redis: self._put_script(keys, args, client=redis),
            True,
            entry,
        )

    async def _drop(self, key: str, bound: float) -> None:
        name = self._prefix + "e:" + key
        self._behind(key, "drop an entry", lambda redis: redis.delete(name), writes=True)

    async def _lock(self, key: str, bound: float) -> object | None:
        token = secrets.token_hex(8)
        waiter = f"{self._waiter}.{next(self._serial)}"
        # the lock lasts the fetch's attempt and one question to Redis (its store) more
        life = math.ceil((bound + self.redis_timeout) * 1000)
        keys = [self._prefix + "l:" + key, self._prefix + "w:" + key]
        started = time.monotonic()
        taken, lasts = await self._call(
            "take the fetch lock",
            lambda redis: self._lock_script(keys, (token, life, waiter), client=redis),
            min(bound, self.redis_timeout),
        )
        if int(taken) == 1:
            return token
        # Another process fetches: wait until an entry is stored, the lock is released, or
        # its life ends (Redis answers then, by itself), and no longer than our own bound.
        left = min(bound - (time.monotonic() - started), int(lasts) / 1000)
        if left > 0.01:
            wake = self._prefix + "k:" + waiter
            try:
                await self._call(
                    "wait for another process's fetch",
                    lambda redis: self._wait(redis, wake, left),
                    left + self.redis_timeout,
                )
            except _Unavailable:
                pass  # read the entry (it may be there), else fetch ourselves
        return None

    async def _wait(self, redis: aredis.Redis, wake: str, left: float) -> object:
        """Block on ``wake`` (BLPOP) until someone pushes to it, at most ``left`` seconds
        (a slot of this loop's waits first)."""
        loop = asyncio.get_running_loop()
        end = loop.time() + left
        async with self._on_loop().slots:
            left = end - loop.time()
            if left <= 0.01:
                return None  # BLPOP's 0 is for ever
            return await redis.blpop([wake], timeout=left)

    async def _unlock(self, key: str, token: object, bound: float) -> None:
        keys = [self._prefix + "l:" + key, self._prefix + "w:" + key]
        args = (str(token), self._prefix + "k:", WAKE_MS)
        self._behind(
            key,
            "wake the processes waiting for a fetch",
            lambda redis: self._unlock_script(keys, args, client=redis),
        )

    async def clear(self) -> None:
        """Drop every entry of this ``name`` (a failure of Redis is raised here)."""
        if self._closed:
            raise RuntimeError(f"{self!r} is closed; create a new one")
        await self._written()  # what this loop is storing now is dropped too
        redis = await self._loops.client()
        pattern = _glob_escape(self._prefix) + "*"
        batch: list[Any] = []
        async for key in redis.scan_iter(match=pattern, count=500):
            batch.append(key)
            if len(batch) >= 500:
                await redis.unlink(*batch)
                batch.clear()
        if batch:
            await redis.unlink(*batch)

    # --- lifecycle ----------------------------------------------------------------------

    async def aclose(self) -> None:
        """Finish the writes in the background on this loop (each bounded by
        ``redis_timeout``) and cancel those on other loops; then close this loop's Redis
        client if the cache made it (a borrowed client stays open; other loops' clients
        close as those loops end)."""
        if self._closed:
            return
        self._closed = True
        here = asyncio.get_running_loop()
        with self._on_loops_lock:
            states = list(self._on_loops.items())
        for loop, state in states:
            if loop is not here:
                state.cancelling = True
                for task in list(state.tasks):
                    with contextlib.suppress(RuntimeError):  # that loop is closed
                        loop.call_soon_threadsafe(task.cancel)
        await self._written(CLOSE_WAIT * self.redis_timeout)
        await self._loops.aclose()

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
