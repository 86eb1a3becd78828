"""The session layer: the only module that touches aiohttp's client.

The client builds one frozen :class:`~asyncapi_client._request.Request` per call and hands
it to :meth:`Transport.send`, which takes it through these stages, each reading it:

1. coalescing: an identical request already in flight is joined; if its leader is
   cancelled, one of the joined callers takes over;
2. the operation ``deadline`` (``asyncio.timeout``) around everything below;
3. per attempt, retries included: the limiter (its rates and the network's 429 hold), then
   one request with its per-attempt ``timeout``, same-origin redirects, the body read under
   ``max_response_bytes``, and the decode;
4. after a failed attempt, the pure :func:`~asyncapi_client._retry.decide` says whether and
   how long to wait; :meth:`Transport._after_failure` does what it says (the 429 hold, the
   retry hook, the wait) in one place.

``timeout`` bounds one attempt (connect, send, read the whole body) and each question to
the limiter; ``deadline`` bounds the whole operation: every attempt, the limiter's waits and
the waits between retries. A wait that would pass the deadline is not started:
``RequestTimeoutError`` is raised at once. Without a deadline an operation can take about
``(max_retries + 1) * timeout`` plus its waits.

One attempt is one request: aiohttp's own resend of an idempotent request after the
connection drops (RFC 9112 section 9.3.1, which aiohttp does even on a fresh connection) is
turned off, so ``max_retries=N`` means at most N+1 requests. The one resend that is kept is
the one that is always safe: a request that fails on a reused keep-alive connection before
a byte of the answer came (the server had closed that idle connection: a stale one) is sent
once more, on a new connection, within the same attempt (see :func:`_stale`). Whether a
connection was reused is told by our own session's connector, or by a trace config the
client adds to a caller's session. Redirects are followed here,
not by aiohttp: only to the same origin, or from http to https on the same host, at most
:data:`MAX_REDIRECTS` hops; anything else is refused, so no caller header reaches another
origin. Failures that cannot heal (a certificate that does not verify, a malformed HTTP
response, a refused redirect) are raised at once. The client's own session keeps no cookies.

Every aiohttp failure is translated into the library's errors in :func:`_translate`.
"""

from __future__ import annotations

import asyncio
import codecs
import contextvars
import enum
import errno
import inspect
import logging
import random
import re
import sys
import time
from collections.abc import Awaitable, Callable, Coroutine, Mapping, Sequence
from ssl import SSLContext
from typing import TYPE_CHECKING, Any, Final, Literal, TypeVar, overload
from urllib.parse import quote

import aiohttp
from multidict import CIMultiDict
from yarl import URL

from ._errors import (
    ApiError,
    DecodeError,
    LimiterError,
    RateLimitError,
    RequestTimeoutError,
    ResponseTooLargeError,
    StatusError,
    TransportError,
    status_error,
)
from ._limiters import HOLD_RECHECK, Admission, Limiter, LocalLimiter
from ._network import Hosts, Network
from ._request import Outcome, Request, Response
from ._retry import Decision, RetryEvent, RetryPolicy, decide, mark_final
from ._version import __version__

if TYPE_CHECKING:  # imported only when a client asks for telemetry or a cache
    from ._cache import CacheBackend, CacheStage
    from ._telemetry import Telemetry

__all__ = ["MAX_REDIRECTS", "Transport", "encode_segment", "user_agent"]

T = TypeVar("T")

log: Final = logging.getLogger("asyncapi_client")

#: How much of an error body is read to show in StatusError.body.
_ERROR_BODY_BYTES: Final = 64 * 1024
#: Redirect hops followed within one attempt.
MAX_REDIRECTS: Final = 5
#: Slots one attempt gives up for waking up later than the limiter's margin; then it goes
#: late (a process that is always late must not stop itself).
MAX_LATE: Final = 2
_REDIRECT_STATUSES: Final = frozenset({301, 302, 303, 307, 308})


def user_agent() -> str:
    """``asyncapi-client/<version> aiohttp/<version> python/<version>``."""
    py = ".".join(map(str, sys.version_info[:3]))
    return f"asyncapi-client/{__version__} aiohttp/{aiohttp.__version__} python/{py}"


#: Ids made only of unreserved characters (RFC 3986) go on the wire as they are.
_UNRESERVED: Final = re.compile(r"[A-Za-z0-9._~-]+").fullmatch


def encode_segment(value: str) -> str:
    """Percent-encode ``value`` as exactly one path segment (``/ ? # %`` and dot segments too)."""
    if _UNRESERVED(value) and value not in (".", ".."):
        return value  # addresses and most ids: nothing to encode
    encoded = quote(value, safe="")
    if encoded in (".", ".."):
        encoded = encoded.replace(".", "%2E")
    return encoded


class _Dropped(aiohttp.ClientConnectionError):
    """A dropped connection, re-raised under a type aiohttp does not resend after."""


async def _no_resend(
    request: aiohttp.ClientRequest, handler: aiohttp.ClientHandlerType
) -> aiohttp.ClientResponse:
    """A middleware for a caller's session: one attempt stays one request."""
    try:
        return await handler(request)
    except (aiohttp.ClientOSError, aiohttp.ServerDisconnectedError) as exc:
        raise _Dropped(str(exc)) from exc


#: Whether the connection of the latest request of this task (context) was reused from
#: the pool (True) or made for it (False); set as the connection is handed out.
_REUSED: Final[contextvars.ContextVar[bool]] = contextvars.ContextVar(
    "asyncapi_client_reused", default=False
)


class _Connector(aiohttp.TCPConnector):
    """Our own session's pool: it says (in :data:`_REUSED`) whether the connection it hands
    out was kept alive from an earlier request or is a new one."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        #: the protocol of every connection handed out (those closed since are pruned)
        self._handed: set[Any] = set()
        self._prune_at = 64

    async def connect(
        self,
        req: aiohttp.ClientRequest,
        traces: list[Any],
        timeout: aiohttp.ClientTimeout,  # noqa: ASYNC109 - aiohttp's signature
    ) -> Any:
        connection = await super().connect(req, traces, timeout)
        protocol, handed = connection.protocol, self._handed
        reused = protocol in handed
        if not reused:
            if len(handed) >= self._prune_at:
                handed = self._handed = {p for p in handed if p.is_connected()}
                self._prune_at = max(64, 2 * len(handed))
            handed.add(protocol)
        if _REUSED.get() is not reused:  # a set() costs more than a get()
            _REUSED.set(reused)
        return connection


async def _on_reused(session: object, context: object, params: object) -> None:
    _REUSED.set(True)


async def _on_created(session: object, context: object, params: object) -> None:
    _REUSED.set(False)


#: The same for a caller's session (whose connector is its own): a trace config added to it.
_REUSE_TRACE: Final = aiohttp.TraceConfig()
_REUSE_TRACE.on_connection_reuseconn.append(_on_reused)
_REUSE_TRACE.on_connection_create_end.append(_on_created)
_REUSE_TRACE.freeze()

#: What a send raises when its connection is lost (a caller's session: as ``_Dropped``).
_DROPS: Final = (aiohttp.ServerDisconnectedError, aiohttp.ClientOSError, _Dropped)
#: The errors of a connection the peer closed or reset under a write or the first read.
_RESETS: Final = frozenset({errno.ECONNRESET, errno.EPIPE, errno.ECONNABORTED})


def _stale(exc: BaseException) -> bool:
    """Whether a failed send was a stale connection: reused from the pool, and lost before
    any byte of the answer came (closed: aiohttp had nothing to parse; or reset).

    The server had closed that idle connection, so it cannot have seen the request (unless
    it read it and closed without a byte of answer: then it sees it twice, as with any
    client that resends on a stale connection). A new connection is never stale: a server
    that drops every connection sees one request per attempt.
    """
    if not _REUSED.get():
        return False
    if isinstance(exc, _Dropped) and exc.__cause__ is not None:
        exc = exc.__cause__
    if isinstance(exc, aiohttp.ServerDisconnectedError):
        return isinstance(exc.message, str)  # not a partly parsed answer
    # reset under the write or the first read; a connection that could not be made at all
    # (ClientConnectorError) has nothing to do with reuse
    return (
        isinstance(exc, aiohttp.ClientOSError)
        and not isinstance(exc, aiohttp.ClientConnectorError)
        and exc.errno in _RESETS
    )


def _same_origin(a: URL, b: URL) -> bool:
    # raw_host: the host as sent (IDNA-encoded), never decoded (a server's "xn--" label
    # that does not decode must not raise here)
    return a.scheme == b.scheme and a.raw_host == b.raw_host and a.port == b.port


def _redirect(current: URL, location: str) -> URL | str:
    """Where a redirect from ``current`` to ``location`` goes, or why it is refused."""
    try:
        target = current.join(URL(location))
        if target.scheme not in ("http", "https"):
            return "not an HTTP URL"
        if _same_origin(current, target):
            return target.with_fragment(None)
        upgrade = current.scheme == "http" and target.scheme == "https"
        if upgrade and current.raw_host == target.raw_host:
            return target.with_fragment(None)  # an upgrade to TLS on the same host
    except ValueError:  # UnicodeError too: a host that does not encode, a port out of range
        return "the Location is not a valid URL"
    if current.scheme == "https" and target.scheme == "http":
        return "it would leave TLS"
    return "another origin"


_NO_URL: Final = URL()


class _NoCookies(aiohttp.CookieJar):
    """A jar that never stores a cookie (the client's own session keeps none), and so keeps
    aiohttp's fast path of an empty jar (``DummyCookieJar`` builds a new one per request)."""

    def update_cookies(self, cookies: Any, response_url: URL = _NO_URL) -> None:
        return None

    def update_cookies_from_headers(self, headers: Sequence[str], response_url: URL) -> None:
        return None


def _with_headers(headers: Mapping[str, str]) -> type[aiohttp.ClientRequest]:
    """A request class that adds ``headers`` (ours and the caller's) as aiohttp adds its own
    defaults (Accept-Encoding kept): as session headers they would be copied into each
    request one by one, about 1 % of a small call's CPU."""
    defaults = CIMultiDict(aiohttp.ClientRequest.DEFAULT_HEADERS)
    defaults.update(headers)  # case-insensitive: the caller's Accept replaces aiohttp's
    return type("_Request", (aiohttp.ClientRequest,), {"DEFAULT_HEADERS": defaults})


class _State(enum.Enum):
    UNOPENED = "unopened"
    OPENED = "opened"
    CLOSED = "closed"


class _Restart:
    """Told to followers when their leader was cancelled: one of them takes over."""


_RESTART: Final = _Restart()
#: Not in flight (``_inflight`` holds None for a request in flight that nobody joined yet).
_ABSENT: Final[Any] = object()


def _translate(exc: BaseException, url: str, network: Network) -> ApiError:
    """The one place aiohttp's (and asyncio's) failures become the library's errors."""
    net = network.value
    if isinstance(exc, _Dropped) and exc.__cause__ is not None:
        exc = exc.__cause__
    if isinstance(exc, TimeoutError):
        return RequestTimeoutError(
            f"the attempt timed out ({type(exc).__name__})", url=url, network=net
        )
    if isinstance(exc, aiohttp.ClientPayloadError):
        return TransportError(f"the response body was cut short: {exc}", url=url, network=net)
    if isinstance(exc, aiohttp.ServerDisconnectedError):
        return TransportError("the server closed the connection", url=url, network=net)
    if isinstance(exc, aiohttp.ClientConnectorCertificateError):
        return mark_final(
            TransportError(
                f"TLS failed, the certificate does not verify: {exc}", url=url, network=net
            )
        )
    if isinstance(exc, aiohttp.ClientSSLError):
        return TransportError(f"TLS failed: {exc}", url=url, network=net)
    if isinstance(exc, aiohttp.ClientConnectorError):
        return TransportError(f"could not connect: {exc}", url=url, network=net)
    if type(exc) is aiohttp.ClientResponseError:  # the parser refused what the server sent
        detail = exc.message or type(exc).__name__
        return mark_final(
            TransportError(f"malformed HTTP response: {detail}", url=url, network=net)
        )
    detail = str(exc) or type(exc).__name__
    return TransportError(f"the request failed: {detail}", url=url, network=net)


_FAILURES: Final = (aiohttp.ClientError, TimeoutError, OSError)


def _unreadable(exc: Exception, url: str, network: Network) -> ApiError:
    """The last resort for an exception none of the above expects while a response is
    read (a codec's, a parser's): an ApiError all the same, and final like a malformed
    response, so that nothing but an ApiError ever leaves a call."""
    detail = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    return mark_final(
        TransportError(f"the response could not be read: {detail}", url=url, network=network.value)
    )


class _Call:
    """The mutable progress of one call: tries and requests made, its start
    (``time.monotonic()``, for ``Response.elapsed``) and deadline (``loop.time()``).

    ``tries`` counts attempts begun (one that failed at the limiter too); ``attempts``
    counts requests sent (``ApiError.attempts``, ``Response.attempts``): an attempt counts
    once it has its connection slot. ``asking``: a question to the limiter is in flight.
    """

    __slots__ = ("asking", "attempts", "expires", "failed", "request", "started", "tries")

    def __init__(self, request: Request[Any], started: float, expires: float | None) -> None:
        self.request = request
        self.started = started
        self.expires = expires
        self.tries = 0
        self.attempts = 0
        self.asking = False
        self.failed: ApiError | None = None  # the last attempt's error


class Transport:
    """Owns (or borrows) the aiohttp session and runs every GET of one Client."""

    def __init__(
        self,
        *,
        hosts: Hosts,
        timeout: float | aiohttp.ClientTimeout,
        retry: RetryPolicy,
        max_connections: int,
        limiter: Limiter,
        deadline: float | None,
        max_response_bytes: int,
        coalesce: bool,
        headers: Mapping[str, str] | None,
        session: aiohttp.ClientSession | None,
        trace_configs: Sequence[aiohttp.TraceConfig] | None,
        on_retry: Callable[[RetryEvent], object] | None = None,
        telemetry: Telemetry | None = None,
        proxy: str | None = None,
        ssl: SSLContext | bool = True,
        trust_env: bool = False,
        cache: CacheBackend | None = None,
    ) -> None:
        self.hosts = hosts
        #: The cache stage (``Client(cache=...)``): the operations its ``ttl`` names go
        #: through it first (asyncapi_client/_cache.py); its middleware sends validators.
        self._cache: CacheStage | None = None
        self._cache_middlewares: tuple[aiohttp.ClientMiddlewareType, ...] = ()
        if cache is not None:
            from ._cache import CacheStage, conditional_middleware

            self._cache = CacheStage(cache, self)
            self._cache_middlewares = (conditional_middleware,)
        self._proxy = proxy
        self._ssl = ssl
        self._trust_env = trust_env
        self._telemetry = telemetry
        self.retry = retry
        #: The policy of testing mode (``Client.set_testing``), read at decision time;
        #: ``retry`` itself is never changed by it.
        self.testing: RetryPolicy | None = None
        self.deadline = deadline
        self._timeout = (
            timeout
            if isinstance(timeout, aiohttp.ClientTimeout)
            else aiohttp.ClientTimeout(total=timeout)
        )
        t = self._timeout
        #: How long one question to the limiter may take: the attempt's timeout.
        self._limiter_timeout: float = t.total or t.connect or t.sock_connect or t.sock_read or 10.0
        self._max_connections = max_connections
        # At most max_connections attempts at once, whether the session is ours or the
        # caller's (whose pool has its own, larger, limit): queued here rather than in
        # aiohttp's pool, so an attempt's timeout never counts the wait for a connection.
        self._slots = asyncio.Semaphore(max_connections)
        self._max_response_bytes = max_response_bytes
        self._coalesce = coalesce
        self.limiter = limiter
        # A limiter's margin (s): a slot reached later than that is given up (None: never).
        margin = getattr(limiter, "margin", None)
        self._margin: float | None = (
            float(margin)
            if isinstance(margin, int | float) and not isinstance(margin, bool) and margin > 0
            else None
        )
        # Does the limiter keep the server's Retry-After with a hold (for its messages)?
        self._hold_keeps_retry_after = _takes_retry_after(limiter.hold)
        # The idle default limiter (no rates, no hold) is not asked before a first attempt.
        self._local = limiter if type(limiter) is LocalLimiter else None
        self._on_retry = on_retry or self._log_retry
        self._random = random.Random()
        # The caller's headers replace ours whatever their case (one User-Agent, not two).
        self._headers = CIMultiDict({"User-Agent": user_agent(), "Accept": "application/json"})
        self._headers.update(headers or {})
        self._trace_configs = list(trace_configs or ())
        # Per request: our headers only when the session is not ours (ours has them built
        # in); the trace context only when a trace config can see it.
        self._request_headers = None if session is None else self._headers
        self._tracing = bool(self._trace_configs) or session is not None
        # A caller's session would resend a request after a dropped connection: our
        # middleware, innermost, stops that (its own middlewares are kept).
        self._middlewares = (
            None
            if session is None
            else (*getattr(session, "_middlewares", ()), *self._cache_middlewares, _no_resend)
        )
        # The keywords of every GET. Our own session already has our headers and timeout
        # and no middlewares: passing them again per request only costs time.
        self._options: dict[str, Any] = {"allow_redirects": False}
        if session is not None:
            self._options.update(
                headers=self._request_headers,
                timeout=self._timeout,
                raise_for_status=False,  # ours runs, whatever the caller's session says
                middlewares=self._middlewares,
            )
        self._session = session
        self._owns_session = session is None
        if session is not None and _REUSE_TRACE not in session.trace_configs:
            # How a stale connection is told from a new one (see _stale): one trace config
            # that only sets a context variable of ours, added once to the caller's session.
            session.trace_configs.append(_REUSE_TRACE)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._state = _State.UNOPENED
        #: Requests in flight: the future their followers wait on, None until one joins.
        self._inflight: dict[Request[Any], asyncio.Future[Any] | None] = {}
        self._bases: dict[Network, str] = {}
        #: Per network: its base as a URL and the text before the base's path (scheme and
        #: authority), so an attempt puts a request's path on it instead of parsing its URL.
        self._origins: dict[Network, tuple[URL, str]] = {}

    # --- lifecycle --------------------------------------------------------------------

    @property
    def closed(self) -> bool:
        return self._state is _State.CLOSED

    def _open(self) -> aiohttp.ClientSession:
        """The session, created lazily inside the running loop on first use."""
        loop = asyncio.get_running_loop()
        if self._state is _State.CLOSED:
            raise RuntimeError("this Client is closed; create a new one")
        if self._loop is None:
            self._loop = loop
        elif self._loop is not loop:
            raise RuntimeError("a Client belongs to the event loop it was first used in")
        if self._session is None:
            self._session = aiohttp.ClientSession(
                connector=_Connector(limit=self._max_connections, limit_per_host=0, ssl=self._ssl),
                request_class=_with_headers(self._headers),
                proxy=self._proxy,
                trust_env=self._trust_env,
                timeout=self._timeout,
                trace_configs=self._trace_configs or None,
                cookie_jar=_NoCookies(),
                middlewares=self._cache_middlewares,
            )
            # One attempt, one request: no resend after a dropped connection (aiohttp's
            # own test client turns it off the same way; tests count requests to prove it).
            self._session._retry_connection = False
        self._state = _State.OPENED
        return self._session

    async def close(self) -> None:
        """Close the session if we own it; a caller's session is left open. Idempotent.

        The limiter is never closed: several clients may share it.
        """
        if self._state is _State.CLOSED:
            return
        self._state = _State.CLOSED
        session, self._session = self._session, None
        if session is not None and self._owns_session:
            await session.close()

    # --- requests ---------------------------------------------------------------------

    def request(
        self,
        operation: str,
        network: Network,
        template: str,
        path: str,
        query: str,
        decode: Callable[[bytes], T],
        deadline: float | None,
    ) -> Request[T]:
        """The one Request of a call: ``/api`` + ``path`` (+ ``?query``) on ``network``'s host."""
        base = self._bases.get(network)
        if base is None:
            base = self._bases[network] = str(URL(self.hosts.base(network))).rstrip("/") + "/api"
            origin = URL(base, encoded=True)
            prefix = base[: len(base) - len(origin.raw_path)]
            if prefix + origin.raw_path == base and _parsed(prefix + "/x?y") == _built(
                origin, prefix, prefix + "/x?y"
            ):
                self._origins[network] = (origin, prefix)
        url = f"{base}{path}?{query}" if query else base + path
        # tuple.__new__: the named tuple's own __new__ is Python code, this is the hot path
        return tuple.__new__(Request, (operation, network, url, template, decode, deadline))

    def get(self, request: Request[T]) -> Coroutine[Any, Any, T]:
        """Run ``request`` and return its decoded value.

        A plain method returning the coroutine of :meth:`_send`: no coroutine of its own.
        """
        if self._cache is not None and request.operation in self._cache.ttl:
            return self._cache.value(request)
        if self._telemetry is None:
            return self._send(request, True)
        return self._traced_value(request)

    async def _traced_value(self, request: Request[T]) -> T:
        assert self._telemetry is not None
        return (await self._telemetry.call(request, self._send))[0]

    async def send(self, request: Request[T]) -> Response[T]:
        """Run ``request`` and return the whole :class:`Response`."""
        if self._cache is not None and request.operation in self._cache.ttl:
            return Response(*await self._cache.outcome(request))
        if self._telemetry is None:
            return Response(*await self._send(request))
        return Response(*await self._telemetry.call(request, self._send))

    @overload
    async def _send(self, request: Request[T], value: Literal[False] = False) -> Outcome[T]: ...

    @overload
    async def _send(self, request: Request[T], value: Literal[True]) -> T: ...

    async def _send(self, request: Request[T], value: bool = False) -> Any:
        """Run ``request``: coalesced, under its deadline, with retries. Returns its
        Outcome, or only the decoded value when ``value`` (what ``get`` wants).

        The common call (no deadline, the idle default limiter) makes its first attempt
        from here: one coroutine between the operation and the request.
        """
        loop = asyncio.get_running_loop()
        if self._state is not _State.OPENED or loop is not self._loop:
            self._open()  # opens lazily, or says why not (closed, another loop)
        leader = self._coalesce
        if leader:
            inflight = self._inflight
            shared = inflight.get(request, _ABSENT)
            if shared is not _ABSENT:
                if shared is None:  # the first follower: the leader hands its outcome here
                    shared = inflight[request] = loop.create_future()
                result = await self._follow(request, shared)
                return result[0] if value else result
            # The leader runs the request itself (no task); a future for the outcome is
            # made only when a follower comes.
            inflight[request] = None
        try:
            local = self._local
            if request.deadline is not None or local is None or not local.idle:
                result = await self._run(request, loop)
            else:
                # Nothing to wait for and nothing to ask: the first attempt goes straight out
                # (the call's progress is kept only once it needs a retry).
                started = time.monotonic()
                try:
                    result = await self._attempt(request, 1, started)
                    failed = None
                except ApiError as exc:
                    failed = exc  # handled outside this block: it is no later error's __context__
                if failed is not None:
                    call = _Call(request, started, None)
                    call.tries = call.attempts = 1
                    await self._after_failure(call, failed)
                    result = await self._attempts(call, failed)
        except BaseException as exc:
            if leader:
                shared = self._inflight.pop(request)
                if shared is not None and not shared.done():
                    if isinstance(exc, asyncio.CancelledError):
                        shared.set_result(_RESTART)  # followers go on without the leader
                    else:
                        shared.set_exception(exc)
                        shared.exception()  # retrieved: no "never retrieved" warning alone
            raise
        if leader:
            shared = self._inflight.pop(request)
            if shared is not None and not shared.done():
                shared.set_result(result)
        return result[0] if value else result

    async def _follow(self, request: Request[T], shared: asyncio.Future[Any]) -> Outcome[T]:
        """Wait for the leader's outcome; if the leader was cancelled, send again: lead, or
        join whichever follower took over first.

        ``shield``: cancelling one follower must not cancel the shared outcome.
        """
        result = await asyncio.shield(shared)
        if result is _RESTART:
            return await self._send(request)
        return result  # type: ignore[no-any-return]

    async def _run(self, request: Request[T], loop: asyncio.AbstractEventLoop) -> Outcome[T]:
        """Every attempt of ``request`` asked of the limiter first, under its deadline."""
        started = time.monotonic()
        deadline = request.deadline
        if deadline is None:
            return await self._attempts(_Call(request, started, None), None)
        call = _Call(request, started, loop.time() + deadline)
        scope = asyncio.timeout_at(call.expires)
        try:
            async with scope:
                return await self._attempts(call, None)
        except TimeoutError as exc:
            if not scope.expired():
                raise
            error = RequestTimeoutError(
                f"the operation ran past its deadline of {deadline:g}s"
                + self._limiter_trouble(call),
                url=request.url,
                network=request.network.value,
            )
            error.attempts = call.attempts
            raise error from call.failed or exc  # the story so far; the timeout is __context__

    # --- the retry loop -----------------------------------------------------------------

    async def _attempts(self, call: _Call, failed: ApiError | None) -> Outcome[T]:
        """Attempts until one succeeds or the error is final (a flat loop); ``failed``:
        the error of the attempt just made, whose retry is decided and waited for."""
        local = self._local
        while True:
            call.tries += 1
            try:
                if failed is not None or local is None or not local.idle:
                    await self._admit(call, failed)
                return await self._attempt(call.request, call.attempts + 1, call.started, call)
            except ApiError as exc:
                if failed is not None and exc is not failed and exc.__cause__ is not failed:
                    exc.__cause__ = failed  # the story of the call, attempt by attempt
                failed = exc
                if getattr(exc, "_asyncapi_admission", False):
                    raise  # the limiter said no for good (hold past the cap, the deadline)
            await self._after_failure(call, failed)

    async def _after_failure(self, call: _Call, failed: ApiError) -> None:
        """Act on the decision after ``failed``: raise it, or hold, tell and wait."""
        request = call.request
        policy = self.testing or self.retry
        decision: Decision = decide(policy, failed, call.tries - 1, self._random)
        why = decision.why
        asked = decision.hold
        if asked is not None:
            # A hold lasts at most retry_after_cap; the limiter keeps what the server sent.
            hold = min(asked, policy.retry_after_cap)
            place: Callable[..., Awaitable[None]] = self.limiter.hold
            placing = (
                place(request.network, hold, retry_after=_retry_after_text(failed))
                if self._hold_keeps_retry_after
                else place(request.network, hold)
            )
            try:
                await self._ask(call, placing, failed)
            except LimiterError as exc:
                if decision.retry:  # the hold could not be placed: that is the error now
                    failed = exc
                    decision = decide(policy, failed, call.tries - 1, self._random)
                    why = decision.why
                else:  # raised anyway: the server's answer stays the error
                    log.warning("the 429 hold could not be placed: %s", exc.message)
            else:
                if why and hold < asked:
                    why = f"{why}; requests to this network are held for {hold:g}s"
        failed.attempts = call.attempts
        call.failed = failed
        if not decision.retry:
            if why:
                failed.message = f"{failed.message}; {why}"
            raise failed
        wait = decision.wait
        if call.expires is not None and asyncio.get_running_loop().time() + wait >= call.expires:
            error = RequestTimeoutError(
                f"the deadline would pass during the {wait:.3g}s wait before the next "
                f"attempt{self._limiter_trouble(call)}",
                url=request.url,
                network=request.network.value,
            )
            error.attempts = call.attempts
            raise error from failed
        event = RetryEvent(
            operation=request.operation,
            network=request.network,
            url=request.url,
            attempt=call.tries,
            wait=wait,
            error=failed,
        )
        if self._telemetry is not None:
            self._telemetry.retry(event)
        try:
            self._on_retry(event)
        except Exception:
            log.warning("on_retry raised; ignored", exc_info=True)
        if wait > 0:
            await asyncio.sleep(wait)

    def _log_retry(self, event: RetryEvent) -> None:
        """The default ``on_retry``: one INFO line per retry (never a header value)."""
        error = event.error
        reason = (
            f"HTTP {error.status}"
            if isinstance(error, StatusError)
            else f"{type(error).__name__}: {error.message}"
        )
        log.info(
            "retrying GET %s [%s] after %s (attempt %d of %d) in %.3fs",
            event.url,
            event.network.value,
            reason,
            event.attempt,
            (self.testing or self.retry).max_retries + 1,
            event.wait,
        )

    # --- the limiter --------------------------------------------------------------------

    async def _admit(self, call: _Call, failed: ApiError | None) -> None:
        """Wait until the limiter lets the next attempt go (its rates, the 429 hold).

        After a wait, a 429 hold that appeared meanwhile forfeits the slot: ask again, so
        nothing is sent inside a hold nor in a burst when it ends. Inside a hold the limiter
        reserves nothing (``reserved`` False): ask again when it ends, or every
        :data:`HOLD_RECHECK` s, so a hold ended early (``clear_hold()``) lets the call go.
        A slot this process wakes up for more than the limiter's ``margin`` late (it was not
        scheduled in time) is given up too, at most :data:`MAX_LATE` times a call: sent that
        late, it could land among the next window's requests.
        """
        request = call.request
        limiter = self.limiter
        loop = asyncio.get_running_loop()
        cap = (self.testing or self.retry).retry_after_cap
        margin = self._margin
        late = 0  # slots given up for lateness
        while True:
            admission: Admission = await self._ask(
                call, limiter.acquire(request.operation, request.network), failed
            )
            answered = loop.time()
            held = admission.held
            if held > cap:
                error: ApiError = RateLimitError(
                    f"HTTP 429 earlier: {_hold_text(admission)} runs {held:.3g}s more on this "
                    f"network, longer than retry_after_cap={cap:g}s",
                    status=429,
                    url=request.url,
                    network=request.network.value,
                    retry_after=held,
                )
                raise _refused(error, call, failed)
            wait = admission.wait
            if wait <= 0:
                return
            if call.expires is not None and loop.time() + wait >= call.expires:
                what = _hold_text(admission) if held > 0 else "the limiter's rate limit"
                error = RequestTimeoutError(
                    f"the deadline would pass during the {wait:.3g}s wait for {what}",
                    url=request.url,
                    network=request.network.value,
                )
                raise _refused(error, call, failed)
            if not admission.reserved:
                await asyncio.sleep(min(wait, HOLD_RECHECK))
                continue
            await asyncio.sleep(wait)
            held = await self._ask(call, limiter.held(request.network), failed)
            if held > 0:
                continue
            if margin is None or loop.time() - (answered + wait) <= margin or late == MAX_LATE:
                return
            late += 1

    async def _ask(self, call: _Call, question: Awaitable[T], failed: ApiError | None) -> T:
        """One call to the limiter, bounded by the attempt's timeout; any failure of it
        becomes a LimiterError naming it (retried like a connection failure)."""
        request = call.request
        limiter = self.limiter
        call.asking = True  # left True by a cancel (the deadline): its message says so
        try:
            async with asyncio.timeout(self._limiter_timeout) as scope:
                answer = await question
        except LimiterError as exc:
            call.asking = False
            exc.url, exc.network = request.url, request.network.value
            raise
        except Exception as exc:
            call.asking = False
            if isinstance(exc, TimeoutError) and scope.expired():
                why = f"did not answer within {self._limiter_timeout:g}s"
            else:
                why = f"failed: {type(exc).__name__}: {exc}"
            raise LimiterError(
                f"the limiter {limiter!r} {why}",
                limiter=repr(limiter),
                url=request.url,
                network=request.network.value,
            ) from exc
        call.asking = False
        return answer

    def _limiter_trouble(self, call: _Call) -> str:
        """What a deadline's message adds when the limiter is why: the question in flight,
        and the text of the limiter's last failure (not only in ``__cause__``)."""
        said = f", waiting for the limiter {self.limiter!r} to answer" if call.asking else ""
        failed = call.failed
        if isinstance(failed, LimiterError):
            who = "" if failed.limiter in failed.message else f" {failed.limiter}"
            said += f"; the limiter{who} could not be reached: {failed.message}"
        return said

    # --- one attempt ----------------------------------------------------------------------

    async def _attempt(
        self, request: Request[T], attempt: int, started: float, call: _Call | None = None
    ) -> Outcome[T]:
        """Attempt number ``attempt`` of ``request``, a call that began at ``started``;
        counted in ``call.attempts`` once it has a connection slot (then it is sent)."""
        url, network = request.url, request.network
        session = self._session if self._session is not None else self._open()
        if log.isEnabledFor(logging.DEBUG):
            log.debug("GET %s [%s] %s attempt %d", url, network.value, request.operation, attempt)
        slots = self._slots
        # Semaphore.acquire() without its coroutine when a slot is free and nobody queues
        # (what acquire() itself checks first): the common case costs no await.
        if slots._value > 0 and not slots._waiters:
            slots._value -= 1
        else:
            await slots.acquire()
        if call is not None:
            call.attempts = attempt
        target = self._target(url, network)
        hops = 0
        resent = False
        try:
            while True:
                try:
                    if self._tracing:
                        response = await session.get(
                            target,
                            **self._options,
                            trace_request_ctx={
                                "operation": request.operation,
                                "network": network.value,
                                "attempt": attempt,
                            },
                        )
                    else:
                        # Our own session, no trace config: its request coroutine itself,
                        # awaited directly. get() wraps it in a context manager whose
                        # __await__ hands back a wrapper the interpreter resumes through a
                        # method call each time (measured: 3-4 % of a pool() call's CPU at
                        # concurrency 64).
                        response = await session._request("GET", target, allow_redirects=False)
                except _DROPS as exc:
                    if resent or not _stale(exc):
                        raise
                    resent = True  # once: the pool hands out a live or a new connection now
                    log.debug(
                        "GET %s [%s]: a stale kept-alive connection; sent again", url, network.value
                    )
                    continue
                status = response.status
                if status not in _REDIRECT_STATUSES or "Location" not in response.headers:
                    break
                response.release()
                location = response.headers["Location"]
                follow = _redirect(target, location)
                if isinstance(follow, str) or hops == MAX_REDIRECTS:
                    why = (
                        follow
                        if isinstance(follow, str)
                        else f"too many redirects ({hops} followed)"
                    )
                    raise mark_final(
                        StatusError(
                            f"HTTP {status}: the redirect to {location!r} was refused: {why}",
                            status=status,
                            url=url,
                            headers=response.headers,
                            network=network.value,
                        )
                    )
                target, hops = follow, hops + 1
            try:
                if status >= 300 or status < 200:
                    text = await _read_preview(response)
                    raise status_error(
                        status, url=url, body=text, headers=response.headers, network=network.value
                    )
                # A Content-Length bounds the body, unless it is compressed (it grows). Read
                # from the headers (aiohttp's parser checked it is digits): its property is
                # Python code that does the same.
                headers = response.headers
                length: int | None = None
                if "Content-Encoding" not in headers:
                    announced = headers.get("Content-Length")
                    length = None if announced is None else int(announced)
                if length is not None and length <= self._max_response_bytes:
                    body = await response.read()
                else:
                    body = await self._read_capped(response, length, url, network)
            finally:  # what ``async with response`` does, without its two coroutines
                response.release()
                await response.wait_for_close()
        except _FAILURES as exc:
            raise _translate(exc, url, network) from exc
        except ApiError:
            raise
        except Exception as exc:  # what else a server's bytes make aiohttp (or us) raise
            raise _unreadable(exc, url, network) from exc
        finally:
            # Semaphore.release() without its two calls when nobody waits for a slot.
            slots._value += 1
            if slots._waiters:
                slots._wake_up_next()
        try:
            value = request.decode(body)
        except DecodeError as exc:
            exc.url, exc.network = url, network.value
            raise
        return (
            value,
            status,
            response.headers,
            body,
            url if hops == 0 else str(target),
            network,
            attempt,
            time.monotonic() - started,
        )

    def _target(self, url: str, network: Network) -> URL:
        """The URL object of a request's ``url``, built from its network's base."""
        found = self._origins.get(network)
        return _parsed(url) if found is None else _built(found[0], found[1], url)

    async def _read_capped(
        self, response: aiohttp.ClientResponse, length: int | None, url: str, network: Network
    ) -> bytes:
        """A body not known to fit: refused at once when ``length`` (its Content-Length)
        is over ``max_response_bytes``, else read until it ends or passes the cap."""
        cap = self._max_response_bytes
        if length is not None:
            raise _too_large(cap, url, network, f"it announces {length} bytes")
        body = bytearray()
        async for chunk in response.content.iter_any():
            body += chunk
            if len(body) > cap:
                raise _too_large(cap, url, network, "it kept growing")
        return bytes(body)


def _parsed(url: str) -> URL:
    """``url`` parsed by yarl, as it is (already percent-encoded)."""
    return URL(url, encoded=True)


def _built(origin: URL, prefix: str, url: str) -> URL:
    """``url`` as a URL object without parsing it: its path (and query) on ``origin``, the
    base it was made from; the same URL as :func:`_parsed` makes, at a third of its cost.
    A ``url`` that does not start with ``prefix`` (origin's scheme and authority) is parsed.
    """
    if not url.startswith(prefix):
        return _parsed(url)
    path, mark, query = url[len(prefix) :].partition("?")
    if not mark:
        return origin.with_path(path, encoded=True)
    return URL.build(
        scheme=origin.scheme,
        authority=origin.raw_authority,
        path=path,
        query_string=query,
        encoded=True,
    )


def _takes_retry_after(hold: Callable[..., object]) -> bool:
    """True when a limiter's ``hold`` takes ``retry_after=`` (ours do; one written before
    it existed may not, and is called as before)."""
    try:
        parameters = inspect.signature(hold).parameters.values()
    except (TypeError, ValueError):
        return False
    return any(
        p.kind is p.VAR_KEYWORD or (p.name == "retry_after" and p.kind is not p.POSITIONAL_ONLY)
        for p in parameters
    )


def _retry_after_text(error: ApiError) -> str | None:
    """The ``Retry-After`` a 429 came with, as the server sent it."""
    return error.headers.get("Retry-After") if isinstance(error, StatusError) else None


def _hold_text(admission: Admission) -> str:
    """The hold, and the wait the server asked for as it sent it, for messages."""
    sent = admission.retry_after
    return f"a 429 hold (the server sent Retry-After: {sent})" if sent else "a 429 hold"


def _refused(error: ApiError, call: _Call, failed: ApiError | None) -> ApiError:
    """An error of the limiter's answer (a hold past the cap, the deadline): final."""
    error.attempts = call.attempts
    error.__cause__ = failed
    error._asyncapi_admission = True  # type: ignore[attr-defined]
    return error


def _too_large(cap: int, url: str, network: Network, why: str) -> ResponseTooLargeError:
    return ResponseTooLargeError(
        f"the response is larger than max_response_bytes={cap} ({why}); "
        f"pass a larger max_response_bytes= to Client to accept it",
        limit=cap,
        url=url,
        network=network.value,
    )


async def _read_preview(response: aiohttp.ClientResponse) -> str:
    """Up to 64 KiB of an error body, as text; a longer body is left unread."""
    raw = bytearray()
    while len(raw) < _ERROR_BODY_BYTES:
        chunk = await response.content.read(_ERROR_BODY_BYTES - len(raw))
        if not chunk:
            break
        raw += chunk
    return _text(raw, response.charset)


#: Codecs Python knows that are no charset of a body: they refuse ``errors="replace"``,
#: always fail, or read escapes (``\\x41``) the server wrote as text.
_NOT_CHARSETS: Final = frozenset(
    {"idna", "punycode", "undefined", "unicode-escape", "raw-unicode-escape"}
)


def _text(raw: bytes | bytearray, charset: str | None) -> str:
    """An error body as text, never an exception: in its declared charset when that is a
    text encoding Python knows, else as UTF-8; bytes that do not decode become U+FFFD."""
    if charset:
        try:
            if codecs.lookup(charset).name not in _NOT_CHARSETS:
                return raw.decode(charset, errors="replace")
        except Exception:  # unknown, not a text encoding, a NUL in the name, a codec's bug
            pass
    return raw.decode("utf-8", errors="replace")
