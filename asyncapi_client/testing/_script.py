"""Scripted replies: a queue of exact answers per operation, used in order before normal service.

Where a :class:`~asyncapi_client.testing.Fault` draws from a seeded random stream, a script says
exactly what the next requests meet: ``server.script("pool", Reply(503), Reply(200))``.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Mapping
from typing import Any, Final, TypeAlias

import attrs

from ._faults import OPERATIONS
from ._records import RecordedRequest

__all__ = ["Reply", "Responder", "ScriptStep", "Scripts"]


def _status(_: object, attribute: attrs.Attribute[int], value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or not 200 <= value <= 599:
        raise ValueError(f"{attribute.name} must be an HTTP status in 200..599, got {value!r}")


def _body(_: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if value is not None and not isinstance(value, bytes | str):
        raise TypeError(f"body must be bytes, str or None, got {type(value).__name__}")


def _delay(_: object, attribute: attrs.Attribute[float], value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0.0 <= value < 1e6:
        raise ValueError(f"{attribute.name} must be a number of seconds >= 0, got {value!r}")


def _flag(_: object, attribute: attrs.Attribute[bool], value: object) -> None:
    if not isinstance(value, bool):
        raise TypeError(f"{attribute.name} must be a bool, got {value!r}")


def _headers(value: object) -> Mapping[str, str]:
    if not isinstance(value, Mapping) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in value.items()
    ):
        raise TypeError(f"headers must map str to str, got {value!r}")
    return dict(value)


@attrs.frozen
class Reply:
    """One scripted answer: ``Reply(503)``, ``Reply(json={...})``, ``Reply(reset=True)``.

    - ``status``: the HTTP status (200..599).
    - ``body`` (bytes or text, sent as is) or ``json`` (any value, sent as JSON). With
      neither, a 200 is the normal answer of the fake (with these headers added) and any
      other status a small JSON error body.
    - ``headers``: added to the answer; a ``Content-Type`` here replaces
      ``application/json``.
    - ``delay``: seconds to wait before answering (cut short when the server closes).
    - ``drop``: close the connection without an answer (after ``delay``).
    - ``reset``: reset the connection (a TCP RST) without an answer (after ``delay``).
    - ``truncate``: send the status, the headers and the full ``Content-Length``, then only
      the first half of the body, and close the connection: a body cut short.

    At most one of ``drop``, ``reset`` and ``truncate``.
    """

    status: int = attrs.field(default=200, validator=_status)
    body: bytes | str | None = attrs.field(default=None, kw_only=True, validator=_body)
    json: Any = attrs.field(default=None, kw_only=True)
    headers: Mapping[str, str] = attrs.field(factory=dict, kw_only=True, converter=_headers)
    delay: float = attrs.field(default=0.0, kw_only=True, validator=_delay)
    drop: bool = attrs.field(default=False, kw_only=True, validator=_flag)
    reset: bool = attrs.field(default=False, kw_only=True, validator=_flag)
    truncate: bool = attrs.field(default=False, kw_only=True, validator=_flag)

    def __attrs_post_init__(self) -> None:
        if self.body is not None and self.json is not None:
            raise ValueError("give a Reply a body or json, not both")
        if self.drop + self.reset + self.truncate > 1:
            raise ValueError("give a Reply at most one of drop, reset and truncate")


#: A function of the request (as recorded on arrival, not yet answered) that picks its Reply.
Responder: TypeAlias = Callable[[RecordedRequest], Reply]

#: One entry of a script: a Reply, or a Responder that makes one per request.
ScriptStep: TypeAlias = Reply | Responder


def check_operation(operation: object) -> str:
    """``operation`` if it is one of the six operations or ``"*"``; else a clear ValueError."""
    if operation != "*" and operation not in OPERATIONS:
        choices = ", ".join(repr(op) for op in (*OPERATIONS, "*"))
        raise ValueError(f"unknown operation {operation!r}: expected one of {choices}")
    assert isinstance(operation, str)
    return operation


class _Queue:
    """The script of one operation: steps used once each, then an optional endless cycle."""

    __slots__ = ("cycle", "index", "steps")

    def __init__(self) -> None:
        self.steps: deque[ScriptStep] = deque()
        self.cycle: tuple[ScriptStep, ...] = ()
        self.index = 0

    def take(self) -> ScriptStep | None:
        if self.steps:
            return self.steps.popleft()
        if self.cycle:
            step = self.cycle[self.index % len(self.cycle)]
            self.index += 1
            return step
        return None

    def __len__(self) -> int:
        return len(self.steps)


_EMPTY: Final = _Queue()


class Scripts:
    """The scripts set on one server, keyed by operation or ``"*"``; safe to set from any thread."""

    def __init__(self) -> None:
        self._queues: dict[str, _Queue] = {}
        self._lock = threading.Lock()

    def add(self, operation: str, steps: tuple[ScriptStep, ...], *, repeat: bool) -> None:
        check_operation(operation)
        for step in steps:
            if not isinstance(step, Reply) and not callable(step):
                raise TypeError(f"a script step must be a Reply or a function, got {step!r}")
        if repeat and not steps:
            raise ValueError("repeat=True needs at least one reply")
        with self._lock:
            queue = self._queues.setdefault(operation, _Queue())
            if repeat:
                queue.cycle, queue.index = steps, 0
            else:
                queue.steps.extend(steps)

    def clear(self, operation: str | None = None) -> None:
        with self._lock:
            if operation is None:
                self._queues.clear()
            else:
                self._queues.pop(check_operation(operation), None)

    def pending(self, operation: str) -> int:
        """How many one-off steps of ``operation`` (its own, not ``"*"``) are still queued."""
        with self._lock:
            return len(self._queues.get(check_operation(operation), _EMPTY))

    def take(self, operation: str) -> ScriptStep | None:
        """The step for the next request of ``operation``: its own script first, then ``"*"``."""
        if not self._queues:
            return None
        with self._lock:
            for key in (operation, "*"):
                queue = self._queues.get(key)
                step = None if queue is None else queue.take()
                if step is not None:
                    return step
        return None
