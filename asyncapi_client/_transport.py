"""The pipeline: every call of one Client, from its Request to its Outcome.

The client builds one frozen :class:`~asyncapi_client._request.Request` per call and hands
it to :meth:`Transport.get` (the value) or :meth:`Transport.send` (the whole Response),
which take it through these stages, each reading it:

1. coalescing: an identical request already in flight is joined; if its leader is
   cancelled, one of the joined callers takes over;
2. the operation ``deadline`` (``asyncio.timeout``) around everything below;
3. the retry loop, the one way attempts are made: per attempt, the limiter (its rates and
   the network's 429 hold) when it has something to say, then one attempt by the sender
   (asyncapi_client/_http.py: one GET with its per-attempt ``timeout``, same-origin
   redirects, the body read under ``max_response_bytes``), then the decode;
4. after a failed attempt, the pure :func:`~asyncapi_client._retry.decide` says whether and
   how long to wait; :meth:`Transport._after_failure` does what it says (the 429 hold, the
   retry hook, the wait) in one place.

``timeout`` bounds one attempt (connect, send, read the whole body) and each question to
the limiter; ``deadline`` bounds the whole operation: every attempt, the limiter's waits and
the waits between retries. A wait that would pass the deadline is not started:
``RequestTimeoutError`` is raised at once. Without a deadline an operation can take about
``(max_retries + 1) * timeout`` plus its waits.

This module does not import aiohttp: the sender does (its :class:`~._request.Sender`
protocol is all the pipeline sees).
"""

from __future__ import annotations

import asyncio
import enum
import functools
import inspect
import logging
import os
import random
import re
import sys
import time
from collections.abc import Awaitable, Callable, Coroutine, Mapping, Sequence
from ssl import SSLContext
from typing import TYPE_CHECKING, Any, Final, Literal, TypeVar, overload
from urllib.parse import quote

from yarl import URL

from ._decode import PUBLIC_ONLY_ENV
from ._errors import (
    ApiError,
    DecodeError,
    LimiterError,
    RateLimitError,
    RequestTimeoutError,
    StatusError,
    TransportError,
)
from ._limiters import HOLD_RECHECK, Admission, Limiter, LocalLimiter
from ._network import Hosts, Network
from ._request import Outcome, Request, Response, Sender
from ._retry import Decision, RetryEvent, RetryPolicy, decide, mark_final

if TYPE_CHECKING:  # imported only when a client asks for telemetry or a cache
    import aiohttp

    from ._cache import CacheBackend, CacheStage
    from ._operations import Endpoint
    from ._telemetry import Telemetry

__all__ = ["Transport", "encode_segment"]

T = TypeVar("T")

log: Final = logging.getLogger("asyncapi_client")

#: The free-slot case of ``max_connections``'s semaphore inlined (``Semaphore._value``,
#: ``_waiters``, ``_wake_up_next``): no coroutine when a slot is free and nobody queues.
#: Verified on CPython 3.11's asyncio (the suite runs with it and, under
#: ASYNCAPI_CLIENT_PUBLIC_ONLY=1, with its public twin ``acquire()``/``release()``).
INLINE_SLOTS: Final = (
    sys.implementation.name == "cpython"
    and sys.version_info[:2] == (3, 11)
    and os.environ.get(PUBLIC_ONLY_ENV, "") in ("", "0")
)
#: Slots one attempt gives up for waking up later than the limiter's margin; then it goes
#: late (a process that is always late must not stop itself).
MAX_LATE: Final = 2

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


class _State(enum.Enum):
    UNOPENED = "unopened"
    OPENED = "opened"
    CLOSED = "closed"


class _Restart:
    """Told to followers when their leader was cancelled: one of them takes over."""


_RESTART: Final = _Restart()
#: Not in flight (``_inflight`` holds None for a request in flight that nobody joined yet).
_ABSENT: Final[Any] = object()


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
    """Runs every GET of one Client: coalescing, the deadline, the limiter and the retry
    loop around the attempts of its sender (by default the aiohttp adapter)."""

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
        sender: Sender | None = None,
    ) -> None:
        self.hosts = hosts
        if sender is None:
            from ._http import AiohttpSender

            sender = AiohttpSender(
                timeout=timeout,
                max_connections=max_connections,
                max_response_bytes=max_response_bytes,
                headers=headers,
                session=session,
                trace_configs=trace_configs,
                proxy=proxy,
                ssl=ssl,
                trust_env=trust_env,
                conditional=cache is not None,
            )
        #: Makes the attempts (the only part that speaks HTTP).
        self._sender = sender
        #: The cache stage (``Client(cache=...)``): the operations its ``ttl`` names go
        #: through it first (asyncapi_client/_cache.py); the sender adds its validators.
        self._cache: CacheStage | None = None
        if cache is not None:
            from ._cache import CacheStage

            self._cache = CacheStage(cache, self)
        self._telemetry = telemetry
        self.retry = retry
        #: The policy of testing mode (``Client.set_testing``), read at decision time;
        #: ``retry`` itself is never changed by it.
        self.testing: RetryPolicy | None = None
        self.deadline = deadline
        #: How long one question to the limiter may take: the attempt's timeout.
        self._limiter_timeout: float = sender.attempt_timeout
        self._coalesce = coalesce
        #: At most max_connections attempts at once (see the retry loop).
        self._slots = asyncio.Semaphore(max_connections)
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
        # A LocalLimiter without rates (the default) is not asked before a first attempt
        # unless a hold was placed (its rates are fixed when it is made).
        self._local = limiter if type(limiter) is LocalLimiter and not limiter.rates else None
        self._on_retry = on_retry or self._log_retry
        self._random = random.Random()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._state = _State.UNOPENED
        #: The loop calls run in once opened; None before that and once closed (one check
        #: per call instead of two).
        self._ready: asyncio.AbstractEventLoop | None = None
        #: Requests in flight: the future their followers wait on, None until one joins.
        self._inflight: dict[Request[Any], asyncio.Future[Any] | None] = {}
        self._bases: dict[Network, str] = {}

    # --- lifecycle --------------------------------------------------------------------

    @property
    def closed(self) -> bool:
        return self._state is _State.CLOSED

    @property
    def _session(self) -> object:
        """The sender's session (None before the first call, or once closed)."""
        return getattr(self._sender, "session", None)

    def _open(self) -> Any:
        """Ready for calls inside the running loop (the sender's session is made on first
        use); returns the sender's session."""
        loop = asyncio.get_running_loop()
        if self._state is _State.CLOSED:
            raise RuntimeError("this Client is closed; create a new one")
        if self._loop is None:
            self._loop = loop
        elif self._loop is not loop:
            raise RuntimeError("a Client belongs to the event loop it was first used in")
        session = self._sender.open()
        self._state = _State.OPENED
        self._ready = loop
        return session

    async def close(self) -> None:
        """Close what the sender owns; a caller's session is left open. Idempotent.

        The limiter is never closed: several clients may share it.
        """
        if self._state is _State.CLOSED:
            return
        self._state = _State.CLOSED
        self._ready = None
        await self._sender.close()

    # --- requests ---------------------------------------------------------------------

    def request(
        self,
        endpoint: Endpoint[T],
        network: Network,
        segment: str | None,
        query: str,
        deadline: float | None,
    ) -> Request[T]:
        """The one Request of a call of ``endpoint`` on ``network``'s host: ``/api`` + its
        path with ``segment`` (already encoded) in its placeholder (+ ``?query``)."""
        base = self._bases.get(network)
        if base is None:
            base = self._bases[network] = str(URL(self.hosts.base(network))).rstrip("/") + "/api"
            self._sender.learn(network, base)
        after = endpoint.after
        path = endpoint.before if after is None else f"{endpoint.before}{segment}{after}"
        url = f"{base}{path}?{query}" if query else base + path
        # tuple.__new__: the named tuple's own __new__ is Python code, this is the hot path
        return tuple.__new__(
            Request,
            (endpoint.name, network, url, endpoint.template, endpoint.decode, deadline),
        )

    def get(self, request: Request[T]) -> Coroutine[Any, Any, T]:
        """Run ``request`` and return its decoded value.

        A plain method returning the coroutine of :meth:`_send`: no coroutine of its own.
        """
        if self._cache is not None and request.operation in self._cache.ttl:
            return self._cache.value(request)
        if self._telemetry is None:
            return self._send(request, True)
        return self._traced_value(request)

    def getter(self) -> Callable[[Request[Any]], Coroutine[Any, Any, Any]]:
        """:meth:`get` as a client keeps it: with neither a cache nor telemetry (both fixed
        when the transport is made), the pipeline's own coroutine with nothing in between."""
        if self._cache is None and self._telemetry is None:
            return functools.partial(self._send, value=True)
        return self.get

    async def _traced_value(self, request: Request[T]) -> T:
        assert self._telemetry is not None
        return (await self._telemetry.call(request, self._send)).value

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

    async def _send(self, request: Request[T], value: bool = False) -> Any:  # noqa: C901
        """Run ``request``: coalesced, under its deadline, through the retry loop. Returns
        its Outcome, or only the decoded value when ``value`` (what ``get`` wants).

        One coroutine from the operation to the sender's attempt: the loop is here.
        """
        loop = asyncio.get_running_loop()
        if loop is not self._ready:
            self._open()  # opens lazily, or says why not (closed, another loop)
        leader = self._coalesce
        if leader:
            inflight = self._inflight
            while True:
                shared = inflight.get(request, _ABSENT)
                if shared is _ABSENT:
                    break
                if shared is None:  # the first follower: the leader hands its outcome here
                    shared = inflight[request] = loop.create_future()
                # shield: cancelling one follower must not cancel the shared outcome
                result = await asyncio.shield(shared)
                if result is not _RESTART:
                    return result.value if value else result
                # the leader was cancelled: lead, or join whichever follower took over
            # The leader runs the request itself (no task); a future for the outcome is
            # made only when a follower comes.
            inflight[request] = None
        started = time.monotonic()
        deadline = request.deadline
        expires = None if deadline is None else loop.time() + deadline
        # The call's progress for the limiter and the retries: made once either is needed.
        call: _Call | None = None
        tries = attempts = 0
        # ``async with scope`` around the loop, spelled out so that a call without a
        # deadline pays nothing for it.
        scope = None if expires is None else asyncio.timeout_at(expires)
        try:
            try:
                if scope is not None:
                    await scope.__aenter__()
                try:
                    # The retry loop, the one way attempts are made.
                    local, sender, slots = self._local, self._sender, self._slots
                    failed: ApiError | None = None
                    while True:
                        tries += 1
                        try:
                            # The idle default limiter is not asked before a first attempt.
                            if failed is not None or local is None or not local.idle:
                                if call is None:
                                    call = _Call(request, started, expires)
                                call.tries, call.attempts = tries, attempts
                                await self._admit(call, failed)
                            # An attempt counts once it has its connection slot (then it
                            # is sent): at most max_connections at once, whether the session
                            # is ours or the caller's, queued here rather than in aiohttp's
                            # pool, so an attempt's timeout never counts the wait for one.
                            if INLINE_SLOTS and slots._value > 0 and not slots._waiters:
                                slots._value -= 1
                            else:
                                await slots.acquire()
                            try:
                                if self._ready is None:  # closed while it waited for the slot
                                    raise mark_final(_closed_during(request))
                                attempts += 1
                                reply = await sender.send(request, attempts)
                            finally:
                                if INLINE_SLOTS:
                                    slots._value += 1
                                    if slots._waiters:
                                        slots._wake_up_next()
                                else:
                                    slots.release()
                            try:
                                decoded = request.decode(reply.body)
                            except DecodeError as exc:
                                exc.url, exc.network = request.url, request.network.value
                                raise
                            break
                        except ApiError as exc:
                            cause = exc.__cause__
                            if failed is not None and exc is not failed and cause is not failed:
                                exc.__cause__ = failed  # the story of the call, attempt by attempt
                            failed = exc
                        # outside the except block: the error is no later one's __context__
                        if call is None:
                            call = _Call(request, started, expires)
                        call.tries, call.attempts = tries, attempts
                        await self._after_failure(call, failed)
                except BaseException as exc:
                    if scope is not None:  # a cancellation by the deadline becomes TimeoutError
                        await scope.__aexit__(type(exc), exc, exc.__traceback__)
                    raise
                if scope is not None:
                    await scope.__aexit__(None, None, None)
            except TimeoutError as exc:
                if scope is None or not scope.expired():
                    raise
                trouble = "" if call is None else self._limiter_trouble(call)
                error = RequestTimeoutError(
                    f"the operation ran past its deadline of {deadline:g}s{trouble}",
                    url=request.url,
                    network=request.network.value,
                )
                error.attempts = attempts
                story = None if call is None else call.failed
                raise error from story or exc  # the story so far; the timeout is __context__
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
        shared = self._inflight.pop(request) if leader else None
        if shared is None and value:
            return decoded  # nobody joined and only the value is wanted: no Outcome made
        outcome: Outcome[T] = tuple.__new__(
            Outcome,
            (
                decoded,
                reply.status,
                reply.headers,
                reply.body,
                reply.url,
                request.network,
                attempts,
                time.monotonic() - started,
                None,
            ),
        )
        if shared is not None and not shared.done():
            shared.set_result(outcome)
        return decoded if value else outcome

    # --- the retry loop: after a failed attempt ---------------------------------------

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
        self._refuse_if_closed(call)
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
            self._refuse_if_closed(call)

    def _refuse_if_closed(self, call: _Call) -> None:
        """No attempt after :meth:`close`: a call in flight then ends with this error."""
        if self._state is _State.CLOSED:
            error = _closed_during(call.request)
            error.attempts = call.attempts
            raise error from call.failed

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


def _closed_during(request: Request[Any]) -> TransportError:
    """What a call in flight when its client was closed ends with (no attempt is made)."""
    return TransportError(
        "the client was closed during the call", url=request.url, network=request.network.value
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
    return mark_final(error)
