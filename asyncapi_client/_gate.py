"""The limiter stage of the pipeline: every question the pipeline asks a limiter.

Before an attempt, :meth:`LimiterStage.admit` waits until the limiter lets it go (its rates,
a network's 429 hold); after a 429, :meth:`LimiterStage.hold` places the hold. Each question
is bounded by the attempt's timeout, and whatever a limiter raises (or a question that does
not answer in time) becomes a :class:`~asyncapi_client.LimiterError` naming the limiter, so
the retry loop treats a limiter that cannot be reached like a connection failure.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable
from typing import Final, TypeVar

from ._errors import ApiError, LimiterError, RateLimitError, RequestTimeoutError
from ._limiters import HOLD_RECHECK, Admission, Limiter, LocalLimiter
from ._network import Network
from ._request import Call
from ._retry import mark_final

__all__ = ["MAX_LATE", "LimiterStage"]

T = TypeVar("T")

#: Slots one attempt gives up for waking up later than the limiter's margin; then it goes
#: late (a process that is always late must not stop itself).
MAX_LATE: Final = 2


class LimiterStage:
    """Asks ``limiter`` before attempts and places its holds; each question bounded by
    ``timeout`` (the attempt's)."""

    __slots__ = ("_idle_local", "_keeps_retry_after", "_margin", "limiter", "timeout")

    def __init__(self, limiter: Limiter, timeout: float) -> None:
        self.limiter = limiter
        self.timeout = timeout
        margin = getattr(limiter, "margin", None)
        #: A slot reached later than this (s) is given up (None: never).
        self._margin: float | None = (
            float(margin)
            if isinstance(margin, int | float) and not isinstance(margin, bool) and margin > 0
            else None
        )
        #: Does the limiter keep the server's Retry-After with a hold (for its messages)?
        self._keeps_retry_after = _takes_retry_after(limiter.hold)
        #: A LocalLimiter without rates (the default) is not asked before a first attempt
        #: unless a hold was placed (its rates are fixed when it is made).
        self._idle_local = limiter if type(limiter) is LocalLimiter and not limiter.rates else None

    def needed(self, call: Call) -> bool:
        """Whether the next attempt of ``call`` asks the limiter first (always, but for the
        first attempt with the idle default limiter)."""
        local = self._idle_local
        return call.failed is not None or local is None or not local.idle

    async def admit(self, call: Call, cap: float) -> None:
        """Wait until the limiter lets the next attempt of ``call`` go.

        A hold longer than ``cap`` (``retry_after_cap``) or a wait past the call's deadline
        is raised at once (final). After a wait, a 429 hold that appeared meanwhile forfeits
        the slot: ask again, so nothing is sent inside a hold nor in a burst when it ends.
        Inside a hold the limiter reserves nothing (``reserved`` False): ask again when it
        ends, or every :data:`HOLD_RECHECK` s, so a hold ended early (``clear_hold()``) lets
        the call go. A slot this process wakes up for more than the limiter's ``margin``
        late (it was not scheduled in time) is given up too, at most :data:`MAX_LATE` times
        a call: sent that late, it could land among the next window's requests.
        """
        request = call.request
        loop = asyncio.get_running_loop()
        late = 0  # slots given up for lateness
        while True:
            admission = await self.ask(
                call, self.limiter.acquire(request.operation, request.network)
            )
            answered = loop.time()
            _refuse_past(call, admission, cap, loop.time())
            wait = admission.wait
            if wait <= 0:
                return
            if not admission.reserved:
                await asyncio.sleep(min(wait, HOLD_RECHECK))
                continue
            await asyncio.sleep(wait)
            if await self.ask(call, self.limiter.held(request.network)) > 0:
                continue
            if self._on_time(loop.time() - (answered + wait)) or late == MAX_LATE:
                return
            late += 1

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


def _refuse_past(call: Call, admission: Admission, cap: float, now: float) -> None:
    """Raise (final) when ``admission`` holds longer than ``cap`` or waits past the call's
    deadline."""
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
