"""Rate limits and the shared 429 hold: what the session layer asks before every attempt.

A limiter answers one question per attempt, retries included: *when may this request be
sent?* It reserves the request's slots in every rate at once and returns the wait; the
caller sleeps that wait (the limiter never sleeps). A 429 puts a *hold* on its network:
while it runs, the limiter reserves nothing and answers "ask again after the hold"; the
caller asks again then (or every :data:`HOLD_RECHECK` seconds, so that
:meth:`LocalLimiter.clear_hold` releases it), and the slots it then gets follow the
rates, so the requests held back do not all fire when the hold ends.

The reservation rule is the same for every limiter (:class:`LocalLimiter` here,
``asyncapi_client.fleet.RedisLimiter`` for a fleet): reservations are first come, first
served, and a request may start at the earliest time ``s`` that is not before now, not
before the previous reservation's pacing point, and at which, for every
``Rate(count, seconds)``, the window ``(s - seconds - margin, s]`` holds at most ``count``
slots including its own. The pacing point of a reservation of ``w`` slots is its start
plus ``w * margin / c`` (``c``: the smallest count), so a full window's worth of slots is
let go over ``margin`` seconds rather than in one instant.

Why the margin: the server counts a request when it *arrives*, some jitter after the
limiter let it go (waking up, a first connection, a busy machine). Two slots ``count``
reservations apart are at least ``seconds + margin`` apart, so as long as that jitter stays
under ``margin`` they arrive more than ``seconds`` apart: a server counting any window of
``seconds`` sees at most ``count``. The price: a busy client gets ``count`` requests per
``seconds + margin``, not per ``seconds``.
"""

from __future__ import annotations

import asyncio
import math
import os
import threading
import time
import weakref
from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final, Literal, Protocol, runtime_checkable

import attrs

from ._learning import Advertised, Learned
from ._network import Network, parse_network
from ._operations import OPERATIONS as _ENDPOINT_NAMES
from ._operations import OperationName
from ._types import NetworkName

__all__ = [
    "DEFAULT_MARGIN",
    "HOLD_RECHECK",
    "LOST",
    "MAX_HOLD",
    "OPERATIONS",
    "Admission",
    "LimitStatus",
    "Limiter",
    "LocalLimiter",
    "OperationName",
    "Rate",
    "check_learn",
    "check_margin",
    "check_max_wait",
    "check_rates",
    "check_weights",
    "earliest_start",
    "pacing",
    "shown_retry_after",
    "tighter",
]

#: The operation names a limiter sees (and ``weights`` may name): the endpoints table's.
OPERATIONS: Final[frozenset[str]] = frozenset(_ENDPOINT_NAMES)

#: The longest 429 hold any limiter stores (s): one day. The client holds at most its
#: ``retry_after_cap``; this bounds what any caller of ``hold()`` can lock a fleet out for.
MAX_HOLD: Final = 86_400.0
#: The jitter (s) a limiter leaves room for between its answer and the request's arrival.
DEFAULT_MARGIN: Final = 0.05
#: While a 429 hold runs, a waiting request asks the limiter again this often (s), so that
#: a hold ended early (``clear_hold()``) releases it within this time.
HOLD_RECHECK: Final = 1.0
#: What a limiter's held() answers (s) to a task whose reservation is not to be used: a
#: moment's hold, so the caller asks for a slot again.
LOST: Final = 1e-6
#: While a first request to a network is out to learn its limit, a waiting request asks the
#: limiter again this often (s) when nothing wakes it sooner (its own client's answer does).
PROBE_RECHECK: Final = 0.05
#: How much of a server's ``Retry-After`` a limiter keeps to show in messages.
_RETRY_AFTER_CHARS: Final = 64


def _positive_count(instance: object, attribute: object, value: Any) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
        raise ValueError(f"Rate.count must be a positive int, got {value!r}")


def _positive_seconds(value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value < math.inf:
        raise ValueError(f"Rate.seconds must be a positive, finite number, got {value!r}")
    return float(value)


@attrs.frozen(slots=True)
class Rate:
    """At most ``count`` requests start in any window of ``seconds`` (e.g. ``Rate(20, 1.0)``)."""

    count: int = attrs.field(validator=_positive_count)
    seconds: float = attrs.field(converter=_positive_seconds)


@attrs.frozen(slots=True)
class Admission:
    """A limiter's answer: ``wait`` seconds until the attempt may be sent (0.0: now).

    ``held`` is how long the network's 429 hold still runs at the time of the answer (0.0:
    no hold); ``wait`` is never shorter. The caller raises instead of waiting when ``held``
    is past its ``retry_after_cap`` or ``wait`` past its deadline or the limiter's
    ``max_wait``. ``reserved`` False: the limiter reserved nothing (a hold is on, or the wait
    is past its ``max_wait``), so the caller asks again after ``wait``, or sooner.
    ``retry_after``: the ``Retry-After`` the server sent with the 429 that placed the hold,
    as sent (None: not known), for the caller's messages. ``learning`` True: nothing was
    reserved because an answer is awaited to learn the network's limit (a first
    request's, or one from the next window); ask again once one is read (``wait``: the
    soonest a slot may open). ``ticket``: the reservation's start on the limiter's own
    clock, handed back to its ``observe`` with the answer (None: the caller's
    ``time.monotonic()`` then).
    """

    wait: float
    held: float = 0.0
    reserved: bool = True
    retry_after: str | None = None
    learning: bool = False
    ticket: float | None = attrs.field(default=None, eq=False)


@attrs.frozen(slots=True)
class LimitStatus:
    """What a limiter knows of one network's limit (``await limiter.status(network)``).

    ``limit`` requests per window, ``remaining`` that may still start, ``reset`` seconds
    from now until the window ends; ``source`` says where that comes from: ``"headers"``
    (learned from the server's answers), ``"rates"`` (the tightest configured rate, its
    ``count`` as ``limit``), or None when nothing is known (every field None). When both
    are known, the tighter (fewer remaining) is shown.
    """

    limit: int | None = None
    remaining: int | None = None
    reset: float | None = None
    source: Literal["headers", "rates"] | None = None


@runtime_checkable
class Limiter(Protocol):
    """What the session layer asks before every attempt; implement it to share a quota.

    Methods raise :class:`~asyncapi_client.LimiterError` when the limiter's shared state
    cannot be reached; the caller bounds each call by the attempt's ``timeout``. A client
    calls ``acquire``, ``held`` and ``hold`` only: a limiter written before ``clear_hold``
    existed still works. A ``hold`` that also takes ``retry_after=`` (a str or None) is
    handed the server's header, as sent, to show in the messages of the requests it holds.
    A ``margin`` attribute (seconds > 0) has the client give up a slot it woke up for more
    than that late, and ask again. A ``max_wait`` attribute (seconds, None: no bound) has
    the client raise ``RateLimitError`` instead of waiting longer. A limiter whose ``learn``
    attribute is True is handed what every answer's rate-limit headers say through
    ``observe(network, limits, sent, heard)`` (see :class:`LocalLimiter`).
    """

    async def acquire(self, operation: str, network: Network) -> Admission:
        """Reserve the slots one request of ``operation`` takes on ``network``."""
        ...

    async def held(self, network: Network) -> float:
        """Seconds the 429 hold on ``network`` still runs (0.0: none)."""
        ...

    async def hold(self, network: Network, seconds: float) -> None:
        """Hold every request to ``network`` for ``seconds`` (a 429 asked for that wait;
        the client never asks for more than its ``retry_after_cap``)."""
        ...

    async def clear_hold(self, network: Network | NetworkName | None = None) -> None:
        """End the 429 hold on ``network`` (None: on every network) at once."""
        ...


def check_weights(weights: object, rates: Sequence[Rate]) -> dict[str, int]:
    """Validate ``weights`` (operation name -> slots, each >= 1 and <= every rate's count)."""
    if weights is None:
        return {}
    if not isinstance(weights, Mapping):
        raise ValueError("weights must map operation names to positive ints")
    smallest = min((rate.count for rate in rates), default=None)
    checked: dict[str, int] = {}
    for operation, weight in weights.items():
        if not isinstance(operation, str) or operation not in OPERATIONS:
            known = ", ".join(sorted(OPERATIONS))
            raise ValueError(f"weights names unknown operation {operation!r}: expected {known}")
        if not isinstance(weight, int) or isinstance(weight, bool) or weight <= 0:
            raise ValueError(f"the weight of {operation!r} must be a positive int, got {weight!r}")
        if smallest is not None and weight > smallest:
            raise ValueError(
                f"the weight of {operation!r} is {weight}, more than the smallest rate's "
                f"count {smallest}: such a request could never start"
            )
        checked[operation] = weight
    return checked


def check_rates(rates: Iterable[Rate]) -> tuple[Rate, ...]:
    """The rates as a tuple; anything but :class:`Rate` instances is a ValueError."""
    if isinstance(rates, Rate):
        return (rates,)
    checked = tuple(rates)
    for rate in checked:
        if not isinstance(rate, Rate):
            raise ValueError(f"rates must be Rate(count, seconds) values, got {rate!r}")
    return checked


def check_learn(learn: object) -> bool:
    """``learn`` as a bool; anything else is a TypeError."""
    if not isinstance(learn, bool):
        raise TypeError(f"learn must be True or False, got {learn!r}")
    return learn


def check_max_wait(max_wait: object) -> float | None:
    """``max_wait`` as a float (seconds, finite and >= 0) or None (no bound)."""
    if max_wait is None:
        return None
    if (
        isinstance(max_wait, bool)
        or not isinstance(max_wait, int | float)
        or not 0.0 <= max_wait < math.inf
    ):
        raise ValueError(
            f"max_wait must be None or a finite number of seconds >= 0, got {max_wait!r}"
        )
    return float(max_wait)


def tighter(first: LimitStatus, second: LimitStatus) -> LimitStatus:
    """Of two known statuses, the one with fewer remaining (then the later reset)."""
    if first.source is None:
        return second
    if second.source is None:
        return first
    key_first = (first.remaining or 0, -(first.reset or 0.0))
    key_second = (second.remaining or 0, -(second.reset or 0.0))
    return second if key_second < key_first else first


def rates_status(
    now: float, rates: Sequence[Rate], starts: Sequence[Sequence[float]], margin: float
) -> LimitStatus:
    """The tightest rate's status: ``count`` as the limit, the slots left in the window
    that ends at ``now`` (reservations ahead count), the seconds until it is full again."""
    best = LimitStatus()
    for rate, times in zip(rates, starts, strict=True):
        inside = [start for start in times if start > now - rate.seconds - margin]
        reset = max(0.0, max(inside) + rate.seconds + margin - now) if inside else 0.0
        status = LimitStatus(rate.count, max(0, rate.count - len(inside)), reset, "rates")
        best = tighter(best, status)
    return best


def check_margin(margin: object) -> float:
    """``margin`` as a float: seconds, finite and >= 0 (0: the rates on the limiter's clock)."""
    if (
        isinstance(margin, bool)
        or not isinstance(margin, int | float)
        or not 0.0 <= margin < math.inf
    ):
        raise ValueError(f"margin must be a finite number of seconds >= 0, got {margin!r}")
    return float(margin)


def pacing(rates: Sequence[Rate], margin: float) -> float:
    """Seconds between two slots let go one after the other: a window's worth of the
    smallest rate over ``margin`` (0.0 without rates or margin)."""
    smallest = min((rate.count for rate in rates), default=0)
    return margin / smallest if smallest else 0.0


def shown_retry_after(value: object) -> str | None:
    """A server's ``Retry-After`` as sent, made safe to show: at most 64 characters,
    control characters replaced (None for anything but a non-empty str)."""
    if not isinstance(value, str):
        return None
    value = value.strip()
    if not value:
        return None
    shown = "".join(c if c.isprintable() else "?" for c in value[:_RETRY_AFTER_CHARS])
    return shown + "…" if len(value) > _RETRY_AFTER_CHARS else shown


def earliest_start(
    now: float,
    last: float,
    rates: Sequence[Rate],
    starts: Sequence[Sequence[float]],
    weight: int,
    margin: float = 0.0,
) -> float:
    """The earliest start for a request of ``weight`` slots (the rule in the module docs).

    ``last`` is the previous reservation's pacing point; ``starts[i]`` holds the reserved
    start times of ``rates[i]``, oldest first (only the newest ``count`` matter). Pure: the
    same arithmetic backs every limiter's tests.
    """
    start = max(now, last)
    for rate, times in zip(rates, starts, strict=True):
        room = rate.count - weight  # slots of others the window may still hold
        if len(times) > room:
            # The (room + 1)-th newest start must have left (s - seconds - margin, s].
            start = max(start, times[len(times) - room - 1] + rate.seconds + margin)
    return start


class _NetworkState:
    __slots__ = ("hold_until", "last", "learned", "retry_after", "starts")

    def __init__(self, rates: Sequence[Rate], heard: bool = False) -> None:
        self.hold_until = -math.inf
        self.retry_after: str | None = None
        self.last = -math.inf
        self.starts: list[deque[float]] = [deque(maxlen=rate.count) for rate in rates]
        self.learned = Learned(rated=bool(rates), heard=heard)


#: Every LocalLimiter of the process, so that a forked child can renew their locks.
_every: weakref.WeakSet[LocalLimiter] = weakref.WeakSet()


def unlimited_until_told() -> LocalLimiter:
    """A ``Client``'s own limiter when it was given no rate: it keeps the 429 hold and
    learns the limits the answers advertise, but, unlimited until one does, it lets the
    first requests to a network go together (no request waits for a first one's answer
    until a limit was heard of; a fan-out at start is not made one by one)."""
    limiter = LocalLimiter()
    limiter._unlimited_first = True
    limiter.quiet.update(Network)
    limiter.free.update(Network)
    return limiter


def _after_fork_in_child() -> None:
    """A fork may land while another thread holds a limiter's lock (a SyncClient's loop
    asking for a slot); no thread of the child will release it: each gets a new one."""
    for limiter in list(_every):
        limiter._lock = threading.Lock()


if hasattr(os, "register_at_fork"):  # POSIX; elsewhere there is no fork
    os.register_at_fork(after_in_child=_after_fork_in_child)


class LocalLimiter:
    """The rates and the 429 hold for the clients of one process (the default limiter).

    Quotas are kept per network (each network is its own API host). Safe to share between
    clients, event loops and threads of one process; it has no task and nothing to close.
    A child process forked from it starts with a copy of its counts, its own from then on.
    ``rates`` and ``weights`` (the slots an operation takes; 1 where not named) are the ones
    it was made with.

    Learning (``learn=True``): the rate-limit headers of every answer the client reads are
    handed to :meth:`observe`; the limiter then spaces the requests of that network so
    what remains lasts until the reset, holds them at zero remaining until it, and, while
    nothing was heard from a network, lets one request go and the others wait for its
    answer. What it learns only tightens ``rates``.

    Args:
        rates: the :class:`Rate` values every request counts against (``[]``: none; with
            ``learn`` the limiter follows what the server advertises only).
        weights: slots one request of an operation takes (default 1), e.g. ``{"orders": 2}``.
        margin: seconds of jitter between the limiter's answer and the request's arrival at
            the server that the rates leave room for (see the module docs); 0 keeps the
            rates exactly on the limiter's own clock.
        learn: follow the limits the server's rate-limit headers advertise.
        max_wait: seconds; a request that would wait longer for a slot or a hold raises
            ``RateLimitError`` at once instead (None: it waits).
    """

    def __init__(
        self,
        rates: Iterable[Rate] = (),
        *,
        weights: Mapping[OperationName, int] | None = None,
        margin: float = DEFAULT_MARGIN,
        learn: bool = True,
        max_wait: float | None = None,
    ) -> None:
        self.rates: tuple[Rate, ...] = check_rates(rates)
        self.weights: Mapping[str, int] = check_weights(weights, self.rates)
        self.margin: float = check_margin(margin)
        self.learn: bool = check_learn(learn)
        self.max_wait: float | None = check_max_wait(max_wait)
        self._pacing = pacing(self.rates, self.margin)
        self._networks: dict[Network, _NetworkState] = {}
        self._holds_end = -math.inf  # when the last of the networks' holds ends
        #: Unlimited until an answer advertises a limit: no first request waits alone
        #: (a Client's own limiter without rate_limit=; see unlimited_until_told()).
        self._unlimited_first = False
        #: The networks nothing is learned for (all when not learning; else those whose
        #: answers carried no limit): with no rate and no hold, they need no question, and
        #: an answer without limit headers tells nothing new (read, never changed, by the
        #: limiter stage).
        self.quiet: set[Network] = set() if self.learn else set(Network)
        #: The networks a first attempt needs no question for: no rate, no hold, quiet. The
        #: limiter stage reads it before every first attempt (one set lookup); a network
        #: leaves it when a hold is placed or a limit is heard of, and comes back at the next
        #: question that finds it quiet and free (a hold ends without anyone being told).
        self.free: set[Network] = set() if self.rates else set(self.quiet)
        #: Per task waiting for its reservation: the network and the learning it was made
        #: under (see held()).
        self._granted: weakref.WeakKeyDictionary[asyncio.Task[Any], tuple[Network, int]] = (
            weakref.WeakKeyDictionary()
        )
        self._lock = threading.Lock()
        _every.add(self)

    def __repr__(self) -> str:
        extra = "" if self.learn else ", learn=False"
        if self.max_wait is not None:
            extra += f", max_wait={self.max_wait!r}"
        return (
            f"LocalLimiter(rates={list(self.rates)!r}, weights={dict(self.weights)!r}, "
            f"margin={self.margin!r}{extra})"
        )

    @property
    def idle(self) -> bool:
        """True when no rate is set, no hold is in force and nothing is to be learned on
        any network: acquire() would say "go now"."""
        return len(self.quiet) == len(Network) and self._unlimited()

    def _unlimited(self) -> bool:
        # One comparison (the hot path asks before every first attempt): the latest end of
        # any network's hold, kept by hold(); no clock read while none was ever placed.
        holds_end = self._holds_end
        return not self.rates and (holds_end == -math.inf or holds_end <= time.monotonic())

    def _free_again(self, network: Network, state: _NetworkState, now: float) -> None:
        """Back in ``free`` when nothing asks for a question: no rate, quiet, no hold at
        ``now`` (called under the lock, when one of those may have just become true)."""
        if not self.rates and network in self.quiet and state.hold_until <= now:
            self.free.add(network)

    def _state(self, network: Network) -> _NetworkState:
        state = self._networks.get(network)
        if state is None:
            state = self._networks[network] = _NetworkState(self.rates, self._unlimited_first)
        return state

    def reserve(self, operation: str, network: Network) -> Admission:
        """The synchronous core of :meth:`acquire` (no I/O, so no await is needed)."""
        weight = self.weights.get(operation, 1)
        now = time.monotonic()
        with self._lock:
            state = self._state(network)
            held = state.hold_until - now
            if held > 0:  # nothing is reserved inside a hold: ask again when it ends
                return Admission(
                    wait=held, held=held, reserved=False, retry_after=state.retry_after
                )
            if not self.rates and network in self.quiet:
                self._free_again(network, state, now)  # no question next time
                return Admission(wait=0.0)
            start, allowed = self._start(state, now, weight)
            if not allowed:  # an answer is awaited: a first request's, or a later window's
                return Admission(wait=start - now, reserved=False, learning=True)
            if self.max_wait is not None and start - now > self.max_wait:
                return Admission(wait=start - now, reserved=False)  # raised, not waited
            if self.learn:
                state.learned.book(start)
                if start > now:  # it waits, then asks held() before it is sent
                    self._remember(network, state.learned.generation)
            if self.rates:
                state.last = start + weight * self._pacing
                for times in state.starts:
                    times.extend([start] * weight)
        return Admission(wait=start - now, ticket=start if self.learn else None)

    def _start(self, state: _NetworkState, now: float, weight: int) -> tuple[float, bool]:
        """The earliest start both the rates and what was learned allow, and True; or the
        soonest one may be allowed, and False (wait for an answer)."""
        start = now
        for _ in range(4):  # each only moves it later; it settles in a step or two
            if self.learn:
                start, allowed = state.learned.start(start, now)
                if not allowed:
                    return start, False
            if not self.rates:
                return start, True
            ruled = earliest_start(start, state.last, self.rates, state.starts, weight, self.margin)
            if ruled == start or not self.learn:
                return ruled, True
            start = ruled
        return start, True

    def _remember(self, network: Network, generation: int) -> None:
        """Which learning the current task's reservation was made under (see held())."""
        try:
            task = asyncio.current_task()
        except RuntimeError:  # no running loop: reserve() called directly
            return
        if task is not None:
            self._granted[task] = (network, generation)

    async def acquire(self, operation: str, network: Network) -> Admission:
        """Reserve the slots one request of ``operation`` takes on ``network``."""
        return self.reserve(operation, network)

    def observe(
        self, network: Network, limits: Advertised | None, sent: float, heard: bool = True
    ) -> None:
        """Learn from an answer to ``network`` (a request let go at ``sent``, on
        ``time.monotonic()``): ``limits``, its rate-limit headers as read (None: none
        usable); ``heard`` False when there was no answer to learn from (a failure, a 429
        with ``Retry-After``). Any of them ends the wait for a first request's answer."""
        if limits is None and network in self.quiet:
            return  # the hot path of an API without limit headers: nothing to do
        if not self.learn:
            return
        now = time.monotonic()
        with self._lock:
            state = self._state(network)
            learned = state.learned
            learned.observe(limits, sent, now, heard)
            if learned.limited:
                self.quiet.discard(network)
                self.free.discard(network)
            elif learned.heard:
                self.quiet.add(network)
                self._free_again(network, state, now)

    async def status(self, network: Network | NetworkName) -> LimitStatus:
        """What is known of ``network``'s limit now (a :class:`Network` or its name)."""
        network = parse_network(network)
        now = time.monotonic()
        with self._lock:
            state = self._networks.get(network)
            if state is None:
                return LimitStatus()
            shown = rates_status(now, self.rates, state.starts, self.margin)
            learned = state.learned.status(now)
        if learned is not None:
            limit, remaining, reset = learned
            shown = tighter(shown, LimitStatus(limit, remaining, reset, "headers"))
        return shown

    async def held(self, network: Network) -> float:
        """Seconds the 429 hold on ``network`` still runs (0.0: none).

        Asked by the task that waited for a reservation, just before it sends: :data:`LOST`
        when what the limiter learned proved wrong meanwhile (a 429, a lower limit), so
        that the task asks for a slot again rather than use one booked on it."""
        state = self._networks.get(network)
        if state is None:
            return 0.0
        task = asyncio.current_task()
        with self._lock:
            granted = None if task is None else self._granted.pop(task, None)
        left = state.hold_until - time.monotonic()
        if left > 0:
            return left
        if granted is not None and granted != (network, state.learned.generation):
            return LOST
        return 0.0

    async def hold(self, network: Network, seconds: float, retry_after: str | None = None) -> None:
        """Hold every request to ``network`` for ``seconds``, at most :data:`MAX_HOLD`
        (never shortens a hold); ``retry_after``: the server's header, for messages."""
        now = time.monotonic()
        until = now + min(seconds, MAX_HOLD)
        with self._lock:
            state = self._state(network)
            if self.learn and state.learned.limited:
                state.learned.refused(now, until)  # what was learned let a 429 through
            if until > state.hold_until:
                state.hold_until = until
                state.retry_after = shown_retry_after(retry_after)
            self.free.discard(network)
            if until > self._holds_end:
                self._holds_end = until

    async def clear_hold(self, network: Network | NetworkName | None = None) -> None:
        """End the 429 hold on ``network`` (a :class:`Network` or its name; None: every
        network) at once. Requests already waiting on it go within :data:`HOLD_RECHECK` s."""
        only = None if network is None else parse_network(network)
        now = time.monotonic()
        with self._lock:
            for name, state in self._networks.items():
                if only is None or name is only:
                    state.hold_until = -math.inf
                    state.retry_after = None
                    self._free_again(name, state, now)
            self._holds_end = max(
                (state.hold_until for state in self._networks.values()), default=-math.inf
            )
