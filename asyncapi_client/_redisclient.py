"""What the fleet's Redis users (``RedisLimiter``, ``RedisCache``) share: redis-py itself
(the ``[redis]`` extra), the checks of their arguments, and the client they talk through.

A fleet's ``name`` becomes part of every key, so it is short, printable and free of the
braces that would pick a Redis Cluster hash slot. The address shown in ``repr`` and error
messages never carries credentials or a query string (either may hold a password).
"""

from __future__ import annotations

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
    try:
        pool = aredis.BlockingConnectionPool.from_url(
            url_or_client.strip(),
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
    return aredis.Redis.from_pool(pool), address, True
