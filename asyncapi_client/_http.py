"""The HTTP adapter: the only module on the request path that imports aiohttp.

:class:`AiohttpSender` owns (or borrows) the aiohttp session and makes one attempt per
:meth:`~AiohttpSender.send` (the pipeline has given it its connection slot): it sends one
GET, follows redirects, reads the body under ``max_response_bytes`` and hands back a
:class:`Reply`; whatever aiohttp raises becomes one of the library's errors in
:func:`_translate`, the one place. The pipeline (asyncapi_client/_pipeline.py) sees only the
:class:`~._request.Sender` protocol, so a test can plug in a sender of its own. The private
shortcuts it uses are decided in asyncapi_client/_fastpaths.py.

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
import errno
import logging
import sys
from collections.abc import Awaitable, Mapping, Sequence
from ssl import SSLContext
from typing import Any, Final, NoReturn

import aiohttp
from multidict import CIMultiDict
from yarl import URL

from . import _fastpaths
from ._errors import (
    ApiError,
    RequestTimeoutError,
    ResponseTooLargeError,
    StatusError,
    TransportError,
    status_error,
)
from ._network import Network
from ._request import Reply, Request
from ._retry import mark_final
from ._timeouts import AttemptTimer
from ._version import __version__

__all__ = ["CALLER_MIDDLEWARES", "MAX_REDIRECTS", "SHORTCUTS", "AiohttpSender", "user_agent"]

log: Final = logging.getLogger("asyncapi_client")

#: The private shortcuts verified on this aiohttp (asyncapi_client/_fastpaths.py decides, and
#: says what each is worth); each False is its public twin.
SHORTCUTS: Final = _fastpaths.aiohttp_shortcuts(aiohttp)
#: Whether a caller's session gets our middleware beside its own (see AiohttpShortcuts).
CALLER_MIDDLEWARES: Final = SHORTCUTS.caller_middlewares

#: How much of an error body is read to show in StatusError.body.
_ERROR_BODY_BYTES: Final = 64 * 1024
#: Redirect hops followed within one attempt.
MAX_REDIRECTS: Final = 5
_REDIRECT_STATUSES: Final = frozenset({301, 302, 303, 307, 308})
#: URL objects kept for their next request: at most this many, of urls at most this long.
_KEPT_URLS: Final = 512
_KEPT_URL_LENGTH: Final = 512


def user_agent() -> str:
    """``asyncapi-client/<version> aiohttp/<version> python/<version>``."""
    py = ".".join(map(str, sys.version_info[:3]))
    return f"asyncapi-client/{__version__} aiohttp/{aiohttp.__version__} python/{py}"


class _Dropped(aiohttp.ClientConnectionError):
    """A dropped connection, re-raised under a type aiohttp does not resend after."""


async def _no_resend(
    request: aiohttp.ClientRequest, handler: aiohttp.ClientHandlerType
) -> aiohttp.ClientResponse:
    """The innermost middleware of every session (ours, and a caller's per request): one
    attempt stays one request, as aiohttp resends an idempotent request after a dropped
    connection, but not after one raised as another type."""
    try:
        return await handler(request)
    except (aiohttp.ClientConnectorError, aiohttp.ConnectionTimeoutError):
        raise  # a connection never made: aiohttp does not resend after these
    except (aiohttp.ClientOSError, aiohttp.ServerDisconnectedError) as exc:
        raise _Dropped(str(exc)) from exc


#: Whether the connection of the latest request of this task (context) was reused from
#: the pool (True) or made for it (False); set as the connection is handed out.
_REUSED: Final[contextvars.ContextVar[bool]] = contextvars.ContextVar(
    "asyncapi_client_reused", default=False
)


#: Set while a request is sent again after a stale connection: our own session's pool then
#: hands out a new connection, never another kept-alive one (they idled as long).
_FRESH: Final[contextvars.ContextVar[bool]] = contextvars.ContextVar(
    "asyncapi_client_fresh", default=False
)


class _Connector(aiohttp.TCPConnector):
    """Our own session's pool: it says (in :data:`_REUSED`) whether the connection it hands
    out was kept alive from an earlier request or is a new one, and hands out only a new
    one while :data:`_FRESH` is set (the kept-alive ones it skips are closed)."""

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
        while reused and _FRESH.get():
            connection.close()  # kept alive as long as the stale one: not used, not kept
            connection = await super().connect(req, traces, timeout)
            protocol = connection.protocol
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


def _with_headers(headers: Mapping[str, str]) -> type[aiohttp.ClientRequest]:
    """A request class that adds ``headers`` (ours and the caller's) as aiohttp adds its own
    defaults (Accept-Encoding kept; the caller's Accept replaces aiohttp's)."""
    defaults = CIMultiDict(aiohttp.ClientRequest.DEFAULT_HEADERS)
    defaults.update(headers)
    return type("_Request", (aiohttp.ClientRequest,), {"DEFAULT_HEADERS": defaults})


class _NoCookies(aiohttp.CookieJar):
    """A jar that never stores a cookie (the client's own session keeps none), and so keeps
    aiohttp's fast path of an empty jar (``DummyCookieJar`` builds a new one per request)."""

    def update_cookies(self, cookies: Any, response_url: URL = _NO_URL) -> None:
        return None

    def update_cookies_from_headers(self, headers: Sequence[str], response_url: URL) -> None:
        return None


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


class AiohttpSender:
    """The HTTP adapter: owns (or borrows) the aiohttp session and makes one attempt per
    :meth:`send`; every aiohttp failure leaves it as one of the library's errors."""

    def __init__(
        self,
        *,
        timeout: float | aiohttp.ClientTimeout,
        max_connections: int,
        max_response_bytes: int,
        headers: Mapping[str, str] | None,
        session: aiohttp.ClientSession | None,
        trace_configs: Sequence[aiohttp.TraceConfig] | None,
        proxy: str | None = None,
        ssl: SSLContext | bool = True,
        trust_env: bool = False,
    ) -> None:
        self._proxy = proxy
        self._ssl = ssl
        self._trust_env = trust_env
        #: Requests sent again after stale connections, per attempt: one on our own session
        #: (its pool then hands out a new connection); on a caller's, while they are stale.
        self._resends = 1 if session is None else max_connections
        self._timeout = (
            timeout
            if isinstance(timeout, aiohttp.ClientTimeout)
            else aiohttp.ClientTimeout(total=timeout)
        )
        t = self._timeout
        #: How long one question to the limiter (or the cache) may take: the attempt's timeout.
        self.attempt_timeout: float = t.total or t.connect or t.sock_connect or t.sock_read or 10.0
        #: The ``total`` of the timeout bounds each whole attempt (redirects and a stale
        #: connection's resend included) on one timer for all attempts, not aiohttp's timer
        #: per request (see asyncapi_client/_timeouts.py); aiohttp keeps the other bounds.
        self._timer: AttemptTimer | None = None
        if t.total:
            self._timer = AttemptTimer(t.total)
            self._timeout = aiohttp.ClientTimeout(
                total=None,
                connect=t.connect,
                sock_read=t.sock_read,
                sock_connect=t.sock_connect,
                ceil_threshold=t.ceil_threshold,
            )
        self._max_connections = max_connections
        self._max_response_bytes = max_response_bytes
        # The caller's headers replace ours whatever their case (one User-Agent, not two).
        self._headers = CIMultiDict({"User-Agent": user_agent(), "Accept": "application/json"})
        self._headers.update(headers or {})
        self._trace_configs = list(trace_configs or ())
        # The trace context only when a trace config can see it.
        self._tracing = bool(self._trace_configs) or session is not None
        # A caller's session would resend a request after a dropped connection: our
        # middleware, innermost, stops that (its own middlewares are kept).
        self._middlewares = (
            (*_fastpaths.middlewares_of(session), _no_resend)
            if session is not None and CALLER_MIDDLEWARES
            else None  # ours need none; a caller's own are kept: aiohttp may resend after a drop
        )
        # The keywords of every GET. Our own session already has our headers and timeout
        # and no middlewares: passing them again per request only costs time.
        self._options: dict[str, Any] = {"allow_redirects": False}
        if session is not None:
            self._options.update(
                headers=self._headers,
                timeout=self._timeout,
                raise_for_status=False,  # ours runs, whatever the caller's session says
                middlewares=self._middlewares,
            )
        self.session = session
        self._owns_session = session is None
        if session is not None and _REUSE_TRACE not in session.trace_configs:
            # How a stale connection is told from a new one (see _stale): one trace config
            # that only sets a context variable of ours, added once to the caller's session.
            session.trace_configs.append(_REUSE_TRACE)
        #: Per network: its base as a URL and the text before the base's path (scheme and
        #: authority), so an attempt puts a request's path on it instead of parsing its URL.
        self._origins: dict[Network, tuple[URL, str] | None] = {}
        #: The URL objects of the latest query-less urls (see :meth:`_target`).
        self._targets: dict[str, URL] = {}

    def open(self) -> aiohttp.ClientSession:
        """The session, created on first use (inside the running loop)."""
        if self.session is None:
            headers: dict[str, Any] = (
                {"request_class": _with_headers(self._headers)}
                if SHORTCUTS.default_headers_class
                else {"headers": self._headers}
            )
            # One attempt, one request: no resend after a dropped connection (tests count
            # requests to prove it).
            no_resend = () if SHORTCUTS.no_retry_attribute else (_no_resend,)
            session = aiohttp.ClientSession(
                connector=_Connector(limit=self._max_connections, limit_per_host=0, ssl=self._ssl),
                proxy=self._proxy,
                trust_env=self._trust_env,
                timeout=self._timeout,
                trace_configs=self._trace_configs or None,
                cookie_jar=_NoCookies(),
                middlewares=no_resend,
                **headers,
            )
            if SHORTCUTS.no_retry_attribute:
                _fastpaths.turn_off_resend(session)
            self.session = session
        return self.session

    def unclosed(self) -> bool:
        """Whether this sender's own session is open (a caller's session is the caller's)."""
        session = self.session
        return session is not None and self._owns_session and not session.closed

    async def close(self) -> None:
        """Close the session if it is ours; a caller's session is left open."""
        if self._timer is not None:
            self._timer.close()
        session, self.session = self.session, None
        if session is not None and self._owns_session:
            await session.close()

    async def send(
        self, request: Request[Any], attempt: int, conditional: Mapping[str, str] | None = None
    ) -> Reply:
        """Attempt number ``attempt`` of ``request`` (with the extra headers ``conditional``):
        one GET (sent again once on a new connection after a stale kept-alive one, same-origin
        redirects followed), its body read under the cap; any failure as our error."""
        url, network = request.url, request.network
        session = self.session if self.session is not None else self.open()
        if log.isEnabledFor(logging.DEBUG):
            log.debug("GET %s [%s] %s attempt %d", url, network.value, request.operation, attempt)
        target = self._targets.get(url)
        if target is None:
            target = self._target(url, network)
        timer = self._timer
        timed = None if timer is None else timer.start()
        try:
            try:
                response: aiohttp.ClientResponse | None = await self._request(
                    session, request, target, attempt, conditional
                )
            except _DROPS as exc:
                if not _stale(exc):
                    raise
                response = None  # sent on a stale kept-alive connection: sent again below
            hops = 0
            if response is None or (
                response.status in _REDIRECT_STATUSES and "Location" in response.headers
            ):
                response, target, hops = await self._answer(
                    session, request, target, attempt, conditional, response
                )
            body = await self._body(response, url, network, conditional is not None)
        except _FAILURES as exc:
            # the cause is aiohttp's own error, not the _Dropped our middleware wraps it in
            dropped = isinstance(exc, _Dropped) and exc.__cause__ is not None
            raise _translate(exc, url, network) from (exc.__cause__ if dropped else exc)
        except ApiError:
            raise
        except Exception as exc:  # what else a server's bytes make aiohttp (or us) raise
            raise _unreadable(exc, url, network) from exc
        except asyncio.CancelledError as exc:  # the attempt's timer cancels its task
            if timer is None or timed is None or not timer.expired(timed):
                raise
            _timed_out(exc, url, network)
        finally:
            if timer is not None and timed is not None:
                timer.end(timed)
        # tuple.__new__: the named tuple's own __new__ is Python code, this is the hot path
        return tuple.__new__(
            Reply, (response.status, response.headers, body, url if hops == 0 else str(target))
        )

    async def _answer(
        self,
        session: aiohttp.ClientSession,
        request: Request[Any],
        target: URL,
        attempt: int,
        conditional: Mapping[str, str] | None,
        first: aiohttp.ClientResponse | None,
    ) -> tuple[aiohttp.ClientResponse, URL, int]:
        """After a ``first`` answer that redirects, or none (None: the request was lost on a
        stale kept-alive connection): the final answer, with where it came from and the hops
        it took. Same-origin redirects are followed (at most :data:`MAX_REDIRECTS`); a
        request lost on a stale connection is sent again on a new one (our own session), or
        on the next one while they are stale (a caller's session, whose pool we do not
        choose from: at most ``max_connections`` times)."""
        hops, resent, response = 0, 0, first
        while True:
            if response is None:  # lost on a stale connection
                resent += 1
                log.debug(
                    "GET %s [%s]: a stale kept-alive connection; sent again",
                    request.url,
                    request.network.value,
                )
            elif response.status in _REDIRECT_STATUSES and "Location" in response.headers:
                response.release()
                target = _follow(request, response, target, hops)
                hops += 1
            else:
                return response, target, hops
            fresh = None if resent == 0 else _FRESH.set(True)
            try:
                response = await self._request(session, request, target, attempt, conditional)
            except _DROPS as exc:
                if not _stale(exc) or resent >= self._resends:
                    raise
                response = None
            finally:
                if fresh is not None:
                    _FRESH.reset(fresh)

    def _request(
        self,
        session: aiohttp.ClientSession,
        request: Request[Any],
        target: URL,
        attempt: int,
        conditional: Mapping[str, str] | None,
    ) -> Awaitable[aiohttp.ClientResponse]:
        """The GET itself: the plain case awaits the session's request coroutine directly
        (see ``direct_request`` in asyncapi_client/_fastpaths.py); trace configs get a trace
        context; the cache's validators go with this request only."""
        if not self._tracing and conditional is None:
            if SHORTCUTS.direct_request:
                return _fastpaths.direct_get(session, target)  # type: ignore[no-any-return]
            return session.get(target, allow_redirects=False)
        options = self._options
        if conditional is not None:
            headers: CIMultiDict[str] = CIMultiDict(self._headers if not self._owns_session else ())
            headers.update(conditional)
            options = {**options, "headers": headers}
        if self._tracing:
            context = {
                "operation": request.operation,
                "network": request.network.value,
                "attempt": attempt,
            }
            return session.get(target, **options, trace_request_ctx=context)
        return session.get(target, **options)

    async def _body(
        self, response: aiohttp.ClientResponse, url: str, network: Network, conditional: bool
    ) -> bytes:
        """The body of a 2xx answer, read under ``max_response_bytes`` (a 304 to a
        ``conditional`` request: no body); any other status raised as its StatusError (with
        up to 64 KiB of its body). The response is released."""
        try:
            status = response.status
            if status == 304 and conditional:
                return b""  # "not modified": what the caller holds still holds
            if status >= 300 or status < 200:
                text = await _read_preview(response)
                raise status_error(
                    status, url=url, body=text, headers=response.headers, network=network.value
                )
            # A Content-Length bounds the body, unless it is compressed (it grows). Read from
            # the headers (aiohttp's parser checked it is digits): its property is Python code
            # that does the same.
            headers = response.headers
            announced = headers.get("Content-Length")
            if announced is None or "Content-Encoding" in headers:
                return await self._read_capped(response, None, url, network)
            if int(announced) <= self._max_response_bytes:
                return await response.read()
            return await self._read_capped(response, int(announced), url, network)
        finally:  # what ``async with response`` does, without its two coroutines
            response.release()
            await response.wait_for_close()

    def sent_header(self, name: str) -> str | None:
        """What this client's requests send as header ``name`` (None: not sent by us or by
        a caller's session): the cache compares it with an entry's ``Vary``."""
        value = self._headers.get(name)
        if value is None and self.session is not None and not self._owns_session:
            value = self.session.headers.get(name)
        return value

    def learn(self, network: Network, base: str) -> None:
        """``base`` (``scheme://authority/path``, encoded) is where ``network``'s requests go:
        their URL objects are built on it rather than parsed (see :func:`_built`)."""
        origin = URL(base, encoded=True)
        prefix = base[: len(base) - len(origin.raw_path)]
        fits = prefix + origin.raw_path == base and _parsed(prefix + "/x?y") == _built(
            origin, prefix, prefix + "/x?y"
        )
        self._origins[network] = (origin, prefix) if fits else None

    def _target(self, url: str, network: Network) -> URL:
        """The URL object of a request's ``url``, built from its network's base, and kept
        for the next request of a short url without a query (``send`` looks there first)."""
        found = self._origins.get(network)
        target = _parsed(url) if found is None else _built(found[0], found[1], url)
        if len(url) <= _KEPT_URL_LENGTH and "?" not in url:
            # kept: the URLs a bot polls (no query); a walk's pages (a new cursor each) are not
            targets = self._targets
            if len(targets) >= _KEPT_URLS:
                targets.clear()
            targets[url] = target
        return target

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


def _follow(
    request: Request[Any], response: aiohttp.ClientResponse, current: URL, hops: int
) -> URL:
    """Where the redirect ``response`` to ``current`` goes; a redirect to another origin,
    out of TLS or past :data:`MAX_REDIRECTS` is refused (final)."""
    location = response.headers["Location"]
    follow = _redirect(current, location)
    if isinstance(follow, URL) and hops < MAX_REDIRECTS:
        return follow
    why = follow if isinstance(follow, str) else f"too many redirects ({hops} followed)"
    status = response.status
    raise mark_final(
        StatusError(
            f"HTTP {status}: the redirect to {location!r} was refused: {why}",
            status=status,
            url=request.url,
            headers=response.headers,
            network=request.network.value,
        )
    )


def _timed_out(cancelled: BaseException, url: str, network: Network) -> NoReturn:
    """The attempt's timer ran out: raised as ``asyncio.timeout()`` says it (a TimeoutError
    from the cancellation), translated like any other timeout."""
    try:
        raise TimeoutError from cancelled
    except TimeoutError as timed_out:
        raise _translate(timed_out, url, network) from timed_out


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
