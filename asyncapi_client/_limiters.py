"""Rate limits and the shared 429 hold: what the session layer asks before every attempt.

A limiter answers one question per attempt, retries included: *when may this request be
sent?* It reserves the request's slots in every rate at once and returns the wait; the
caller sleeps that wait (the limiter never sleeps and never polls). A 429 puts a *hold*
on its network: every request of every client sharing the limiter waits it out, and
slots are reserved after the hold, so the requests held back do not all fire when it ends.

The reservation rule is the same for every limiter (:class:`LocalLimiter` here,
``asyncapi_client.fleet.RedisLimiter`` for a fleet): reservations are first come, first
served, and a request may start at the earliest time ``s`` that is not before now, not
before the network's hold ends, not before the previous reservation, and at which, for
every ``Rate(count, seconds)``, the window ``(s - seconds, s]`` holds at most ``count``
slots including its own. So at most ``count`` requests start in any window of ``seconds``.
"""

from __future__ import annotations

import math
import threading
import time
from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final, Protocol, runtime_checkable

import attrs

from ._network import Network
from ._operations import OPERATIONS as _ENDPOINT_NAMES
from ._operations import OperationName

__all__ = [
    "MAX_HOLD",
    "OPERATIONS",
    "Admission",
    "Limiter",
    "LocalLimiter",
    "OperationName",
    "Rate",
    "check_rates",
    "check_weights",
    "earliest_start",
]

#: The operation names a limiter sees (and ``weights`` may name): the endpoints table's.
OPERATIONS: Final[frozenset[str]] = frozenset(_ENDPOINT_NAMES)

#: The longest 429 hold any limiter stores (s): one day. A server's ``Retry-After`` of years
#: must not lock every client (and, in Redis, a whole fleet across restarts) out for years.
MAX_HOLD: Final = 86_400.0


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
    is past its ``retry_after_cap`` or ``wait`` past its deadline.
    """

    wait: float
    held: float = 0.0


@runtime_checkable
class Limiter(Protocol):
    """What the session layer asks before every attempt; implement it to share a quota.

    Methods raise :class:`~asyncapi_client.LimiterError` when the limiter's shared state
    cannot be reached; the caller bounds each call by the attempt's ``timeout``.
    """

    async def acquire(self, operation: str, network: Network) -> Admission:
        """Reserve the slots one request of ``operation`` takes on ``network``."""
        ...

    async def held(self, network: Network) -> float:
        """Seconds the 429 hold on ``network`` still runs (0.0: none)."""
        ...

    async def hold(self, network: Network, seconds: float) -> None:
        """Hold every request to ``network`` for ``seconds`` (a 429 asked for that wait;
        the client never asks for more than :data:`MAX_HOLD`)."""
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


def earliest_start(
    now: float,
    hold_until: float,
    last: float,
    rates: Sequence[Rate],
    starts: Sequence[Sequence[float]],
    weight: int,
) -> float:
    """The earliest start for a request of ``weight`` slots (the rule in the module docs).

    ``starts[i]`` holds the reserved start times of ``rates[i]``, oldest first (only the
    newest ``count`` matter). Pure: the same arithmetic backs every limiter's tests.
    """
    start = max(now, hold_until, last)
    for rate, times in zip(rates, starts, strict=True):
        room = rate.count - weight  # slots of others the window may still hold
        if len(times) > room:
            # The (room + 1)-th newest start must have left the window (s - seconds, s].
            start = max(start, times[len(times) - room - 1] + rate.seconds)
    return start


class _NetworkState:
    __slots__ = ("hold_until", "last", "starts")

    def __init__(self, rates: Sequence[Rate]) -> None:
        self.hold_until = -math.inf
        self.last = -math.inf
        self.starts: list[deque[float]] = [deque(maxlen=rate.count) for rate in rates]


class LocalLimiter:
    """The rates and the 429 hold for the clients of one process (the default limiter).

    Quotas are kept per network (each network is its own API host). Safe to share between
    clients, event loops and threads of one process; it has no task and nothing to close.
    ``rates`` and ``weights`` (the slots an operation takes; 1 where not named) are the ones
    it was made with.
    """

    def __init__(
        self,
        rates: Iterable[Rate] = (),
        weights: Mapping[OperationName, int] | None = None,
    ) -> None:
        self.rates: tuple[Rate, ...] = check_rates(rates)
        self.weights: Mapping[str, int] = check_weights(weights, self.rates)
        self._networks: dict[Network, _NetworkState] = {}
        self._holds_end = -math.inf  # when the last of the networks' holds ends
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"LocalLimiter(rates={list(self.rates)!r}, weights={dict(self.weights)!r})"

    @property
    def idle(self) -> bool:
        """True when no rate is set and no hold is in force: acquire() would say "go now"."""
        # One comparison (the hot path asks before every first attempt): the latest end of
        # any network's hold, kept by hold(); no clock read while none was ever placed.
        holds_end = self._holds_end
        return not self.rates and (holds_end == -math.inf or holds_end <= time.monotonic())

    def _state(self, network: Network) -> _NetworkState:
        state = self._networks.get(network)
        if state is None:
            state = self._networks[network] = _NetworkState(self.rates)
        return state

    def reserve(self, operation: str, network: Network) -> Admission:
        """The synchronous core of :meth:`acquire` (no I/O, so no await is needed)."""
        weight = self.weights.get(operation, 1)
        now = time.monotonic()
        with self._lock:
            state = self._state(network)
            start = earliest_start(
                now, state.hold_until, state.last, self.rates, state.starts, weight
            )
            if self.rates:
                state.last = start
                for times in state.starts:
                    times.extend([start] * weight)
            held = state.hold_until - now
        return Admission(wait=start - now, held=held if held > 0 else 0.0)

    async def acquire(self, operation: str, network: Network) -> Admission:
        """Reserve the slots one request of ``operation`` takes on ``network``."""
        return self.reserve(operation, network)

    async def held(self, network: Network) -> float:
        """Seconds the 429 hold on ``network`` still runs (0.0: none)."""
        state = self._networks.get(network)
        if state is None:
            return 0.0
        left = state.hold_until - time.monotonic()
        return left if left > 0 else 0.0

    async def hold(self, network: Network, seconds: float) -> None:
        """Hold every request to ``network`` for ``seconds``, at most :data:`MAX_HOLD`
        (never shortens a hold)."""
        until = time.monotonic() + min(seconds, MAX_HOLD)
        with self._lock:
            state = self._state(network)
            if until > state.hold_until:
                state.hold_until = until
            if until > self._holds_end:
                self._holds_end = until
