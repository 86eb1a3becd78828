"""The fake's quota: at most ``limit`` answers per network in each fixed window, advertised in
the rate-limit headers of one of three styles."""

from __future__ import annotations

import math
import threading
import time
from typing import Final, Literal, TypeAlias

import attrs

from asyncapi_client._network import Network

__all__ = ["HEADER_MODES", "HeaderMode", "Quota", "QuotaWindows", "Verdict", "check_header_mode"]

HeaderMode: TypeAlias = Literal["ietf", "split", "x"]
HEADER_MODES: Final = ("ietf", "split", "x")


def _limit(_: object, attribute: attrs.Attribute[int], value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"Quota limit must be an int >= 1 (requests), got {value!r}")


def _window(value: object) -> float:
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not math.isfinite(value)
        or not 0 < value <= 86_400
    ):
        raise ValueError(f"Quota window must be seconds in (0, 86400], got {value!r}")
    return float(value)


@attrs.frozen
class Quota:
    """At most ``limit`` requests of one network answered in each fixed window of ``window``
    seconds (windows start when the server starts); past it, 429 with ``Retry-After``."""

    limit: int = attrs.field(validator=_limit)
    window: float = attrs.field(converter=_window)


def check_header_mode(value: object) -> HeaderMode | None:
    """``value`` if it is a header mode ("ietf", "split", "x") or None; else ValueError."""
    if value is None:
        return None
    for mode in HEADER_MODES:
        if value == mode:
            return mode
    raise ValueError(f"rate_limit_headers must be 'ietf', 'split', 'x' or None, got {value!r}")


@attrs.frozen
class Verdict:
    """What the quota says of one request: answered or refused, and what is left."""

    allowed: bool
    limit: int
    window: float
    #: Requests left in this window after this answer (0 on a refusal).
    remaining: int
    #: Seconds from the request to the window's end.
    reset: float

    def retry_after(self) -> str:
        """``Retry-After`` of a refusal: seconds to the window's end, rounded up, at least 1."""
        return str(max(1, math.ceil(self.reset)))

    def headers(self, mode: HeaderMode | None) -> dict[str, str]:
        """The rate-limit headers of ``mode`` (integers only; none for None)."""
        if mode is None:
            return {}
        reset = max(0, math.ceil(self.reset))
        if mode == "ietf":
            window = max(1, math.ceil(self.window))
            return {
                "RateLimit-Policy": f'"default";q={self.limit};w={window}',
                "RateLimit": f'"default";r={self.remaining};t={reset}',
            }
        if mode == "split":
            return {
                "RateLimit-Limit": str(self.limit),
                "RateLimit-Remaining": str(self.remaining),
                "RateLimit-Reset": str(reset),
            }
        return {
            "X-RateLimit-Limit": str(self.limit),
            "X-RateLimit-Remaining": str(self.remaining),
            "X-RateLimit-Reset": str(math.ceil(time.time() + self.reset)),
        }


class QuotaWindows:
    """The count of answers per network in the current window; safe from any thread."""

    def __init__(self, quota: Quota | None) -> None:
        self._quota = quota
        self._started = 0.0
        # network -> (the current window's end on the monotonic clock, answers in it)
        self._windows: dict[Network, tuple[float, int]] = {}
        self._lock = threading.Lock()

    @property
    def quota(self) -> Quota | None:
        return self._quota

    def start(self, now: float) -> None:
        """Windows start now (when the server starts)."""
        with self._lock:
            self._started = now
            self._windows.clear()

    def _end(self, now: float, window: float) -> float:
        """The end of the window of length ``window`` that holds ``now``."""
        return self._started + (math.floor((now - self._started) / window) + 1) * window

    @property
    def started(self) -> float:
        """When the windows started (``time.monotonic()``)."""
        return self._started

    def index(self, at: float) -> int | None:
        """The number of the window of the current length that holds ``at`` (the first is
        0); None without a quota."""
        quota = self._quota
        if quota is None:
            return None
        return math.floor((at - self._started) / quota.window)

    def set(self, quota: Quota | None, now: float) -> None:
        """Change the quota at once: the count of the current window is kept."""
        with self._lock:
            old, self._quota = self._quota, quota
            if old is None:  # nothing was counted meanwhile: start afresh
                self._windows.clear()
            if quota is None or old is None or old.window == quota.window:
                return
            for network, (_, count) in self._windows.items():
                self._windows[network] = (self._end(now, quota.window), count)

    def take(self, network: Network, now: float) -> Verdict | None:
        """Count one request of ``network`` if the quota lets it be answered; None: no quota."""
        with self._lock:
            quota = self._quota
            if quota is None:
                return None
            end, count = self._windows.get(network, (0.0, 0))
            if now >= end:
                end, count = self._end(now, quota.window), 0
            allowed = count < quota.limit
            if allowed:
                count += 1
            self._windows[network] = (end, count)
        remaining = quota.limit - count if allowed else 0
        return Verdict(allowed, quota.limit, quota.window, max(0, remaining), end - now)
