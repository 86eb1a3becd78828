"""One call as it goes through the session layer, and what it brings back.

The client builds one frozen :class:`Request` per call, in one place; every stage below
(coalescing, the limiter, each attempt, errors, retry events, telemetry) reads it.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine, Mapping
from typing import TYPE_CHECKING, Any, Generic, NamedTuple, Protocol, TypeVar

import attrs

from ._network import Network
from ._types import CacheState

if TYPE_CHECKING:
    from ._errors import ApiError

__all__ = ["Call", "Outcome", "Reply", "Request", "Response", "Sender", "Upstream"]

T = TypeVar("T")


class Request(NamedTuple, Generic[T]):
    """One GET: ``operation`` (``"pool"``), ``network``, the encoded ``url``, its
    ``template`` (``/api/clob/pools/{poolId}``), the ``decode`` of its body and the
    ``deadline`` of the whole call (None: none). Equal requests in flight are coalesced.

    A named tuple: immutable, and hashed and compared in C (it is the coalescing key).
    """

    operation: str
    network: Network
    url: str
    template: str
    decode: Callable[[bytes], T]
    deadline: float | None


class Outcome(NamedTuple, Generic[T]):
    """What one call brought back, inside the session layer: the fields of
    :class:`Response`, by name (a named tuple: the hot path builds a Response only when one
    is asked for). ``cache`` is set by the cache stage."""

    value: T
    status: int
    headers: Mapping[str, str]
    content: bytes
    url: str
    network: Network
    attempts: int
    elapsed: float
    cache: CacheState | None = None


class Reply(NamedTuple):
    """What one attempt brought back: the final answer's ``status``, ``headers`` and
    ``body``, and the ``url`` it came from (after any same-origin redirect)."""

    status: int
    headers: Mapping[str, str]
    body: bytes
    url: str


class Call:
    """The mutable progress of one call through the pipeline: its Request, its start
    (``time.monotonic()``, for ``Response.elapsed``) and deadline (``loop.time()``).

    ``tries`` counts attempts begun (one that failed at the limiter too); ``attempts``
    counts requests sent (``ApiError.attempts``, ``Response.attempts``): an attempt counts
    once it has its connection slot. ``asking``: a question to the limiter is in flight.
    ``failed``: the last attempt's error. ``conditional``: the validators the cache sends
    with every attempt of this call (``If-None-Match``...), None for a plain call.
    """

    __slots__ = (
        "asking",
        "attempts",
        "conditional",
        "expires",
        "failed",
        "reply",
        "request",
        "started",
        "tries",
    )

    def __init__(
        self, request: Request[Any], started: float, conditional: Mapping[str, str] | None
    ) -> None:
        self.request = request
        self.started = started
        #: When the call's deadline passes (``loop.time()``; None: no deadline).
        self.expires: float | None = None
        self.conditional = conditional
        self.tries = 0
        self.attempts = 0
        self.asking = False
        self.failed: ApiError | None = None
        #: The answer of the attempt that succeeded.
        self.reply: Reply | None = None


class Sender(Protocol):
    """Sends the attempts of the pipeline (asyncapi_client/_http.py: aiohttp).

    ``send`` makes attempt number ``attempt`` of ``request`` (with the extra request headers
    ``conditional``, the validators of a cache or a watch, when given) and returns its 2xx
    :class:`Reply` (or, to a conditional request, a 304 with no body), or raises an
    :class:`~asyncapi_client.ApiError` (any other non-2xx answer as a ``StatusError``);
    ``open`` gets it ready inside the running loop; ``close`` ends what it owns;
    ``learn`` tells it where a network's requests go. ``attempt_timeout`` bounds one attempt
    (seconds), and each question the pipeline asks its limiter and cache.
    """

    attempt_timeout: float

    def open(self) -> object: ...

    def learn(self, network: Network, base: str) -> None: ...

    async def send(
        self, request: Request[Any], attempt: int, conditional: Mapping[str, str] | None, /
    ) -> Reply: ...

    async def close(self) -> None: ...


class Upstream(Protocol):
    """What a stage around the pipeline (the cache) may use of it: ``ready`` refuses a call
    on a closed client or another loop; ``outcome`` runs one call (with the validators
    ``conditional`` on each attempt: its Outcome is then a 304 with value None when they
    still hold); ``attempt_timeout`` bounds one attempt (seconds)."""

    attempt_timeout: float

    def ready(self) -> None: ...

    def outcome(
        self, request: Request[T], conditional: Mapping[str, str] | None = None, /
    ) -> Coroutine[Any, Any, Outcome[T]]: ...


@attrs.frozen(slots=True)
class Response(Generic[T]):
    """What one call brought back (``client.with_response.<operation>(...)``).

    ``value`` is the decoded result; ``status``, ``headers`` (case-insensitive, repeated
    headers kept) and ``content`` (the body as received) are the final answer's; ``url``
    is where it came from (after any same-origin redirect) and ``network`` the network it
    went to; ``attempts`` counts the
    requests the call made; ``elapsed`` the seconds it took, waits included. Callers that
    shared one request (coalescing) get a Response for that request. ``cache`` says where
    the value came from when a cache answers the operation (``"miss"``, ``"hit"``,
    ``"revalidated"``, ``"stale"``; None otherwise); a hit made no request (``attempts`` 0).
    """

    value: T
    status: int
    headers: Mapping[str, str] = attrs.field(repr=False)
    content: bytes = attrs.field(repr=False)
    url: str
    network: Network
    attempts: int
    elapsed: float
    cache: CacheState | None = None
