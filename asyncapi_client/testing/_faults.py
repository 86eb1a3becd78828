"""Fault injection for the fake server: what can go wrong, and a seeded schedule of when.

Each operation draws from its own :class:`random.Random`, seeded from the server seed, the
key the fault was set under and the operation name, and restarted by every ``set_fault``.
So the faults an operation sees depend only on the seed and on how many requests of that
operation came since the fault was set, not on how requests of other operations interleave.
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from typing import Any, Final, Literal

import attrs

from asyncapi_client._operations import OPERATIONS as _ENDPOINT_NAMES

__all__ = ["OPERATIONS", "Decision", "Fault", "FaultKind", "FaultSchedule"]

#: The six operations the fake serves, named like the Client methods.
OPERATIONS: Final[tuple[str, ...]] = _ENDPOINT_NAMES

#: What an injected fault did to one request (None in a record: no fault).
FaultKind = Literal["rate_limit", "drop", "error", "truncate", "malformed"]


def _rate(_: object, attribute: attrs.Attribute[float], value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0.0 <= value <= 1.0:
        raise ValueError(f"{attribute.name} must be a number in [0, 1], got {value!r}")


def _seconds(_: object, attribute: attrs.Attribute[float], value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0.0 <= value < 1e6:
        raise ValueError(f"{attribute.name} must be a number of seconds >= 0, got {value!r}")


def _status(_: object, attribute: attrs.Attribute[int], value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or not 400 <= value <= 599:
        raise ValueError(f"{attribute.name} must be an HTTP status in 400..599, got {value!r}")


def _count(_: object, attribute: attrs.Attribute[int], value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"{attribute.name} must be an int >= 0, got {value!r}")


def _cap(_: object, attribute: attrs.Attribute[int | None], value: object) -> None:
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{attribute.name} must be an int >= 1 or None, got {value!r}")


def _retry_after(_: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if value is None or isinstance(value, str):
        return
    if isinstance(value, bool) or not isinstance(value, int | float) or not value >= 0:
        raise ValueError(f"{attribute.name} must be seconds >= 0, a header string or None")


@attrs.frozen(kw_only=True)
class Fault:
    """What to do wrong on one operation (or ``"*"``: every operation without its own Fault).

    - ``latency``: seconds added before every answer, faulted or not.
    - ``rate_limit_burst``: the next N requests answer 429, with a ``Retry-After`` header of
      ``retry_after`` (seconds for a number, the text as is for a string such as an HTTP
      date, no header for None). Counted once, from ``set_fault``.
    - ``drop_rate``: the share of requests whose connection is closed without an answer.
    - ``error_rate``: the share answered with ``error_status`` (500 unless told).
    - ``truncate_rate``: the share answered 200 with a ``Content-Length`` the body never
      reaches before the connection closes (the client sees a body cut short).
    - ``malformed_rate``: the share answered 200 with a body that is not JSON, or is JSON
      cut off mid-document.

    - ``max_in_a_row``: never more than this many drawn faults (drop, error, truncate,
      malformed) in a row on one request target (path and query), so a client with that
      many retries always gets through; None (the default) sets no bound.

    Rates are drawn in that order for every request, so at most one of them applies.
    """

    latency: float = attrs.field(default=0.0, validator=_seconds)
    error_rate: float = attrs.field(default=0.0, validator=_rate)
    error_status: int = attrs.field(default=500, validator=_status)
    rate_limit_burst: int = attrs.field(default=0, validator=_count)
    retry_after: float | str | None = attrs.field(default=1.0, validator=_retry_after)
    drop_rate: float = attrs.field(default=0.0, validator=_rate)
    truncate_rate: float = attrs.field(default=0.0, validator=_rate)
    malformed_rate: float = attrs.field(default=0.0, validator=_rate)
    max_in_a_row: int | None = attrs.field(default=None, validator=_cap)

    def retry_after_header(self) -> str | None:
        """The ``Retry-After`` value sent with a 429, or None for no header."""
        if self.retry_after is None or isinstance(self.retry_after, str):
            return self.retry_after
        return format(float(self.retry_after), "g")


@attrs.frozen
class Decision:
    """What the server does to one request: wait ``latency`` seconds, then ``kind`` (or answer)."""

    latency: float = 0.0
    kind: FaultKind | None = None
    fault: Fault | None = None
    #: a draw in [0, 1) that picks among the variants of a malformed body
    variant: float = 0.0


_NO_FAULT: Final = Decision()


class _Armed:
    """One Fault as set: its per-operation random streams and burst counters."""

    __slots__ = ("bursts", "fault", "key", "rngs", "rows", "seed")

    def __init__(self, key: str, fault: Fault, seed: int) -> None:
        self.key = key
        self.fault = fault
        self.seed = seed
        self.rngs: dict[str, random.Random] = {}
        self.bursts: dict[str, int] = {}
        self.rows: dict[str, int] = {}  # request target -> drawn faults in a row

    def decide(self, operation: str, target: str) -> Decision:
        fault = self.fault
        burst = self.bursts.get(operation, fault.rate_limit_burst)
        if burst > 0:
            self.bursts[operation] = burst - 1
            return Decision(fault.latency, "rate_limit", fault)
        self.bursts[operation] = 0
        rng = self.rngs.get(operation)
        if rng is None:
            rng = self.rngs[operation] = random.Random(f"{self.seed}/{self.key}/{operation}")
        # Always five draws, whatever the outcome: the schedule never shifts.
        drop, error, truncate, malformed, variant = (rng.random() for _ in range(5))
        kind: FaultKind | None = None
        if drop < fault.drop_rate:
            kind = "drop"
        elif error < fault.error_rate:
            kind = "error"
        elif truncate < fault.truncate_rate:
            kind = "truncate"
        elif malformed < fault.malformed_rate:
            kind = "malformed"
        if fault.max_in_a_row is not None:
            row = self.rows.pop(target, 0) + 1 if kind is not None else 0
            if row > fault.max_in_a_row:
                kind, row = None, 0
            if row:
                self.rows[target] = row
        return Decision(fault.latency, kind, fault, variant)


class FaultSchedule:
    """The faults set on one server, keyed by operation name or ``"*"``."""

    def __init__(self, seed: int) -> None:
        self._seed = seed
        self._armed: dict[str, _Armed] = {}

    @property
    def faults(self) -> Mapping[str, Fault]:
        return {key: armed.fault for key, armed in self._armed.items()}

    def set(self, operation: str, fault: Fault | None) -> None:
        if operation != "*" and operation not in OPERATIONS:
            choices = ", ".join(repr(op) for op in (*OPERATIONS, "*"))
            raise ValueError(f"unknown operation {operation!r}: expected one of {choices}")
        if fault is None:
            self._armed.pop(operation, None)
        elif not isinstance(fault, Fault):
            raise TypeError(f"fault must be a Fault or None, got {fault!r}")
        else:
            self._armed[operation] = _Armed(operation, fault, self._seed)

    def clear(self) -> None:
        self._armed.clear()

    def decide(self, operation: str | None, target: str = "") -> Decision:
        """The fate of the next request of ``operation`` (None: not an operation, no fault)
        to ``target`` (its path and query)."""
        if operation is None or not self._armed:
            return _NO_FAULT
        armed = self._armed.get(operation) or self._armed.get("*")
        return _NO_FAULT if armed is None else armed.decide(operation, target)
