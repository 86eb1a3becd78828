"""The pipeline: every call of one Client, from its Request to its Outcome.

The client builds one frozen :class:`~asyncapi_client._request.Request` per call and hands
it to :meth:`Pipeline.value` (the decoded value) or :meth:`Pipeline.outcome` (everything a
``Response`` shows), which take it through these stages, top-down in this file:

1. :meth:`Pipeline._run` - coalescing: an identical request already in flight is joined
   (each caller bounded by its own deadline); if its leader is cancelled or ran out of its
   own deadline, one of the joined callers takes over. The leader opens the call's
   :class:`~._request.Call`; the Outcome is made only when someone wants more than the value;
2. :meth:`Pipeline._deadlined` - the operation's ``deadline`` around everything below;
3. :meth:`Pipeline._attempts` - the retry loop, the one way attempts are made: per attempt,
   the limiter stage (asyncapi_client/_gate.py) when it has something to say, a connection
   slot (asyncapi_client/_slots.py), one attempt by the sender (asyncapi_client/_http.py),
   then the decode;
4. :meth:`Pipeline._after_failure` - after a failed attempt, the pure
   :func:`~asyncapi_client._retry.decide` says whether and how long to wait; this does what
   it says (the 429 hold, the retry hook, the wait) in one place.

``timeout`` bounds one attempt (connect, send, read the whole body) and each question to
the limiter; ``deadline`` bounds the whole operation: every attempt, the limiter's waits and
the waits between retries. A wait that would pass the deadline is not started:
``RequestTimeoutError`` is raised at once. Without a deadline an operation can take about
``(max_retries + 1) * timeout`` plus its waits.

This module does not import aiohttp: the sender does (its :class:`~._request.Sender`
protocol is all the pipeline sees). Stages around the pipeline (the cache) see it through
:class:`~._request.Upstream`.
"""

from __future__ import annotations

import asyncio
import enum
import logging
import random
import time
from collections.abc import Callable, Coroutine, Mapping
from typing import TYPE_CHECKING, Any, Final, TypeVar

import attrs

from ._errors import (
    ApiError,
    DecodeError,
    LimiterError,
    RequestTimeoutError,
    StatusError,
    TransportError,
)
from ._gate import LimiterStage
from ._limiters import Limiter
from ._request import Call, Outcome, Reply, Request, Sender
from ._retry import Decision, RetryEvent, RetryPolicy, decide, mark_final
from ._slots import Slots

if TYPE_CHECKING:  # imported only when a client asks for telemetry
    from ._telemetry import Telemetry

__all__ = ["Pipeline"]

T = TypeVar("T")

log: Final = logging.getLogger("asyncapi_client")


class _State(enum.Enum):
    UNOPENED = "unopened"
    OPENED = "opened"
    CLOSED = "closed"


class _Restart:
    """Told to followers when their leader was cancelled or ran out of its own deadline:
    one of them takes over."""


_RESTART: Final = _Restart()


class Pipeline:
    """Runs every GET of one Client: coalescing, the deadline, the limiter and the retry
    loop around the attempts of its sender."""

    def __init__(
        self,
        *,
        sender: Sender,
        limiter: Limiter,
        retry: RetryPolicy,
        deadline: float | None,
        max_connections: int,
        coalesce: bool,
        on_retry: Callable[[RetryEvent], object] | None = None,
        telemetry: Telemetry | None = None,
    ) -> None:
        #: Makes the attempts (the only part that speaks HTTP).
        self._sender = sender
        self._gate = LimiterStage(limiter, sender.attempt_timeout, telemetry)
        self._telemetry = telemetry
        self.retry = retry
        #: The policy of testing mode (``Client.set_testing``), read at decision time;
        #: ``retry`` itself is never changed by it.
        self.testing: RetryPolicy | None = None
        self.deadline = deadline
        #: How long one attempt (and one question to the limiter or a cache) may take.
        self.attempt_timeout: float = sender.attempt_timeout
        self._coalesce = coalesce
        #: At most max_connections attempts at once, whether the session is ours or the
        #: caller's, queued here rather than in aiohttp's pool, so an attempt's timeout never
        #: counts the wait for one.
        self._slots = Slots(max_connections)
        self._on_retry = on_retry or self._log_retry
        self._random = random.Random()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._state = _State.UNOPENED
        #: The loop calls run in once opened; None before that and once closed (one check
        #: per call instead of two).
        self._ready: asyncio.AbstractEventLoop | None = None
        #: Requests in flight: the future their followers wait on, None until one joins.
        self._inflight: dict[Request[Any], asyncio.Future[Any] | None] = {}

    @property
    def limiter(self) -> Limiter:
        return self._gate.limiter

    # --- lifecycle --------------------------------------------------------------------

    @property
    def closed(self) -> bool:
        return self._state is _State.CLOSED

    def ready(self) -> None:
        """Ready for calls inside the running loop, or a RuntimeError saying why not."""
        if asyncio.get_running_loop() is not self._ready:
            self._open()

    def _open(self) -> None:
        loop = asyncio.get_running_loop()
        if self._state is _State.CLOSED:
            raise RuntimeError("this Client is closed; create a new one")
        if self._loop is None:
            self._loop = loop
        elif self._loop is not loop:
            raise RuntimeError(
                "a Client belongs to the event loop it was first used in, and this is another "
                "one (each asyncio.run() makes a new loop): make one Client per event loop, "
                "created and closed inside the coroutine that uses it (async with Client(...))"
            )
        self._sender.open()
        self._state = _State.OPENED
        self._ready = loop

    async def close(self) -> None:
        """Close what the sender owns; a caller's session is left open. Idempotent.

        The limiter is never closed: several clients may share it.
        """
        if self._state is _State.CLOSED:
            return
        self._state = _State.CLOSED
        self._ready = None
        await self._sender.close()

    # --- 1. coalescing --------------------------------------------------------------------

    def value(self, request: Request[T]) -> Coroutine[Any, Any, T]:
        """Run ``request`` and return its decoded value (the coroutine of :meth:`_run`)."""
        return self._run(request, None, True)

    def outcome(
        self, request: Request[T], conditional: Mapping[str, str] | None = None
    ) -> Coroutine[Any, Any, Outcome[T]]:
        """Run ``request`` (with the validators ``conditional`` on each attempt: the cache's
        revalidation, never coalesced) and return its Outcome."""
        return self._run(request, conditional, False)

    async def _run(
        self, request: Request[Any], conditional: Mapping[str, str] | None, value: bool
    ) -> Any:
        """Coalesced unless ``conditional``; the Outcome, or its value alone (``value``: no
        Outcome is made unless a follower waits for it)."""
        loop = asyncio.get_running_loop()
        if loop is not self._ready:
            self._open()  # opens lazily, or says why not (closed, another loop)
        leads = self._coalesce and conditional is None
        if leads:
            inflight = self._inflight
            while request in inflight:
                shared = await self._follow(request, loop)
                if shared is not _RESTART:
                    return shared.value if value else shared
                # the leader was cancelled or ran out of its deadline: lead, or join the new one
            # The leader runs the request itself (no task); a future for the outcome is made
            # only when a follower comes.
            inflight[request] = None
        call = Call(request, time.monotonic(), conditional)
        try:
            decoded = await (
                self._attempts(call) if request.deadline is None else self._deadlined(call, loop)
            )
        except BaseException as exc:
            if leads:
                _hand_over(self._inflight.pop(request), exc)
            raise
        shared = self._inflight.pop(request) if leads else None
        if shared is None and value:
            return decoded
        outcome = _outcome(call, decoded)
        if shared is not None and not shared.done():
            shared.set_result(outcome)
        return decoded if value else outcome

    async def _follow(self, request: Request[Any], loop: asyncio.AbstractEventLoop) -> Any:
        """Wait for the leader's outcome of ``request``, bounded by this caller's own
        deadline (the shared request goes on for the others)."""
        shared = self._inflight[request]
        if shared is None:  # the first follower: the leader hands its outcome here
            shared = self._inflight[request] = loop.create_future()
        if request.deadline is None:
            # shield: cancelling one follower must not cancel the shared outcome
            return await asyncio.shield(shared)
        started = time.monotonic()
        try:
            async with asyncio.timeout(request.deadline):
                return await asyncio.shield(shared)
        except TimeoutError as exc:
            raise _past_deadline(Call(request, started, None), "") from exc

    # --- 2. the deadline --------------------------------------------------------------------

    async def _deadlined(self, call: Call, loop: asyncio.AbstractEventLoop) -> Any:
        """The attempts of ``call`` under its request's deadline (a call without one pays
        nothing for it: :meth:`_run` awaits :meth:`_attempts` itself)."""
        deadline = call.request.deadline
        assert deadline is not None
        call.expires = expires = loop.time() + deadline
        try:
            async with asyncio.timeout_at(expires) as scope:
                return await self._attempts(call)
        except TimeoutError as exc:
            if not scope.expired():
                raise
            raise _past_deadline(call, self._gate.trouble(call)) from call.failed or exc

    def use_testing(self, policy: RetryPolicy | None) -> None:
        """Testing mode on (``policy``) or off (None). While it is on, nothing is learned
        from the answers' rate-limit headers either: a test meets the server's 429."""
        self.testing = policy
        self._gate.learns = self._gate.can_learn and policy is None

    # --- 3. the retry loop --------------------------------------------------------------------

    async def _attempts(self, call: Call) -> Any:
        """Attempt after attempt until one is answered or the retry policy gives up: the
        answer's decoded value (the answer itself is kept as ``call.reply``)."""
        gate, slots = self._gate, self._slots
        while True:
            call.tries += 1
            try:
                sent = call.started  # when the attempt was let go: the limiter's, if asked
                if call.failed is not None or call.request.network not in gate.free:
                    sent = await gate.admit(call, (self.testing or self.retry).retry_after_cap)
                if slots.free:  # a free slot, taken without a coroutine (see _slots.py)
                    slots.free -= 1
                else:
                    await slots.take()
                try:
                    if self._ready is None:  # closed while it waited for the slot
                        raise mark_final(_closed_during(call.request))
                    call.attempts += 1
                    reply = await self._sender.send(call.request, call.attempts, call.conditional)
                except BaseException as exc:
                    if gate.learns:  # an error answer's rate-limit headers, or none
                        gate.failed(call, exc, sent)
                    raise
                finally:
                    if slots.waiting:
                        slots.give()
                    else:
                        slots.free += 1
                if gate.learns:  # the answer's rate-limit headers, for the limiter
                    gate.read(call, reply.headers, sent)
                call.reply = reply
                return _decoded(call, reply)
            except ApiError as exc:
                failed = _chained(call, exc)
            # outside the except block: the error is no later one's __context__
            await self._after_failure(call, failed)

    # --- 4. after a failed attempt ------------------------------------------------------------

    async def _after_failure(self, call: Call, failed: ApiError) -> None:
        """Act on the decision after ``failed``: raise it, or hold, tell and wait."""
        policy = self.testing or self.retry
        decision: Decision = decide(policy, failed, call.tries - 1, self._random)
        if decision.hold is not None:
            failed, decision = await self._hold(call, failed, decision, policy)
        failed.attempts = call.attempts
        call.failed = failed
        if not decision.retry:
            if decision.why:
                failed.message = f"{failed.message}; {decision.why}"
            raise failed
        self._refuse_if_closed(call)
        wait = decision.wait
        if call.expires is not None and asyncio.get_running_loop().time() + wait >= call.expires:
            request = call.request
            error = RequestTimeoutError(
                f"the deadline would pass during the {wait:.3g}s wait before the next "
                f"attempt{self._gate.trouble(call)}",
                url=request.url,
                network=request.network.value,
            )
            error.attempts = call.attempts
            error._own_deadline = True
            raise error from failed
        self._tell(call, failed, wait)
        if wait > 0:
            await asyncio.sleep(wait)
            self._refuse_if_closed(call)

    async def _hold(
        self, call: Call, failed: ApiError, decision: Decision, policy: RetryPolicy
    ) -> tuple[ApiError, Decision]:
        """Place the 429 hold ``decision`` asks for (at most ``retry_after_cap``); a hold
        that cannot be placed becomes the error when the call was to be retried."""
        asked = decision.hold
        assert asked is not None
        hold = min(asked, policy.retry_after_cap)
        try:
            await self._gate.hold(call, call.request.network, hold, _retry_after_text(failed))
        except LimiterError as exc:
            if decision.retry:  # the hold could not be placed: that is the error now
                return exc, decide(policy, exc, call.tries - 1, self._random)
            log.warning("the 429 hold could not be placed: %s", exc.message)  # raised anyway
            return failed, decision
        if decision.why and hold < asked:
            why = f"{decision.why}; requests to this network are held for {hold:g}s"
            return failed, attrs.evolve(decision, why=why)
        return failed, decision

    def _tell(self, call: Call, failed: ApiError, wait: float) -> None:
        """The retry event, to telemetry and to ``on_retry`` (whose errors are logged)."""
        request = call.request
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

    def _refuse_if_closed(self, call: Call) -> None:
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


def _decoded(call: Call, reply: Reply) -> Any:
    """The value of ``reply``: its body decoded (a DecodeError names the request); a 304 to
    a conditional call has no body and no value (None)."""
    if reply.status == 304:
        return None
    request = call.request
    try:
        return request.decode(reply.body)
    except DecodeError as exc:
        exc.url, exc.network = request.url, request.network.value
        raise


def _outcome(call: Call, value: Any) -> Outcome[Any]:
    """The Outcome of an answered ``call`` whose value is ``value``."""
    reply = call.reply
    assert reply is not None
    # tuple.__new__: the named tuple's own __new__ is Python code
    return tuple.__new__(
        Outcome,
        (
            value,
            reply.status,
            reply.headers,
            reply.body,
            reply.url,
            call.request.network,
            call.attempts,
            time.monotonic() - call.started,
            None,
        ),
    )


def _chained(call: Call, exc: ApiError) -> ApiError:
    """``exc``, with the call's previous failure as its cause: the story of the call."""
    failed = call.failed
    if failed is not None and exc is not failed and exc.__cause__ is not failed:
        exc.__cause__ = failed
    call.failed = exc
    return exc


def _hand_over(shared: asyncio.Future[Any] | None, exc: BaseException) -> None:
    """Tell the followers of a leader that failed with ``exc``: they take over when it was
    cancelled or ran out of its own deadline (not theirs), else they get its error."""
    if shared is None or shared.done():
        return
    if isinstance(exc, asyncio.CancelledError) or (isinstance(exc, ApiError) and exc._own_deadline):
        shared.set_result(_RESTART)
    else:
        shared.set_exception(exc)
        shared.exception()  # retrieved: no "never retrieved" warning alone


def _past_deadline(call: Call, trouble: str) -> RequestTimeoutError:
    """The error of a call that ran past its own deadline (never handed to followers)."""
    request = call.request
    error = RequestTimeoutError(
        f"the operation ran past its deadline of {request.deadline:g}s{trouble}",
        url=request.url,
        network=request.network.value,
    )
    error.attempts = call.attempts
    error._own_deadline = True
    return error


def _closed_during(request: Request[Any]) -> TransportError:
    """What a call in flight when its client was closed ends with (no attempt is made)."""
    return TransportError(
        "the client was closed during the call", url=request.url, network=request.network.value
    )


def _retry_after_text(error: ApiError) -> str | None:
    """The ``Retry-After`` a 429 came with, as the server sent it."""
    return error.headers.get("Retry-After") if isinstance(error, StatusError) else None
