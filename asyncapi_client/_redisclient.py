"""What the fleet's Redis users (``RedisLimiter``, ``RedisCache``) share: redis-py itself
(the ``[redis]`` extra), the checks of their arguments, and the client they talk through.

A fleet's ``name`` becomes part of every key, so it is short, printable and free of the
braces that would pick a Redis Cluster hash slot. The address shown in ``repr`` and error
messages never carries credentials or a query string (either may hold a password).

redis-py's asyncio clients work only on the event loop they first ran on (their pools'
locks and connections belong to it), while one limiter or cache may serve clients on several
loops (two ``SyncClient``s, a ``SyncClient`` and an async ``Client``): :class:`LoopRedis`
hands each loop a client of its own.
"""

from __future__ import annotations

import asyncio
import os
import threading
import weakref
from collections.abc import AsyncGenerator
from typing import Final
from urllib.parse import urlsplit

try:
    import redis.asyncio as aredis
    from redis.backoff import NoBackoff
    from redis.commands.core import AsyncScript
    from redis.exceptions import RedisError
    from redis.retry import Retry
except ImportError as exc:  # pragma: no cover - exercised in a test with redis hidden
    raise ImportError(
        "asyncapi_client.fleet needs redis-py: pip install 'asyncapi-client[redis]'"
    ) from exc

__all__ = [
    "AsyncScript",
    "LoopRedis",
    "RedisError",
    "aredis",
    "check_name",
    "client_address",
    "public_url",
    "redis_client",
]

_SCHEMES: Final = frozenset({"redis", "rediss", "unix"})


def check_name(name: object) -> str:
    """``name`` if it can be part of a Redis key; ``ValueError`` saying why not."""
    if not isinstance(name, str) or not name:
        raise ValueError(f"name must be a non-empty string, got {name!r}")
    if len(name) > 128 or not name.isprintable() or any(c.isspace() or c in "{}" for c in name):
        raise ValueError(
            f"name must be at most 128 printable characters without spaces or braces, got {name!r}"
        )
    return name


def public_url(url: object, owner: str) -> str:
    """``url`` checked, without credentials or query; ``owner`` names the class in errors."""
    if not isinstance(url, str):
        raise ValueError(
            f"{owner} needs a redis:// URL or a redis.asyncio.Redis, got {type(url).__name__}"
        )
    try:
        parts = urlsplit(url.strip())
        port = parts.port
    except ValueError as exc:
        raise ValueError(f"not a valid Redis URL: {exc}") from None
    if parts.scheme not in _SCHEMES:
        raise ValueError(
            f"a Redis URL starts with redis://, rediss:// or unix://, got scheme {parts.scheme!r}"
        )
    if parts.scheme == "unix":
        if not parts.path:
            raise ValueError("a unix:// Redis URL needs the socket's path")
        return f"unix://{parts.path}"
    if not parts.hostname:
        raise ValueError("a Redis URL needs a host, e.g. redis://127.0.0.1:6379/0")
    db = parts.path.lstrip("/")
    if db and not db.isdigit():
        raise ValueError(f"the database in a Redis URL is a number, got {db!r}")
    host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
    return f"{parts.scheme}://{host}{f':{port}' if port else ''}/{db or 0}"


def client_address(client: aredis.Redis) -> str:
    """Where a caller's ``redis.asyncio.Redis`` connects, without credentials."""
    kwargs = client.connection_pool.connection_kwargs
    if "path" in kwargs:
        return f"unix://{kwargs['path']}"
    host, port, db = kwargs.get("host", "localhost"), kwargs.get("port", 6379), kwargs.get("db", 0)
    return f"redis://{host}:{port}/{db}"


def redis_client(
    url_or_client: str | aredis.Redis, owner: str, *, max_connections: int, connect_timeout: float
) -> tuple[aredis.Redis, str, bool]:
    """The client to talk through, its address as ``repr`` shows it, and whether it was made
    here (then its owner closes it): a caller's ``redis.asyncio.Redis`` as it is, or one made
    from a URL, on a pool of ``max_connections``."""
    if isinstance(url_or_client, aredis.Redis):
        return url_or_client, client_address(url_or_client), False
    address = public_url(url_or_client, owner)
    return _from_url(url_or_client, address, max_connections, connect_timeout), address, True


def _from_url(url: str, address: str, max_connections: int, connect_timeout: float) -> aredis.Redis:
    """A client of ``url`` on a pool of ``max_connections`` (``ValueError`` if redis-py
    refuses the URL)."""
    try:
        pool = aredis.BlockingConnectionPool.from_url(
            url.strip(),
            max_connections=max_connections,
            timeout=None,  # a queued call is bounded by the caller's own timeout
            # No socket_timeout (redis-py 8 defaults to 5 s): with one, redis-py sends through
            # asyncio.wait_for, which on Python 3.11 can swallow a cancel, leaving the task
            # running and its connection checked out. Every call is bounded by its caller
            # instead (asyncio.timeout cancels cleanly).
            socket_timeout=None,
            socket_connect_timeout=connect_timeout,
            # One immediate retry: a pooled connection may be stale after Redis restarted;
            # further retries are the client's, with its back-off.
            retry=Retry(NoBackoff(), 1),
            decode_responses=False,
        )
    except (ValueError, TypeError) as exc:
        raise ValueError(f"not a valid Redis URL ({address}): {exc}") from None
    return aredis.Redis.from_pool(pool)


def _twin(client: aredis.Redis, owner: str) -> aredis.Redis:
    """A client like the caller's ``client`` (its pool's class, size and connection
    settings) on a pool of its own, for another event loop."""
    pool = client.connection_pool
    kwargs = dict(pool.connection_kwargs)
    try:
        if isinstance(pool, aredis.BlockingConnectionPool):
            twin: aredis.ConnectionPool = aredis.BlockingConnectionPool(
                max_connections=pool.max_connections,
                timeout=pool.timeout,
                connection_class=pool.connection_class,
                **kwargs,
            )
        else:
            twin = type(pool)(
                connection_class=pool.connection_class,
                max_connections=pool.max_connections,
                **kwargs,
            )
    except (TypeError, ValueError) as exc:
        raise TypeError(
            f"{owner} cannot make a redis.asyncio.Redis like yours ({type(pool).__name__}) for "
            f"another event loop: {exc}; give it a redis:// URL to share it between event loops"
        ) from None
    return aredis.Redis.from_pool(twin)


class _Bound:
    """The client one event loop talks through, whether it was made here (then it is closed
    here), and the generator whose end on that loop closes it."""

    __slots__ = ("client", "keeper", "owned")

    def __init__(self, client: aredis.Redis, owned: bool) -> None:
        self.client = client
        self.owned = owned
        self.keeper: AsyncGenerator[None, None] | None = None

    async def release(self, seconds: float) -> None:
        """Close the client if it was made here, else let go of its connections (a caller's
        client stays usable); bounded, and quiet: Redis may be gone."""
        try:
            async with asyncio.timeout(seconds):
                if self.owned:
                    await self.client.aclose()
                else:
                    await self.client.connection_pool.disconnect()
        except (RedisError, OSError, TimeoutError):
            pass


#: Every LoopRedis of the process, so that a forked child can renew their locks.
_every: weakref.WeakSet[LoopRedis] = weakref.WeakSet()


def _after_fork_in_child() -> None:
    """A fork may land while another thread holds a LoopRedis's lock; no thread of the
    child will release it: each gets a new one (the parent's loops stay in the map, never
    used here)."""
    for loops in list(_every):
        loops._lock = threading.Lock()


if hasattr(os, "register_at_fork"):  # POSIX; elsewhere there is no fork
    os.register_at_fork(after_in_child=_after_fork_in_child)


class LoopRedis:
    """A ``redis.asyncio.Redis`` for each event loop that asks, made alike.

    Built from a URL, every loop gets a client of its own from that URL (a pool of
    ``max_connections`` each). Built from a caller's client, that client serves one loop:
    the one running when this was made, else the first to ask; any other loop gets a twin
    made from its pool's class, size and connection settings. What was made here is closed
    when its loop shuts down its asynchronous generators (``asyncio.run`` does, and so does
    a ``SyncClient``'s ``close()``), or by :meth:`aclose` on that loop; the caller's client
    is never closed, only let go of (its connections on a loop that ends are disconnected).
    """

    def __init__(
        self,
        url_or_client: str | aredis.Redis,
        owner: str,
        *,
        max_connections: int,
        connect_timeout: float,
    ) -> None:
        self.owner = owner
        self._max_connections = max_connections
        self._connect_timeout = connect_timeout
        if isinstance(url_or_client, aredis.Redis):
            self.address = client_address(url_or_client)
            self.owns = False
            self._url: str | None = None
            first = url_or_client
        else:
            self.address = public_url(url_or_client, owner)
            self.owns = True
            self._url = url_or_client
            # made now: a URL redis-py refuses is refused here, not at the first call
            first = _from_url(url_or_client, self.address, max_connections, connect_timeout)
        #: Script objects are registered on this client (its encoder); calls name the loop's.
        self.template = first
        self._first: aredis.Redis | None = first
        try:
            running: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        self._first_loop = None if running is None else weakref.ref(running)
        self._lock = threading.Lock()
        self._bound: dict[asyncio.AbstractEventLoop, _Bound] = {}
        _every.add(self)

    def script(self, text: str) -> AsyncScript:
        """A Lua script to call with ``client=`` the loop's client (:meth:`client`)."""
        return self.template.register_script(text)

    def current(self) -> aredis.Redis:
        """The running loop's client (made now if it has none)."""
        return self._bind(asyncio.get_running_loop()).client

    def ready(self) -> aredis.Redis | None:
        """The running loop's client if :meth:`client` made it ready already (no await)."""
        bound = self._bound.get(asyncio.get_running_loop())
        return None if bound is None or bound.keeper is None else bound.client

    async def client(self) -> aredis.Redis:
        """The running loop's client; the first call on a loop arranges for its closing when
        that loop shuts down."""
        loop = asyncio.get_running_loop()
        bound = self._bound.get(loop)
        if bound is None:
            bound = self._bind(loop)
        if bound.keeper is None:
            bound.keeper = self._keep(loop, bound)
            await bound.keeper.asend(None)  # started: the loop now knows of it
        return bound.client

    def _bind(self, loop: asyncio.AbstractEventLoop) -> _Bound:
        with self._lock:
            bound = self._bound.get(loop)
            if bound is not None:
                return bound
            # a loop closed without shutting down its generators: its client is let go
            for gone in [other for other in self._bound if other.is_closed()]:
                del self._bound[gone]
            first, wanted = self._first, self._first_loop
            if first is not None and (wanted is None or wanted() is loop):
                self._first = None
                bound = _Bound(first, owned=self.owns)
            elif self._url is not None:
                made = _from_url(
                    self._url, self.address, self._max_connections, self._connect_timeout
                )
                bound = _Bound(made, owned=True)
            else:
                bound = _Bound(_twin(self.template, self.owner), owned=True)
            self._bound[loop] = bound
            return bound

    async def _keep(
        self, loop: asyncio.AbstractEventLoop, bound: _Bound
    ) -> AsyncGenerator[None, None]:
        """Lives as long as the loop: ``shutdown_asyncgens()`` ends it there, and with it the
        loop's client."""
        try:
            yield
        finally:
            await self._release(loop, bound)

    async def _release(self, loop: asyncio.AbstractEventLoop, bound: _Bound) -> None:
        with self._lock:
            if self._bound.get(loop) is not bound:
                return  # released already (aclose() on this loop)
            del self._bound[loop]
        await bound.release(self._connect_timeout)

    async def aclose(self) -> None:
        """Close the running loop's client if it was made here (a caller's stays open);
        other loops' clients close as those loops end."""
        loop = asyncio.get_running_loop()
        with self._lock:
            bound = self._bound.pop(loop, None)
            if bound is None and self._first is not None and self.owns:
                bound = _Bound(self._first, owned=True)  # made, never used: closed all the same
                self._first = None
        if bound is None:
            return
        keeper, bound.keeper = bound.keeper, None
        if bound.owned:
            await bound.release(self._connect_timeout)
        if keeper is not None:
            await keeper.aclose()  # its end finds nothing left to release
