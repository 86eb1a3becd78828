"""The session layer: the only module that touches aiohttp's client.

One GET goes through, in this order:

1. coalescing: an identical GET already in flight (same URL, network, decoder and deadline)
   is joined; if its leader is cancelled, one of the joined callers takes over;
2. the operation ``deadline`` (``asyncio.timeout``) around everything below;
3. per attempt: the client-wide rate limit, the network's shared back-off after a 429, then
   the request with its per-attempt ``timeout``, the body read under ``max_response_bytes``,
   and the decode;
4. retries of connection failures, timeouts, a body cut short, 429 and 500/502/503/504,
   with exponential back-off and full jitter, or the server's ``Retry-After``.

``timeout`` bounds one attempt (connect, send, read the whole body); ``deadline`` bounds the
whole operation: every attempt, the rate-limit and shared back-off waits and the waits
between retries. A wait that would pass the deadline is not started: ``RequestTimeoutError``
is raised at once. Without a deadline an operation can take about
``(max_retries + 1) * timeout`` plus its waits.

One attempt is one request: aiohttp's own resend of an idempotent request after the
connection drops (RFC 9112 section 9.3.1, which aiohttp does even on a fresh connection) is
turned off, so ``max_retries=N`` means at most N+1 requests. Redirects are followed here,
not by aiohttp: only to the same origin, or from http to https on the same host, at most
:data:`MAX_REDIRECTS` hops; anything else is refused, so no caller header reaches another
origin. Failures that cannot heal (a certificate that does not verify, a malformed HTTP
response, a refused redirect) are raised at once. The client's own session keeps no cookies.

Every aiohttp failure is translated into the library's errors in :func:`_translate`.
"""

from __future__ import annotations

import asyncio
import enum
import logging
import random
import sys
from collections.abc import Callable, Mapping, Sequence
from importlib.metadata import PackageNotFoundError, version
from typing import Any, Final, TypeVar
from urllib.parse import quote

import aiohttp
import attrs
from yarl import URL

from ._errors import (
    ApiError,
    DecodeError,
    RateLimitError,
    RequestTimeoutError,
    ResponseTooLargeError,
    StatusError,
    TransportError,
    parse_retry_after,
    status_error,
)
from ._network import Hosts, Network

__all__ = ["RetryPolicy", "Transport", "encode_segment", "user_agent"]

T = TypeVar("T")

log: Final = logging.getLogger("asyncapi_client")

#: Statuses retried after the first attempt (besides connection failures and timeouts).
RETRY_STATUSES: Final = frozenset({429, 500, 502, 503, 504})
#: How much of an error body is read to show in StatusError.body.
_ERROR_BODY_BYTES: Final = 64 * 1024
#: Redirect hops followed within one attempt.
MAX_REDIRECTS: Final = 5
_REDIRECT_STATUSES: Final = frozenset({301, 302, 303, 307, 308})


def _package_version() -> str:
    try:
        return version("asyncapi-client")
    except PackageNotFoundError:  # pragma: no cover - running from a plain checkout
        return "0+unknown"


def user_agent() -> str:
    """``asyncapi-client/<version> aiohttp/<version> python/<version>``."""
    py = ".".join(map(str, sys.version_info[:3]))
    return f"asyncapi-client/{_package_version()} aiohttp/{aiohttp.__version__} python/{py}"


def encode_segment(value: str) -> str:
    """Percent-encode ``value`` as exactly one path segment (``/ ? # %`` and dot segments too)."""
    if value.isascii() and value.isalnum():
        return value  # addresses and most ids: nothing to encode
    encoded = quote(value, safe="")
    if encoded in (".", ".."):
        encoded = encoded.replace(".", "%2E")
    return encoded


@attrs.define(slots=True)
class RetryPolicy:
    """When and how long to wait between attempts.

    The wait before retry ``n`` (0-based) is uniform in ``[0, min(cap, base * 2**n)]``
    (full jitter), or the server's ``Retry-After`` when it sent one. A 429 without
    ``Retry-After`` waits at least half of that step (the server asked us to slow down;
    full jitter alone could retry at once). A ``Retry-After`` longer than
    ``retry_after_cap`` is not waited for: the error is raised at once.
    ``wait=False`` (testing mode) keeps the attempts but skips every wait.
    """

    max_retries: int = 3
    base: float = 0.5
    cap: float = 8.0
    retry_after_cap: float = 60.0
    wait: bool = True

    def backoff(self, attempt: int, *, floor: float = 0.0) -> float:
        """The jittered wait before retry ``attempt``, at least ``floor`` of the step."""
        step = min(self.cap, self.base * (2**attempt))
        return random.uniform(step * floor, step)


def _is_retryable(exc: ApiError) -> bool:
    if isinstance(exc, StatusError):
        return exc.status in RETRY_STATUSES
    return (
        isinstance(exc, TransportError)
        and not isinstance(exc, ResponseTooLargeError)
        and not getattr(exc, "_final", False)
    )


def _final(error: ApiError) -> ApiError:
    """Mark ``error`` as one that cannot heal: it is raised at once, never retried."""
    error._final = True  # type: ignore[attr-defined]
    return error


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


def _same_origin(a: URL, b: URL) -> bool:
    return a.scheme == b.scheme and a.host == b.host and a.port == b.port


def _redirect(current: URL, location: str) -> URL | str:
    """Where a redirect from ``current`` to ``location`` goes, or why it is refused."""
    try:
        target = current.join(URL(location))
    except ValueError:
        return "the Location is not a valid URL"
    if target.scheme not in ("http", "https"):
        return "not an HTTP URL"
    if _same_origin(current, target):
        return target.with_fragment(None)
    if current.scheme == "http" and target.scheme == "https" and current.host == target.host:
        return target.with_fragment(None)  # an upgrade to TLS on the same host
    if current.scheme == "https" and target.scheme == "http":
        return "it would leave TLS"
    return "another origin"


class _RateLimiter:
    """At most ``rate`` requests a second, evenly spaced, first come first served.

    A virtual clock (GCRA) behind a lock: each waiter in turn takes the next free slot and
    sleeps until it. A waiter woken late by a busy loop (by more than half a slot) moves
    the clock on to when it really went, so the ones behind it do not follow in a burst:
    in any window of one second at most ``rate + 1`` requests start. No background task;
    a cancelled waiter hands its slot to the next.
    """

    __slots__ = ("_interval", "_lock", "_next")

    def __init__(self, rate: float) -> None:
        self._interval = 1.0 / rate
        self._next = 0.0
        self._lock = asyncio.Lock()

    async def acquire(self) -> None:
        async with self._lock:
            loop = asyncio.get_running_loop()
            now = loop.time()
            slot = self._next if self._next > now else now
            if slot > now:
                await asyncio.sleep(slot - now)
                now = loop.time()
            self._next = max(slot, now - self._interval / 2) + self._interval


class _State(enum.Enum):
    UNOPENED = "unopened"
    OPENED = "opened"
    CLOSED = "closed"


class _Restart:
    """Told to followers when their leader was cancelled: one of them takes over."""


_RESTART: Final = _Restart()


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
        return _final(
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
        return _final(TransportError(f"malformed HTTP response: {detail}", url=url, network=net))
    detail = str(exc) or type(exc).__name__
    return TransportError(f"the request failed: {detail}", url=url, network=net)


_FAILURES: Final = (aiohttp.ClientError, TimeoutError, OSError)


class Transport:
    """Owns (or borrows) the aiohttp session and runs every GET of one Client."""

    def __init__(
        self,
        *,
        hosts: Hosts,
        timeout: float | aiohttp.ClientTimeout,
        retry: RetryPolicy,
        max_connections: int,
        rate_limit: float | None,
        deadline: float | None,
        max_response_bytes: int,
        coalesce: bool,
        headers: Mapping[str, str] | None,
        session: aiohttp.ClientSession | None,
        trace_configs: Sequence[aiohttp.TraceConfig] | None,
    ) -> None:
        self.hosts = hosts
        self.retry = retry
        self.deadline = deadline
        self._timeout = (
            timeout
            if isinstance(timeout, aiohttp.ClientTimeout)
            else aiohttp.ClientTimeout(total=timeout)
        )
        self._max_connections = max_connections
        # Our own session: at most max_connections attempts at once, queued here rather than
        # in aiohttp's pool, so an attempt's timeout never counts the wait for a connection.
        self._slots = asyncio.Semaphore(max_connections) if session is None else None
        self._max_response_bytes = max_response_bytes
        self._coalesce = coalesce
        self._limiter = _RateLimiter(rate_limit) if rate_limit is not None else None
        self._headers: dict[str, str] = {"User-Agent": user_agent(), "Accept": "application/json"}
        self._headers.update(headers or {})
        self._trace_configs = list(trace_configs or ())
        # Per request: our headers only when the session is not ours (ours has them built
        # in); the trace context only when a trace config can see it.
        self._request_headers = None if session is None else self._headers
        # A caller's session would resend a request after a dropped connection: our
        # middleware, innermost, stops that (its own middlewares are kept).
        self._middlewares = (
            None if session is None else (*getattr(session, "_middlewares", ()), _no_resend)
        )
        self._tracing = bool(self._trace_configs) or session is not None
        self._session = session
        self._owns_session = session is None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._state = _State.UNOPENED
        # per network: loop time before which no request may start (the shared 429 back-off)
        self._not_before: dict[Network, float] = {}
        self._inflight: dict[tuple[Any, ...], asyncio.Future[Any]] = {}
        self._bases: dict[Network, str] = {}

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
                connector=aiohttp.TCPConnector(limit=self._max_connections, limit_per_host=0),
                headers=self._headers,
                timeout=self._timeout,
                trace_configs=self._trace_configs or None,
                cookie_jar=aiohttp.DummyCookieJar(),
            )
            # One attempt, one request: no resend after a dropped connection (aiohttp's
            # own test client turns it off the same way; tests count requests to prove it).
            self._session._retry_connection = False
        self._state = _State.OPENED
        return self._session

    async def close(self) -> None:
        """Close the session if we own it; a caller's session is left open. Idempotent."""
        if self._state is _State.CLOSED:
            return
        self._state = _State.CLOSED
        session, self._session = self._session, None
        if session is not None and self._owns_session:
            await session.close()

    # --- addresses --------------------------------------------------------------------

    def url(self, network: Network, path: str, query: str) -> str:
        """The full, already encoded URL of ``/api`` + ``path`` on ``network``'s host."""
        base = self._bases.get(network)
        if base is None:
            base = self._bases[network] = str(URL(self.hosts.base(network))).rstrip("/") + "/api"
        return f"{base}{path}?{query}" if query else base + path

    # --- one operation ----------------------------------------------------------------

    async def get(
        self,
        operation: str,
        network: Network,
        url: str,
        decode: Callable[[bytes], T],
        deadline: float | None,
    ) -> T:
        """GET ``url`` and decode it: coalesced, under the deadline, with retries."""
        loop = asyncio.get_running_loop()
        if self._state is not _State.OPENED or loop is not self._loop:
            self._open()  # opens lazily, or says why not (closed, another loop)
        if not self._coalesce:
            return await self._run(operation, network, url, decode, deadline)
        key = (url, network, decode, deadline)
        shared = self._inflight.get(key)
        if shared is not None:
            return await self._follow(key, shared, operation, network, url, decode, deadline)
        # The leader runs the request itself (no task) and hands the outcome to followers.
        shared = self._inflight[key] = loop.create_future()
        try:
            result = await self._run(operation, network, url, decode, deadline)
        except asyncio.CancelledError:
            del self._inflight[key]
            if not shared.done():
                shared.set_result(_RESTART)  # followers go on without the cancelled leader
            raise
        except BaseException as exc:
            del self._inflight[key]
            if not shared.done():
                shared.set_exception(exc)
                shared.exception()  # retrieved: no "never retrieved" warning without followers
            raise
        del self._inflight[key]
        if not shared.done():
            shared.set_result(result)
        return result

    async def _follow(
        self,
        key: tuple[Any, ...],
        shared: asyncio.Future[Any],
        operation: str,
        network: Network,
        url: str,
        decode: Callable[[bytes], T],
        deadline: float | None,
    ) -> T:
        """Wait for the leader's outcome; take over if the leader was cancelled.

        ``shield``: cancelling one follower must not cancel the shared outcome.
        """
        while True:
            result = await asyncio.shield(shared)
            if result is not _RESTART:
                return result  # type: ignore[no-any-return]
            successor = self._inflight.get(key)  # another follower may have taken over
            if successor is None:
                return await self.get(operation, network, url, decode, deadline)
            shared = successor

    async def _run(
        self,
        operation: str,
        network: Network,
        url: str,
        decode: Callable[[bytes], T],
        deadline: float | None,
    ) -> T:
        if deadline is None:
            if self._limiter is None and not self._not_before:
                # Nothing to wait for: the first attempt goes straight out.
                try:
                    return await self._attempt(operation, network, url, decode, 0)
                except ApiError as exc:
                    return await self._attempts(operation, network, url, decode, None, exc)
            return await self._attempts(operation, network, url, decode, None)
        loop = asyncio.get_running_loop()
        expires = loop.time() + deadline
        scope = asyncio.timeout_at(expires)
        try:
            async with scope:
                return await self._attempts(operation, network, url, decode, expires)
        except TimeoutError as exc:
            if not scope.expired():
                raise
            raise RequestTimeoutError(
                f"the operation ran past its deadline of {deadline:g}s",
                url=url,
                network=network.value,
            ) from exc

    async def _attempts(
        self,
        operation: str,
        network: Network,
        url: str,
        decode: Callable[[bytes], T],
        expires: float | None,
        failed: ApiError | None = None,
    ) -> T:
        """Attempts until one succeeds or the error is final; ``failed``: attempt 0's error."""
        attempt = 0
        while True:
            if failed is not None:
                await self._before_retry(failed, attempt, network, url, expires)
                attempt += 1
            # The host's hold after a 429 first, then a rate-limit slot: slots taken during
            # a hold would all fire at once when it ends.
            if self._not_before:
                await self._wait_shared_backoff(network, url, expires)
            if self._limiter is not None:
                await self._limiter.acquire()
            try:
                return await self._attempt(operation, network, url, decode, attempt)
            except ApiError as exc:
                failed = exc

    async def _before_retry(
        self, failed: ApiError, attempt: int, network: Network, url: str, expires: float | None
    ) -> None:
        """Raise ``failed`` if it is final; else wait as long as the next attempt must."""
        retry = self.retry
        if not _is_retryable(failed):
            raise failed
        delay = self._delay(failed, attempt, network)
        if attempt >= retry.max_retries:
            raise failed
        if expires is not None and asyncio.get_running_loop().time() + delay >= expires:
            raise RequestTimeoutError(
                f"the deadline would pass during the {delay:.3g}s wait before the next attempt",
                url=url,
                network=network.value,
            ) from failed
        log.info(
            "retrying GET %s [%s] after %s (attempt %d of %d) in %.3fs",
            url,
            network.value,
            _reason(failed),
            attempt + 1,
            retry.max_retries + 1,
            delay,
        )
        if delay > 0:
            await asyncio.sleep(delay)

    def _delay(self, exc: ApiError, attempt: int, network: Network) -> float:
        """How long to wait before the next attempt; raises ``exc`` when waiting is pointless.

        A 429 also holds back every other request of this client to ``network`` as long.
        """
        retry = self.retry
        retry_after = None
        if isinstance(exc, StatusError):
            if isinstance(exc, RateLimitError):
                retry_after = exc.retry_after
            else:
                retry_after = parse_retry_after(exc.headers.get("Retry-After"))
        if retry_after is not None and retry_after > retry.retry_after_cap:
            if isinstance(exc, RateLimitError) and retry.wait:
                self._hold(network, retry_after)
            raise exc  # the server asks for longer than we are willing to wait
        if not retry.wait:
            return 0.0
        if retry_after is not None:
            delay = retry_after
        elif isinstance(exc, RateLimitError):
            delay = retry.backoff(attempt, floor=0.5)
        else:
            delay = retry.backoff(attempt)
        if isinstance(exc, RateLimitError):
            self._hold(network, delay)
        return delay

    def _hold(self, network: Network, seconds: float) -> None:
        """Hold back every request to ``network`` for ``seconds`` (the shared back-off)."""
        until = asyncio.get_running_loop().time() + seconds
        if until > self._not_before.get(network, 0.0):
            self._not_before[network] = until

    async def _wait_shared_backoff(self, network: Network, url: str, expires: float | None) -> None:
        """Wait while ``network`` is held back after a 429 (a later 429 may extend it)."""
        loop = asyncio.get_running_loop()
        while True:
            until = self._not_before.get(network)
            if until is None:
                return
            wait = until - loop.time()
            if wait <= 0 or not self.retry.wait:
                del self._not_before[network]
                return
            if wait > self.retry.retry_after_cap:
                raise RateLimitError(
                    f"HTTP 429 earlier: the server asked this client to wait {wait:.0f}s more, "
                    f"longer than the {self.retry.retry_after_cap:g}s Retry-After cap",
                    status=429,
                    url=url,
                    network=network.value,
                    retry_after=wait,
                )
            if expires is not None and until >= expires:
                raise RequestTimeoutError(
                    f"the deadline would pass during the {wait:.3g}s shared back-off after a 429",
                    url=url,
                    network=network.value,
                )
            await asyncio.sleep(wait)

    async def _attempt(
        self,
        operation: str,
        network: Network,
        url: str,
        decode: Callable[[bytes], T],
        attempt: int,
    ) -> T:
        session = self._session if self._session is not None else self._open()
        if log.isEnabledFor(logging.DEBUG):
            log.debug("GET %s [%s] %s attempt %d", url, network.value, operation, attempt + 1)
        slots = self._slots
        if slots is not None:
            await slots.acquire()
        target = URL(url, encoded=True)
        hops = 0
        try:
            while True:
                response = await session.get(
                    target,
                    headers=self._request_headers,
                    timeout=self._timeout,
                    allow_redirects=False,
                    middlewares=self._middlewares,
                    trace_request_ctx=(
                        {"operation": operation, "network": network.value, "attempt": attempt + 1}
                        if self._tracing
                        else None
                    ),
                )
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
                    raise _final(
                        StatusError(
                            f"HTTP {status}: the redirect to {location!r} was refused: {why}",
                            status=status,
                            url=url,
                            headers=response.headers,
                            network=network.value,
                        )
                    )
                target, hops = follow, hops + 1
            async with response:
                if status >= 300 or status < 200:
                    text = await _read_preview(response)
                    raise status_error(
                        status, url=url, body=text, headers=response.headers, network=network.value
                    )
                # A Content-Length bounds the body, unless it is compressed (it grows).
                length = (
                    response.content_length if "Content-Encoding" not in response.headers else None
                )
                if length is not None and length <= self._max_response_bytes:
                    body = await response.read()
                else:
                    body = await self._read_capped(response, length, url, network)
        except _FAILURES as exc:
            raise _translate(exc, url, network) from exc
        finally:
            if slots is not None:
                slots.release()
        try:
            return decode(body)
        except DecodeError as exc:
            exc.url, exc.network = url, network.value
            raise

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
    try:
        return raw.decode(response.charset or "utf-8", errors="replace")
    except LookupError:
        return raw.decode("utf-8", errors="replace")


def _reason(exc: ApiError) -> str:
    if isinstance(exc, StatusError):
        return f"HTTP {exc.status}"
    return f"{type(exc).__name__}: {exc.message}"
