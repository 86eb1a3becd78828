"""Counting requests where they land: the most in any window, and the throughput floor.

Shared by the tests that stamp arrivals at a server (one process, a fleet of processes) and
by the pure tests of the reservation rule.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence

from asyncapi_client import Rate

__all__ = ["most_in_any_window", "throughput_floor", "timeline"]


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
