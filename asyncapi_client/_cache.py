"""Cached reference data: ``Client(cache=MemoryCache(...))`` and the stage that uses a cache.

The stage (:class:`CacheStage`, :func:`cached_call`) sits around the pipeline, which it
reaches only through :class:`~._request.Upstream`: a fresh entry is served with no request
and no limiter slot; a stale one with validators is revalidated with
``If-None-Match`` / ``If-Modified-Since`` (a 304 refreshes it without a body); identical
concurrent misses share one request. The raw body is kept and decoded with the operation's
own decoder, so a hit costs what decoding the response did.

What a server sends is never trusted: a ``Cache-Control`` that does not parse, or says
``no-store``, or ``Vary: *``, makes the answer not stored; an ``ETag`` or ``Last-Modified``
that is not well formed is not used as a validator.

Backends (:class:`CacheBackend`) only store entries and, across processes, say who fetches:
:class:`MemoryCache` here, ``RedisCache`` in :mod:`asyncapi_client._rediscache`.
"""

from __future__ import annotations

import abc
import asyncio
import math
import re
import threading
import time
import weakref
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Iterable, Mapping
from email.utils import parsedate_to_datetime
from typing import Any, Final, NamedTuple, Protocol, TypeAlias, TypeVar

from multidict import CIMultiDict, CIMultiDictProxy

from ._errors import (
    ApiError,
    DecodeError,
    RequestTimeoutError,
    ResponseTooLargeError,
    StatusError,
    TransportError,
)
from ._limiters import OPERATIONS, OperationName
from ._request import Outcome, Request, Upstream
from ._types import CacheState

__all__ = [
    "DEFAULT_TTL",
    "CacheBackend",
    "CacheStage",
    "CacheState",
    "Cached",
    "Entry",
    "MemoryCache",
    "cache_control",
    "cached_call",
    "conditional_headers",
    "freshness",
    "validators",
    "vary_names",
]

T = TypeVar("T")

#: An Outcome and where it came from (its ``cache`` field set).
Cached: TypeAlias = Outcome[T]

#: The operations a cache answers when its ``ttl`` is not given (seconds fresh).
DEFAULT_TTL: Final[Mapping[str, float]] = {"tokens": 300.0, "token_markets": 60.0}

#: How far apart the clocks of a fleet's machines may be (s): an entry stored later than
#: this ahead of our clock is not fresh.
CLOCK_SKEW: Final = 5.0

_TOKEN: Final = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+").fullmatch
_ETAG: Final = re.compile(r'(?:W/)?"[\x21\x23-\x7e]*"').fullmatch
_DIGITS: Final = re.compile(r"[0-9]{1,10}", re.ASCII).fullmatch
#: Longer header values than these are not read (a cache directive list, a validator).
_MAX_DIRECTIVES: Final = 4096
_MAX_VALIDATOR: Final = 512
#: Request headers a ``Vary`` naming them does not split entries on: the body is stored
#: decoded, whatever encoding was asked for.
_VARY_IGNORED: Final = frozenset({"accept-encoding"})
#: More names than this in ``Vary``: not stored (nobody varies on that many).
_MAX_VARY: Final = 16
#: Headers of a 304 that never replace the stored response's (they describe its framing).
_FRAMING: Final = frozenset(
    {"content-length", "content-encoding", "transfer-encoding", "content-type", "content-range"}
)


# --- reading what the server says (never trusted) ---------------------------------------


def _values(headers: Mapping[str, str], name: str) -> list[str]:
    getall = getattr(headers, "getall", None)
    if getall is not None:
        return list(getall(name, ()))
    value = headers.get(name)
    return [] if value is None else [value]


def _directives(values: Iterable[str]) -> dict[str, str] | None:
    """The directives of ``Cache-Control`` header values, or None when they do not parse
    (too long, not tokens, a quoted value with escapes, a directive given twice differently)."""
    text = ",".join(values)
    if len(text) > _MAX_DIRECTIVES:
        return None
    found: dict[str, str] = {}
    for part in text.split(","):
        part = part.strip(" \t")
        if not part:
            continue
        name, _, value = part.partition("=")
        name, value = name.strip(" \t").lower(), value.strip(" \t")
        if not _TOKEN(name):
            return None
        if value.startswith('"'):
            if len(value) < 2 or not value.endswith('"') or "\\" in value:
                return None
            value = value[1:-1]
        elif value and not _TOKEN(value):
            return None
        if found.setdefault(name, value) != value:
            return None  # max-age=60, max-age=0: nobody can say which one holds
    return found


def cache_control(headers: Mapping[str, str]) -> dict[str, str] | None:
    """The ``Cache-Control`` directives of ``headers`` ({} when it has none), or None when
    they do not parse."""
    given = _values(headers, "Cache-Control")
    return _directives(given) if given else {}


def _age(headers: Mapping[str, str]) -> float | None:
    """The ``Age`` a cache on the way (a CDN) says the answer already has: 0.0 when absent;
    None when it does not parse (not digits, or given twice differently)."""
    ages = {v.strip(" \t") for v in _values(headers, "Age")}
    if not ages:
        return 0.0
    if len(ages) > 1:
        return None
    (age,) = ages
    return float(int(age)) if _DIGITS(age) else None


def vary_names(headers: Mapping[str, str]) -> tuple[str, ...] | None:
    """The request headers an answer with ``headers`` varies on (lower case, sorted; those
    that cannot change a stored answer left out), or None: ``Vary: *``, or a ``Vary`` that
    does not parse (not tokens, overlong, too many names)."""
    names: set[str] = set()
    for value in _values(headers, "Vary"):
        if len(value) > _MAX_DIRECTIVES:
            return None
        for part in value.split(","):
            name = part.strip(" \t").lower()
            if not name:
                continue
            if name == "*" or not _TOKEN(name):
                return None
            names.add(name)
    if len(names) > _MAX_VARY:
        return None
    return tuple(sorted(names - _VARY_IGNORED))


def freshness(headers: Mapping[str, str], ttl: float) -> float | None:
    """Seconds an answer with ``headers`` stays fresh from now: ``min(ttl, max-age)`` less
    its ``Age`` (RFC 9111 section 4.2), 0 for ``no-cache`` (stored, revalidated on every
    use); None: not to be stored."""
    if vary_names(headers) is None:
        return None
    age = _age(headers)
    if age is None:
        return None
    found = cache_control(headers)
    if found is None or "no-store" in found:
        return None
    if "no-cache" in found:
        return 0.0
    max_age = found.get("max-age")
    if max_age is None:
        lifetime = 0.0 if _expired(headers) else ttl
    elif not _DIGITS(max_age):
        return None
    else:
        lifetime = min(ttl, float(int(max_age)))
    return max(0.0, lifetime - age)


def _expired(headers: Mapping[str, str]) -> bool:
    """Whether ``Expires`` says the answer is stale already: at or before its ``Date`` (or
    now, without one), or not a date at all ("0": in the past, RFC 9111 section 5.3)."""
    given = _values(headers, "Expires")
    if not given:
        return False
    expires = _http_date(given[0]) if len(given) == 1 else None
    if expires is None:
        return True
    dates = _values(headers, "Date")
    date = _http_date(dates[0]) if len(dates) == 1 else None
    return expires <= (time.time() if date is None else date)


def _http_date(text: str) -> float | None:
    """An HTTP date as a Unix time, or None when it is not one."""
    try:
        parsed = parsedate_to_datetime(text.strip())
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    if parsed.tzinfo is None:
        return None
    return parsed.timestamp()


def _strong(etag: str | None) -> str | None:
    """``etag`` when it is a strong validator (not ``W/``), else None."""
    return etag if etag is not None and not etag.startswith("W/") else None


def may_serve_stale(headers: Mapping[str, str]) -> bool:
    """Whether a stale answer with ``headers`` may be served when a refresh fails
    (``stale_if_error``): not when its ``Cache-Control`` says ``must-revalidate`` or
    ``no-cache`` (RFC 9111 section 4.2.4), or does not parse."""
    found = cache_control(headers)
    return found is not None and "must-revalidate" not in found and "no-cache" not in found


def validators(headers: Mapping[str, str]) -> tuple[str | None, str | None]:
    """The ``ETag`` and ``Last-Modified`` to revalidate with; None where absent or malformed."""
    etags = _values(headers, "ETag")
    etag = etags[0].strip() if len(etags) == 1 else None
    if etag is not None and (len(etag) > _MAX_VALIDATOR or not _ETAG(etag)):
        etag = None
    dates = _values(headers, "Last-Modified")
    modified = dates[0].strip() if len(dates) == 1 else None
    if modified is not None:
        try:
            ok = (
                len(modified) <= 64
                and modified.isascii()
                and modified.isprintable()
                and parsedate_to_datetime(modified) is not None
            )
        except (TypeError, ValueError, IndexError, OverflowError):
            ok = False
        if not ok:
            modified = None
    return etag, modified


def conditional_headers(entry: Entry | None) -> dict[str, str] | None:
    """The headers that ask the server whether ``entry`` still holds (None: it cannot be asked)."""
    if entry is None:
        return None
    headers = {}
    if entry.etag is not None:
        headers["If-None-Match"] = entry.etag
    if entry.last_modified is not None:
        headers["If-Modified-Since"] = entry.last_modified
    return headers or None


def _merged(stored: Mapping[str, str], fresh: Mapping[str, str]) -> CIMultiDictProxy[str]:
    """The stored response's headers updated with a 304's (RFC 9111 section 3.2)."""
    merged: CIMultiDict[str] = CIMultiDict(stored)
    names = {name.lower() for name in fresh} - _FRAMING
    # The stored Age is the age it had then: confirmed now, it is as old as the 304 says
    # (no Age: fresh from the origin).
    for name in names | {"age"}:
        merged.popall(name, None)
    for name, value in fresh.items():
        if name.lower() in names:
            merged.add(name, value)
    return CIMultiDictProxy(merged)


# --- entries and backends ---------------------------------------------------------------


class Entry(NamedTuple):
    """One stored answer: its body as received, what a Response shows of it, its validators,
    when it was stored (on its backend's clock, :meth:`CacheBackend.now`) and for how many
    seconds it is fresh."""

    body: bytes
    status: int
    headers: Mapping[str, str]
    url: str
    etag: str | None
    last_modified: str | None
    stored_at: float
    lifetime: float
    #: The request headers its answer varies on (``Vary``), with what the request that
    #: fetched it sent (None: not sent). A client that sends other values does not use it.
    varied: tuple[tuple[str, str | None], ...] = ()

    def age(self, now: float) -> float:
        return now - self.stored_at

    def fresh(self, now: float) -> bool:
        # An entry stored further "in the future" than clocks disagree (a clock that stepped
        # back, another machine's, a hand-made entry) is not trusted fresh.
        return self.stored_at - CLOCK_SKEW <= now < self.stored_at + self.lifetime


class _Unavailable(Exception):
    """The backend could not answer (it logged why): the call goes on as if uncached."""


#: What a client sends as a request header (None: not sent); see ``AiohttpSender.sent_header``.
SentHeader: TypeAlias = Callable[[str], "str | None"]


def _sends_nothing(name: str) -> str | None:
    return None


def _varied(headers: Mapping[str, str], sent: SentHeader) -> tuple[tuple[str, str | None], ...]:
    """What the request sent of each header the answer with ``headers`` varies on."""
    return tuple((name, sent(name)) for name in vary_names(headers) or ())


def _usable(entry: Entry | None, sent: SentHeader) -> Entry | None:
    """``entry`` if this client's requests send what the one that fetched it sent of every
    header its answer varies on (RFC 9111 section 4.1); else None, as if absent."""
    if entry is None or not entry.varied:
        return entry
    for name, value in entry.varied:
        if sent(name) != value:
            return None
    return entry


def _check_ttl(ttl: object) -> dict[str, float]:
    if not isinstance(ttl, Mapping):
        raise ValueError(
            f"ttl must map operation names to seconds, e.g. {{'tokens': 300.0}}, got {ttl!r}"
        )
    checked: dict[str, float] = {}
    for operation, seconds in ttl.items():
        if operation not in OPERATIONS:
            known = ", ".join(sorted(OPERATIONS))
            raise ValueError(f"ttl names unknown operation {operation!r}: expected one of {known}")
        if (
            isinstance(seconds, bool)
            or not isinstance(seconds, int | float)
            or not 0 <= seconds < math.inf
        ):
            raise ValueError(
                f"ttl[{operation!r}] must be a finite number of seconds >= 0, got {seconds!r}"
            )
        checked[operation] = float(seconds)
    return checked


def _check_seconds(value: object, argument: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value < math.inf:
        raise ValueError(f"{argument} must be a finite number of seconds >= 0, got {value!r}")
    return float(value)


class CacheBackend(abc.ABC):
    """What the stage needs of a cache: entries by key, and who fetches a missing one.

    ``ttl`` names the operations it answers; ``stale_if_error`` how stale an entry may be
    and still be served when its refresh fails. Identical concurrent misses of one process
    share one request here (``flights()``, per event loop: clients on several loops may share
    one cache); across processes ``_lock`` / ``_unlock`` decide.
    """

    #: Entries shared with other processes: after taking the fetch lock, read the entry
    #: again (another process may have stored it since it was read).
    _shared: bool = False

    def __init__(self, ttl: Mapping[OperationName, float] | None, stale_if_error: float) -> None:
        self.ttl: Mapping[str, float] = _check_ttl(DEFAULT_TTL if ttl is None else ttl)
        self.stale_if_error: float = _check_seconds(stale_if_error, "stale_if_error")
        #: Per event loop: the fetches in flight, by key (a future belongs to its loop).
        self._flights: weakref.WeakKeyDictionary[
            asyncio.AbstractEventLoop, dict[str, asyncio.Future[Any]]
        ] = weakref.WeakKeyDictionary()
        self._flights_lock = threading.Lock()

    def now(self) -> float:
        """The clock entries' times are on (seconds): the wall clock, which every process of
        a fleet shares; a backend of one process uses a clock that does not step."""
        return time.time()

    def flights(self) -> dict[str, asyncio.Future[Any]]:
        """The fetches in flight on the running loop, by key."""
        loop = asyncio.get_running_loop()
        flights = self._flights.get(loop)
        if flights is None:
            with self._flights_lock:
                flights = self._flights.setdefault(loop, {})
        return flights

    def _keep(self, operation: str, entry: Entry) -> float:
        """Seconds to keep ``entry``: fresh, then at least ``max(ttl, stale_if_error)`` stale."""
        return entry.lifetime + max(self.ttl[operation], self.stale_if_error)

    @abc.abstractmethod
    async def _get(self, key: str, bound: float) -> Entry | None:
        """The entry of ``key`` (None: none); raises _Unavailable when it cannot say."""

    @abc.abstractmethod
    async def _put(self, key: str, entry: Entry, keep: float, bound: float) -> None:
        """Store ``entry`` for ``keep`` seconds (never raises: a failure is logged)."""

    @abc.abstractmethod
    async def _drop(self, key: str, bound: float) -> None:
        """Forget ``key`` (never raises: a failure is logged)."""

    def _fresh(self, key: str) -> Entry | None:
        """A fresh entry of ``key`` at once, without waiting (None: ask ``_get``)."""
        return None

    async def _lock(self, key: str, bound: float) -> object | None:
        """Become the fetcher of ``key`` (a token for ``_unlock``), or wait up to ``bound``
        for another process's fetch and return None. One process: always the fetcher."""
        return True

    async def _unlock(self, key: str, token: object, bound: float) -> None:
        """Let the processes waiting on ``key`` read what was stored."""
        return

    @abc.abstractmethod
    async def clear(self) -> None:
        """Drop every entry."""


class MemoryCache(CacheBackend):
    """Entries kept in this process, least recently used dropped first.

    Several clients may share it, on one event loop or several (two ``SyncClient`` clients, a
    ``SyncClient`` and an async ``Client``); a client never closes it. Identical concurrent
    misses of the clients of one loop share one request. Ages are measured on a clock that
    does not step (``time.monotonic``).

    Args:
        ttl: operation name -> seconds an answer stays fresh; only these operations are
            cached (default ``{"tokens": 300.0, "token_markets": 60.0}``).
        max_entries: at most this many entries; the least recently used goes first.
        max_bytes: the stored bodies (as received) never take more than this in all; the
            least recently used go first, and an answer larger than an eighth of it is not
            stored.
        stale_if_error: seconds an entry may be stale and still be served when its
            refresh fails (connection failure, timeout, 5xx, 429) after its retries.
    """

    def __init__(
        self,
        ttl: Mapping[OperationName, float] | None = None,
        *,
        max_entries: int = 10_000,
        max_bytes: int = 64 * 2**20,
        stale_if_error: float = 0.0,
    ) -> None:
        super().__init__(ttl, stale_if_error)
        self.max_entries: int = _positive(max_entries, "max_entries")
        self.max_bytes: int = _positive(max_bytes, "max_bytes")
        self._entries: OrderedDict[str, tuple[Entry, float]] = OrderedDict()
        self._bytes = 0
        #: Clients on other threads' loops may share it: every change under this lock.
        self._mutex = threading.Lock()

    def __repr__(self) -> str:
        return (
            f"MemoryCache(ttl={dict(self.ttl)!r}, max_entries={self.max_entries}, "
            f"max_bytes={self.max_bytes}, stale_if_error={self.stale_if_error:g})"
        )

    def __len__(self) -> int:
        return len(self._entries)

    @property
    def bytes(self) -> int:
        """The bytes the stored bodies take now."""
        return self._bytes

    def now(self) -> float:
        """The clock of this process's entries: ``time.monotonic()``, which never steps."""
        return time.monotonic()

    async def _get(self, key: str, bound: float) -> Entry | None:
        with self._mutex:
            found = self._entries.get(key)
            if found is None:
                return None
            entry, until = found
            if time.monotonic() >= until:
                self._remove(key)
                return None
            self._entries.move_to_end(key)
            return entry

    def _fresh(self, key: str) -> Entry | None:
        with self._mutex:
            found = self._entries.get(key)
            if found is None:
                return None
            entry = found[0]
            now = time.monotonic()  # Entry.fresh, inline: the path of every in-process hit
            if not entry.stored_at - CLOCK_SKEW <= now < entry.stored_at + entry.lifetime:
                return None
            self._entries.move_to_end(key)
            return entry

    async def _put(self, key: str, entry: Entry, keep: float, bound: float) -> None:
        size = len(entry.body)
        with self._mutex:
            self._remove(key)
            if size > self.max_bytes // 8:
                return  # one answer must not push out an eighth of the cache
            entries = self._entries
            entries[key] = (entry, entry.stored_at + keep)
            self._bytes += size
            while len(entries) > self.max_entries or self._bytes > self.max_bytes:
                _, (dropped, _) = entries.popitem(last=False)
                self._bytes -= len(dropped.body)

    def _remove(self, key: str) -> None:
        found = self._entries.pop(key, None)
        if found is not None:
            self._bytes -= len(found[0].body)

    async def _drop(self, key: str, bound: float) -> None:
        with self._mutex:
            self._remove(key)

    async def clear(self) -> None:
        """Drop every entry."""
        with self._mutex:
            self._entries.clear()
            self._bytes = 0


def _positive(value: object, argument: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ValueError(f"{argument} must be a positive int, got {value!r}")
    return value


# --- the stage ----------------------------------------------------------------------------


class CacheStage:
    """The cache around one client's pipeline: ``value`` for the plain operations,
    ``outcome`` for ``with_response`` and telemetry; ``answers`` says which operations it
    answers (its ``ttl``'s)."""

    __slots__ = ("_cache", "_sent", "_upstream", "ttl")

    def __init__(self, cache: CacheBackend, upstream: Upstream, sent: SentHeader) -> None:
        self._cache = cache
        self._upstream = upstream
        self.ttl = cache.ttl
        #: What this client's requests send of a header (for the entries' ``Vary``).
        self._sent = sent

    def answers(self, request: Request[Any]) -> bool:
        """Whether ``request``'s operation goes through the cache."""
        return request.operation in self.ttl

    @staticmethod
    def key(request: Request[Any]) -> str:
        """The network and the full URL (scheme, host, port, path, query): two deployments,
        or two networks on one host, never share an entry."""
        return f"{request.network.value} {request.url}"

    async def value(self, request: Request[T]) -> T:
        """The decoded value; a fresh in-process entry costs one lookup and the decode."""
        self._upstream.ready()  # a closed client, or another loop, is refused before any hit
        entry = _usable(self._cache._fresh(self.key(request)), self._sent)
        if entry is not None:
            return request.decode(entry.body)  # decoded once already: it decodes again
        return (await self._call(request))[0]

    async def outcome(self, request: Request[T]) -> Cached[T]:
        """The whole outcome and where it came from (``cache``)."""
        self._upstream.ready()
        return await self._call(request)

    async def _call(self, request: Request[T]) -> Cached[T]:
        """The cached call, all of it (the cache's questions, a wait for another caller's or
        process's fetch, the fetch) under the call's own deadline."""
        # Each question to the cache, and a wait for another process's fetch, is bounded by
        # the attempt's timeout, and by the call's deadline when that is shorter.
        bound = self._upstream.attempt_timeout
        deadline = request.deadline
        call = cached_call(
            self._cache,
            request,
            self.key(request),
            self._upstream.outcome,
            bound if deadline is None else min(bound, deadline),
            self._sent,
        )
        if deadline is None:
            return await call
        try:
            async with asyncio.timeout(deadline) as scope:
                return await call
        except TimeoutError as exc:
            if not scope.expired():
                raise  # an attempt's timeout, or the pipeline's own deadline error
            error = RequestTimeoutError(
                f"the operation ran past its deadline of {deadline:g}s",
                url=request.url,
                network=request.network.value,
            )
            error._own_deadline = True
            raise error from exc


class Send(Protocol):
    """The rest of the request path below the cache (:meth:`Upstream.outcome`): one call,
    with the validators ``conditional`` on each attempt when given."""

    def __call__(
        self, request: Request[T], conditional: Mapping[str, str] | None = None, /
    ) -> Awaitable[Outcome[T]]: ...


class _Restart:
    """Told to callers that shared a fetch whose fetcher was cancelled: one takes over."""


_RESTART: Final = _Restart()


def _servable_on_error(error: ApiError) -> bool:
    """Connection failure, timeout, 5xx or 429: the failures ``stale_if_error`` covers."""
    if isinstance(error, StatusError):
        return error.status >= 500 or error.status == 429
    # RequestTimeoutError is a TransportError; a body over max_response_bytes is an answer
    return isinstance(error, TransportError) and not isinstance(error, ResponseTooLargeError)


def _from_entry(
    request: Request[T], entry: Entry, headers: Mapping[str, str], attempts: int, started: float
) -> Outcome[T] | None:
    """The outcome ``entry`` answers; None when its body does not decode (an entry that
    another process or a person wrote into a shared cache): then it is not used."""
    try:
        value = request.decode(entry.body)
    except DecodeError:
        return None
    return Outcome(
        value,
        entry.status,
        headers,
        entry.body,
        entry.url,
        request.network,
        attempts,
        time.monotonic() - started,
    )


async def cached_call(
    cache: CacheBackend,
    request: Request[T],
    key: str,
    send: Send,
    bound: float,
    sent: SentHeader,
) -> Cached[T]:
    """``request`` answered from ``cache`` when it can, else by ``send`` (the rest of the
    request path: coalescing, deadline, limiter, retries); ``bound`` bounds each question
    to the backend and the wait for another process's fetch; ``sent`` says what the client
    sends of a header an entry's answer varies on."""
    started = time.monotonic()
    while True:
        try:
            entry = _usable(await cache._get(key, bound), sent)
        except _Unavailable:
            return (await send(request))._replace(cache="miss")
        if entry is not None and entry.fresh(cache.now()):
            hit = _from_entry(request, entry, entry.headers, 0, started)
            if hit is not None:
                return hit._replace(cache="hit")
            entry = None  # fetched again, and replaced
        flight = cache.flights().get(key)
        if flight is None:
            break
        shared = await asyncio.shield(flight)  # another task of this process fetches it
        if shared is not _RESTART:
            result, leader_sent = shared
            if all(sent(name) == leader_sent(name) for name in vary_names(result.headers) or ()):
                return result  # type: ignore[no-any-return]
            # its answer varies on a header this client sends otherwise: fetch our own
    flight = asyncio.get_running_loop().create_future()
    flights = cache.flights()
    flights[key] = flight
    try:
        result = await _lead(cache, request, key, entry, send, bound, started, sent)
    except BaseException as exc:
        del flights[key]
        if isinstance(exc, asyncio.CancelledError) or (
            isinstance(exc, ApiError) and exc._own_deadline
        ):  # the fetcher's own deadline is not the others': one of them fetches
            flight.set_result(_RESTART)
        else:
            flight.set_exception(exc)
            flight.exception()  # retrieved: no "never retrieved" warning when nobody waited
        raise
    del flights[key]
    # with what this client sends: a client sending other values of the headers the answer
    # varies on does not take it
    flight.set_result((result, sent))
    return result


async def _lead(
    cache: CacheBackend,
    request: Request[T],
    key: str,
    entry: Entry | None,
    send: Send,
    bound: float,
    started: float,
    sent: SentHeader,
) -> Cached[T]:
    """The fetch of this process: across processes, fetch, or wait for whoever does."""
    try:
        token = await cache._lock(key, bound)
    except _Unavailable:
        return (await send(request))._replace(cache="miss")
    if token is None:  # another process fetched (or gave up): read what it stored
        try:
            stored = _usable(await cache._get(key, bound), sent)
        except _Unavailable:
            return (await send(request))._replace(cache="miss")
        hit, stored = _stored_answer(request, stored, started, cache.now())
        if hit is not None:
            return hit
        return await _fetch(cache, request, key, stored or entry, send, bound, started, sent)
    try:
        if cache._shared:  # stored by another process between our read and our lock?
            try:
                stored = _usable(await cache._get(key, bound), sent)
            except _Unavailable:
                stored = None
            hit, stored = _stored_answer(request, stored, started, cache.now())
            if hit is not None:
                return hit
            entry = stored or entry
        return await _fetch(cache, request, key, entry, send, bound, started, sent)
    finally:
        await cache._unlock(key, token, bound)


def _stored_answer(
    request: Request[T], stored: Entry | None, started: float, now: float
) -> tuple[Cached[T] | None, Entry | None]:
    """What another process's entry gives: the hit while it is fresh, else the entry to
    revalidate (None: missing, or fresh but not decodable, so not worth asking about)."""
    if stored is None:
        return None, None
    if not stored.fresh(now):
        return None, stored
    hit = _from_entry(request, stored, stored.headers, 0, started)
    return (None, None) if hit is None else (hit._replace(cache="hit"), stored)


async def _fetch(
    cache: CacheBackend,
    request: Request[T],
    key: str,
    entry: Entry | None,
    send: Send,
    bound: float,
    started: float,
    sent: SentHeader,
) -> Cached[T]:
    """One call through the request path, revalidating ``entry`` when it has validators."""
    ttl = cache.ttl[request.operation]
    asked = conditional_headers(entry)
    try:
        outcome = await send(request, asked)
    except ApiError as exc:
        if entry is None:
            raise
        if asked is not None and isinstance(exc, StatusError) and exc.status == 304:
            sent_back = _strong(validators(exc.headers)[0])
            if sent_back is not None and sent_back != entry.etag:
                # it confirms another representation than ours (RFC 9111, 4.3.4): ask whole
                return await _fetch(cache, request, key, None, send, bound, started, sent)
            confirmed = _from_entry(request, entry, entry.headers, exc.attempts, started)
            if confirmed is None:  # what the 304 confirms does not decode: fetch it whole
                await cache._drop(key, bound)
                return await _fetch(cache, request, key, None, send, bound, started, sent)
            headers = _merged(entry.headers, exc.headers)
            lifetime = freshness(headers, ttl)
            if lifetime is None:
                await cache._drop(key, bound)
            else:
                etag, modified = validators(headers)
                refreshed = entry._replace(
                    headers=headers,
                    etag=etag,
                    last_modified=modified,
                    stored_at=cache.now(),
                    lifetime=lifetime,
                    varied=_varied(headers, sent),
                )
                await cache._put(key, refreshed, cache._keep(request.operation, refreshed), bound)
            return confirmed._replace(headers=headers, cache="revalidated")
        if (
            _servable_on_error(exc)
            and entry.age(cache.now()) - entry.lifetime <= cache.stale_if_error
            and may_serve_stale(entry.headers)
        ):
            stale = _from_entry(request, entry, entry.headers, exc.attempts, started)
            if stale is not None:
                return stale._replace(cache="stale")
        raise
    answered = outcome.headers
    lifetime = freshness(answered, ttl)
    if lifetime is None:
        if entry is not None:
            await cache._drop(key, bound)
    else:
        etag, modified = validators(answered)
        stored = Entry(
            outcome.content,
            outcome.status,
            answered,
            outcome.url,
            etag,
            modified,
            cache.now(),
            lifetime,
            _varied(answered, sent),
        )
        keep = cache._keep(request.operation, stored)
        if keep > 0:  # fresh for a while, or kept to revalidate or to serve on an error
            await cache._put(key, stored, keep, bound)
        elif entry is not None:
            await cache._drop(key, bound)
    return outcome._replace(cache="miss")
