"""The limiter stage of the pipeline: every question the pipeline asks a limiter.

Before an attempt, :meth:`LimiterStage.admit` waits until the limiter lets it go (its rates,
a network's 429 hold); after a 429, :meth:`LimiterStage.hold` places the hold. Each question
is bounded by the attempt's timeout, and whatever a limiter raises (or a question that does
not answer in time) becomes a :class:`~asyncapi_client.LimiterError` naming the limiter, so
the retry loop treats a limiter that cannot be reached like a connection failure.

A limiter that learns (``learn`` True) is told what each answer's rate-limit headers say:
:meth:`LimiterStage.read` after an answer, :meth:`LimiterStage.failed` after an attempt
that failed (a 429 with ``Retry-After`` teaches nothing: its hold is the ``Retry-After``).
:meth:`LimiterStage.admit` returns when the attempt was let go, so the limiter can tell the
reservations made after it from those its answer already counts.
"""

from __future__ import annotations

import asyncio
import inspect
import time
import weakref
from collections.abc import Awaitable, Callable, Mapping
from collections.abc import Set as AbstractSet
from typing import TYPE_CHECKING, Any, Final, TypeVar

from ._errors import (
    ApiError,
    LimiterError,
    RateLimitError,
    RequestTimeoutError,
    StatusError,
    TransportError,
)
from ._learning import LOOKAHEAD, REMAINING_NAMES, Advertised, read_limits
from ._limiters import HOLD_RECHECK, PROBE_RECHECK, Admission, Limiter, LocalLimiter
from ._network import Network
from ._request import Call
from ._retry import mark_final

if TYPE_CHECKING:  # imported only when a client asks for telemetry
    from ._telemetry import Telemetry

__all__ = ["MAX_LATE", "LimiterStage"]

T = TypeVar("T")

#: The header of each family without which it is not read (its remaining).
_IETF, _SPLIT, _X = REMAINING_NAMES

#: Slots one attempt gives up for waking up later than the limiter's margin; then it goes
#: late (a process that is always late must not stop itself).
MAX_LATE: Final = 2


class LimiterStage:
    """Asks ``limiter`` before attempts and places its holds; each question bounded by
    ``timeout`` (the attempt's)."""

    __slots__ = (
        "_answered",
        "_keeps_retry_after",
        "_margin",
        "_max_wait",
        "_observe",
        "_quiet",
        "_sending",
        "_sends",
        "_telemetry",
        "can_learn",
        "free",
        "learns",
        "limiter",
        "timeout",
    )

    def __init__(
        self, limiter: Limiter, timeout: float, telemetry: Telemetry | None = None
    ) -> None:
        self.limiter = limiter
        self.timeout = timeout
        self._telemetry = telemetry
        margin = getattr(limiter, "margin", None)
        #: A slot reached later than this (s) is given up (None: never).
        self._margin: float | None = (
            float(margin)
            if isinstance(margin, int | float) and not isinstance(margin, bool) and margin > 0
            else None
        )
        #: Does the limiter keep the server's Retry-After with a hold (for its messages)?
        self._keeps_retry_after = _takes_retry_after(limiter.hold)
        #: The networks a first attempt needs no question for (a LocalLimiter's own set,
        #: read only here: no rate, no hold, nothing learned there); none for any other.
        self.free: AbstractSet[Network] = (
            limiter.free if type(limiter) is LocalLimiter else frozenset()
        )
        max_wait = getattr(limiter, "max_wait", None)
        #: A wait longer than this (s) is raised as a RateLimitError at once (None: waited).
        self._max_wait: float | None = (
            float(max_wait)
            if isinstance(max_wait, int | float) and not isinstance(max_wait, bool)
            else None
        )
        observe = getattr(limiter, "observe", None)
        #: Does the limiter learn from the answers' rate-limit headers?
        self.can_learn: bool = getattr(limiter, "learn", False) is True and callable(observe)
        #: Are the answers read for it now (not in testing mode)?
        self.learns = self.can_learn
        self._observe: Callable[[Network, Advertised | None, float, bool], object] | None = (
            observe if self.can_learn else None
        )
        #: Per network, the calls of this stage waiting for a first request's answer.
        self._answered: dict[Network, asyncio.Future[None]] = {}
        #: The tasks with an admitted attempt of a learning limiter not yet answered: a
        #: call such a task makes meanwhile (from a trace hook) would wait for itself.
        self._sending: weakref.WeakSet[asyncio.Task[Any]] = weakref.WeakSet()
        #: May ``_sending`` hold a task (a plain flag: a WeakSet's truth is Python code, and
        #: the hot path asks after every answer)?
        self._sends = False
        #: The networks a LocalLimiter learns nothing for (its own set, read only here).
        self._quiet = limiter.quiet if isinstance(limiter, LocalLimiter) else None

    def read(self, call: Call, headers: Mapping[str, str], sent: float) -> None:
        """Hand the limiter what an answer's rate-limit headers say (three lookups when
        there are none); ``sent``: when the attempt was let go (:meth:`admit`)."""
        if self._sends:
            self._answering()
        network = call.request.network
        if _IETF not in headers and _SPLIT not in headers and _X not in headers:
            quiet = self._quiet
            if quiet is not None and network in quiet:
                return  # no limit advertised on a network that never had one: nothing new
            limits = None
        else:
            limits = read_limits(headers)
        self._tell(network, limits, sent, True)

    def failed(self, call: Call, error: BaseException, sent: float) -> None:
        """After an attempt that failed: an error answer's headers are read as any answer's,
        but a 429's with ``Retry-After`` (its hold is that) and a cancel only end the wait
        for a first request's answer (the next request learns alone). A transport failure
        (no answer in the attempt timeout, a lost connection) ends that wait for everyone:
        there was nothing to learn, so calls to a silent server are not sent one by one."""
        if isinstance(error, StatusError) and not (
            isinstance(error, RateLimitError) and error.retry_after is not None
        ):
            self.read(call, error.headers, sent)
            return
        if self._sends:
            self._answering()
        self._tell(call.request.network, None, sent, isinstance(error, TransportError))

    def _tell(self, network: Network, limits: Advertised | None, sent: float, heard: bool) -> None:
        """The limiter learns from one answer (or failure); telemetry shows the limits read,
        and the calls of this stage waiting for an answer to ``network`` ask again."""
        assert self._observe is not None
        self._observe(network, limits, sent, heard)
        if limits is not None and self._telemetry is not None:
            self._telemetry.quota(network, limits.remaining, limits.limit)
        if self._answered:
            self._wake(network)

    def _sent(self, let_go: float) -> float:
        """``let_go``, once the current task is marked as sending an attempt (learning)."""
        if self.learns and (task := asyncio.current_task()) is not None:
            self._sending.add(task)
            self._sends = True
        return let_go

    def _answering(self) -> None:
        """The current task's attempt was answered or failed: it sends no more."""
        if (task := asyncio.current_task()) is not None:
            self._sending.discard(task)
        self._sends = bool(self._sending)

    def _wake(self, network: Network) -> None:
        waiting = self._answered.pop(network, None)
        if waiting is not None and not waiting.done():
            waiting.set_result(None)

    async def _await_answer(self, network: Network) -> None:
        """Wait until an answer to ``network`` is read by this stage, or at most
        :data:`PROBE_RECHECK` s (the answer may come to another client or process)."""
        waiting = self._answered.get(network)
        if waiting is None:
            waiting = self._answered[network] = asyncio.get_running_loop().create_future()
        try:
            async with asyncio.timeout(PROBE_RECHECK):
                await asyncio.shield(waiting)
        except TimeoutError:
            pass

    async def admit(self, call: Call, cap: float) -> float:
        """Wait until the limiter lets the next attempt of ``call`` go.

        A hold longer than ``cap`` (``retry_after_cap``) or a wait past the call's deadline
        is raised at once (final). After a wait, a 429 hold that appeared meanwhile forfeits
        the slot: ask again, so nothing is sent inside a hold nor in a burst when it ends.
        Inside a hold the limiter reserves nothing (``reserved`` False): ask again when it
        ends, or every :data:`HOLD_RECHECK` s, so a hold ended early (``clear_hold()``) lets
        the call go. A slot this process wakes up for more than the limiter's ``margin``
        late (it was not scheduled in time) is given up too, at most :data:`MAX_LATE` times
        a call: sent that late, it could land among the next window's requests. While a
        first request to the network is out to learn its limit, wait for an answer.

        Returns the reservation's ticket for the limiter's ``observe``: its start on the
        limiter's clock (``time.monotonic()`` when the limiter gives none).
        """
        request = call.request
        loop = asyncio.get_running_loop()
        late = 0  # slots given up for lateness
        while True:
            admission = await self.ask(
                call, self.limiter.acquire(request.operation, request.network)
            )
            answered = loop.time()
            ticket = admission.ticket
            let_go = time.monotonic() + admission.wait if ticket is None else ticket
            wait = admission.wait
            _refuse_past(call, admission, cap, loop.time(), self._max_wait)
            if admission.learning:  # ``wait``: the soonest a slot may open
                if await self._learning(request.network, wait):
                    return self._sent(let_go)
                continue
            if wait <= 0:
                return self._sent(let_go)
            if not admission.reserved:
                await asyncio.sleep(min(wait, HOLD_RECHECK))
                continue
            await asyncio.sleep(wait)
            if await self.ask(call, self.limiter.held(request.network)) > 0:
                continue
            if self._on_time(loop.time() - (answered + wait)) or late == MAX_LATE:
                return self._sent(let_go)
            late += 1

    async def _learning(self, network: Network, wait: float) -> bool:
        """Wait while the limiter awaits an answer to learn ``network``'s limit (``wait``:
        the soonest a slot may open); True: go now, for a call made inside its own task's
        attempt (a trace hook's), which would wait for itself."""
        if self._sends and asyncio.current_task() in self._sending:
            return True
        if wait > LOOKAHEAD:  # ask again when it is close enough to be reserved
            await asyncio.sleep(min(wait - LOOKAHEAD, HOLD_RECHECK))
            return False
        await self._await_answer(network)  # an answer may open it: ask again then
        return False

    def _on_time(self, lateness: float) -> bool:
        return self._margin is None or lateness <= self._margin

    async def hold(self, call: Call, network: Network, seconds: float, sent: str | None) -> None:
        """Hold ``network`` for ``seconds`` (a 429's); ``sent``: its ``Retry-After`` as sent,
        given to a limiter that keeps it for its messages."""
        place: Callable[..., Awaitable[None]] = self.limiter.hold
        placing = (
            place(network, seconds, retry_after=sent)
            if self._keeps_retry_after
            else place(network, seconds)
        )
        await self.ask(call, placing)

    async def ask(self, call: Call, question: Awaitable[T]) -> T:
        """One call to the limiter, bounded by the attempt's timeout; any failure of it
        becomes a LimiterError naming it (retried like a connection failure)."""
        request = call.request
        call.asking = True  # left True by a cancel (the deadline): its message says so
        try:
            async with asyncio.timeout(self.timeout) as scope:
                answer = await question
        except LimiterError as exc:
            call.asking = False
            exc.url, exc.network = request.url, request.network.value
            raise
        except Exception as exc:
            call.asking = False
            if isinstance(exc, TimeoutError) and scope.expired():
                why = f"did not answer within {self.timeout:g}s"
            else:
                why = f"failed: {type(exc).__name__}: {exc}"
            raise LimiterError(
                f"the limiter {self.limiter!r} {why}",
                limiter=repr(self.limiter),
                url=request.url,
                network=request.network.value,
            ) from exc
        call.asking = False
        return answer

    def trouble(self, call: Call) -> str:
        """What a deadline's message adds when the limiter is why: the question in flight,
        and the text of the limiter's last failure (not only in ``__cause__``)."""
        said = f", waiting for the limiter {self.limiter!r} to answer" if call.asking else ""
        failed = call.failed
        if isinstance(failed, LimiterError):
            who = "" if failed.limiter in failed.message else f" {failed.limiter}"
            said += f"; the limiter{who} could not be reached: {failed.message}"
        return said


def _refuse_past(
    call: Call, admission: Admission, cap: float, now: float, max_wait: float | None
) -> None:
    """Raise (final) when ``admission`` holds longer than ``cap``, waits longer than the
    limiter's ``max_wait`` or past the call's deadline."""
    request = call.request
    held = admission.held
    error: ApiError
    if held > cap:
        error = RateLimitError(
            f"HTTP 429 earlier: {_hold_text(admission)} runs {held:.3g}s more on this "
            f"network, longer than retry_after_cap={cap:g}s",
            status=429,
            url=request.url,
            network=request.network.value,
            retry_after=held,
        )
        raise _refused(error, call)
    wait = admission.wait
    if max_wait is not None and wait > max_wait:
        what = _hold_text(admission) if held > 0 else "the limiter's next slot"
        error = RateLimitError(
            f"the request would wait {wait:.3g}s for {what}, longer than max_wait={max_wait:g}s",
            status=429,
            url=request.url,
            network=request.network.value,
            retry_after=wait,
        )
        raise _refused(error, call)
    if wait > 0 and call.expires is not None and now + wait >= call.expires:
        what = _hold_text(admission) if held > 0 else "the limiter's rate limit"
        error = RequestTimeoutError(
            f"the deadline would pass during the {wait:.3g}s wait for {what}",
            url=request.url,
            network=request.network.value,
        )
        error._own_deadline = True
        raise _refused(error, call)


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


def _hold_text(admission: Admission) -> str:
    """The hold, and the wait the server asked for as it sent it, for messages."""
    sent = admission.retry_after
    return f"a 429 hold (the server sent Retry-After: {sent})" if sent else "a 429 hold"


def _refused(error: ApiError, call: Call) -> ApiError:
    """An error of the limiter's answer (a hold past the cap, the deadline): final."""
    error.attempts = call.attempts
    error.__cause__ = call.failed
    return mark_final(error)
