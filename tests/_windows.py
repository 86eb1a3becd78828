"""Counting requests where they land: the most in any window, and the throughput floor; and
the reservation rule run over a list of arrivals, the starts every limiter must give.

Shared by the tests that stamp arrivals at a server (one process, a fleet of processes), by
the pure tests of the reservation rule and by RedisLimiter's tests (its script against the rule).
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Sequence

from asyncapi_client import Rate
from asyncapi_client._limiters import earliest_start, pacing

__all__ = [
    "max_in_window",
    "most_in_any_window",
    "starts_after",
    "throughput_floor",
    "timeline",
]


def most_in_any_window(times: Sequence[float], seconds: float) -> int:
    """The most ``times`` in any *closed* window ``[t, t + seconds]``: the strictest count a
    server can keep (a request on either edge counts)."""
    ordered = sorted(times)
    return max(
        (bisect.bisect_right(ordered, t + seconds) - i for i, t in enumerate(ordered)), default=0
    )


def throughput_floor(rate: Rate, margin: float, times: Sequence[float]) -> float:
    """The requests a busy client must get through between the first and the last of
    ``times`` (the contract's bound): ``count * elapsed / (seconds + margin)``, less one
    window's ``count``."""
    if not times:
        return 0.0
    elapsed = max(times) - min(times)
    return rate.count * elapsed / (rate.seconds + margin) - rate.count


def timeline(times: Sequence[float], labels: Sequence[str] | None = None) -> str:
    """``times`` from the first, in ms, each with its label: a failed bound's whole story."""
    if not times:
        return "(none)"
    pairs = sorted(zip(times, labels or [""] * len(times), strict=True))
    first = pairs[0][0]
    return " ".join(f"{(t - first) * 1000:.0f}{label}" for t, label in pairs)


NEVER = -math.inf


def starts_after(
    rates: Sequence[Rate], requests: Sequence[tuple[float, int]], margin: float = 0.0
) -> list[float]:
    """Reserve ``(arrival time, weight)`` requests in order; the start each one gets."""
    windows: list[list[float]] = [[] for _ in rates]
    last = NEVER
    pace = pacing(rates, margin)
    out = []
    for now, weight in requests:
        start = earliest_start(now, last, rates, windows, weight, margin)
        last = start + weight * pace
        for times in windows:
            times.extend([start] * weight)
        out.append(start)
    return out


def max_in_window(starts: Sequence[float], seconds: float) -> int:
    """Most starts in any half-open window ``(t - seconds, t]``."""
    eps = 1e-9  # float sums: t - seconds may land a hair below a start it equals
    return max(sum(1 for s in starts if t - seconds + eps < s <= t) for t in starts)
