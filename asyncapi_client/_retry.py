"""When to retry, and how long to wait first: a pure decision, and the event hooks see.

:func:`decide` is a pure function of the policy, the failed attempt's error, the attempt
number and a random source (and, for a ``Retry-After`` given as an HTTP date, the wall
clock): it sleeps, logs and holds nothing. The session layer acts on its
:class:`Decision` in one place.
"""

from __future__ import annotations

from typing import Final, Protocol

import attrs

from ._errors import ApiError, RateLimitError, ResponseTooLargeError, StatusError, TransportError
from ._errors import parse_retry_after as _parse_retry_after
from ._limiters import MAX_HOLD, shown_retry_after
from ._network import Network

__all__ = [
    "RETRY_STATUSES",
    "Decision",
    "RetryEvent",
    "RetryPolicy",
    "Uniform",
    "decide",
    "mark_final",
    "retryable",
]

#: Statuses retried after the first attempt (besides connection failures and timeouts).
RETRY_STATUSES: Final = frozenset({429, 500, 502, 503, 504})


@attrs.frozen(slots=True)
class RetryPolicy:
    """How many retries, and the back-off between them.

    The wait before retry ``n`` (0-based) is uniform in ``[0, min(cap, base * 2**n)]``
    (full jitter), or the server's ``Retry-After`` when it sent one. A 429 without
    ``Retry-After`` waits at least half of that step (the server asked us to slow down;
    full jitter alone could retry at once). A ``Retry-After`` longer than
    ``retry_after_cap`` is not waited for. ``wait=False`` (testing mode) keeps the
    attempts but skips every wait and every 429 hold.
    """

    max_retries: int = 3
    base: float = 0.5
    cap: float = 8.0
    retry_after_cap: float = 60.0
    wait: bool = True


@attrs.frozen(slots=True)
class Decision:
    """What to do after a failed attempt.

    ``retry``: whether to try again, after ``wait`` seconds. ``hold``: seconds to hold every
    request to the network (a 429; at most a day, ``MAX_HOLD``), or None. ``why``: why
    not, when it is worth saying.
    """

    retry: bool
    wait: float = 0.0
    hold: float | None = None
    why: str = ""


class Uniform(Protocol):
    """A random source: ``random.Random`` or anything with its ``uniform``."""

    def uniform(self, a: float, b: float) -> float: ...


def mark_final(error: ApiError) -> ApiError:
    """Mark ``error`` as one that cannot heal (bad certificate, malformed answer, refused
    redirect): it is raised at once, never retried."""
    error._final = True
    return error


def retryable(error: ApiError) -> bool:
    """Connection failures, timeouts, a body cut short, 429 and 500/502/503/504."""
    if isinstance(error, StatusError):
        return error.status in RETRY_STATUSES and not error._final
    return (
        isinstance(error, TransportError)
        and not isinstance(error, ResponseTooLargeError)
        and not error._final
    )


def _retry_after(error: StatusError, now: float | None) -> float | None:
    if isinstance(error, RateLimitError) and now is None:
        return error.retry_after  # read when the answer came in
    headers = error.headers
    return _parse_retry_after(headers.get("Retry-After"), now=now, date=headers.get("Date"))


def _sent(error: ApiError) -> str:
    """The ``Retry-After`` header as the server sent it (made safe to show), for messages."""
    header = error.headers.get("Retry-After") if isinstance(error, StatusError) else None
    return f"Retry-After: {shown_retry_after(header)}"


def decide(
    policy: RetryPolicy,
    error: ApiError,
    attempt: int,
    random: Uniform,
    *,
    now: float | None = None,
) -> Decision:
    """The decision after attempt ``attempt`` (0-based) failed with ``error``.

    ``now`` is the wall clock (``time.time()``) an HTTP-date ``Retry-After`` is read
    against when the answer has no ``Date``; None reads the clock (or the 429's own
    reading). A wait past ``retry_after_cap`` is named as the server sent it.
    """
    if not retryable(error):
        return Decision(retry=False)
    retry_after = _retry_after(error, now) if isinstance(error, StatusError) else None
    limited = isinstance(error, RateLimitError)
    if retry_after is not None and retry_after > policy.retry_after_cap:
        # The server asks for longer than we are willing to wait: raise now (and, for a
        # 429, hold the network that long, at most MAX_HOLD, so other requests do not run
        # into it too).
        why = (
            f"the server sent {_sent(error)}, longer than "
            f"retry_after_cap={policy.retry_after_cap:g}s: not waited for"
        )
        hold = min(retry_after, MAX_HOLD) if limited and policy.wait else None
        return Decision(retry=False, hold=hold, why=why)
    if not policy.wait:
        wait = 0.0
    elif retry_after is not None:
        wait = retry_after
    else:
        # 2**64 already dwarfs any cap; 2**1024 would overflow the float product.
        step = min(policy.cap, policy.base * (2 ** min(attempt, 64)))
        wait = random.uniform(step * 0.5 if limited else 0.0, step)
    hold = min(wait, MAX_HOLD) if limited and policy.wait else None
    if attempt >= policy.max_retries:
        return Decision(retry=False, hold=hold)
    return Decision(retry=True, wait=wait, hold=hold)


@attrs.frozen(slots=True)
class RetryEvent:
    """Handed to ``Client(on_retry=fn)`` before each retry's wait.

    ``operation`` (``"pool"``...), ``network`` and ``url`` say which request; ``attempt`` is
    the 1-based number of the attempt that failed with ``error``; ``wait`` the seconds the
    client will now wait before the next one.
    """

    operation: str
    network: Network
    url: str
    attempt: int
    wait: float
    error: ApiError
