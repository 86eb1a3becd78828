"""One call as it goes through the session layer, and what it brings back.

The client builds one frozen :class:`Request` per call, in one place; every stage below
(coalescing, the limiter, each attempt, errors, retry events, telemetry) reads it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Generic, NamedTuple, TypeVar

import attrs

from ._network import Network
from ._types import CacheState

__all__ = ["Outcome", "Request", "Response"]

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


#: What one call brought back, inside the session layer: the fields of :class:`Response`
#: in order (a plain tuple: the hot path builds a Response only when one is asked for).
Outcome = tuple[T, int, Mapping[str, str], bytes, str, Network, int, float]


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
