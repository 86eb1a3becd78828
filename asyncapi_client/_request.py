"""One call as it goes through the session layer, and what it brings back.

The client builds one frozen :class:`Request` per call, in one place; every stage below
(coalescing, the limiter, each attempt, errors, retry events, telemetry) reads it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Generic, TypeVar

import attrs

from ._network import Network

__all__ = ["Request", "Response"]

T = TypeVar("T")


@attrs.frozen(slots=True)
class Request(Generic[T]):
    """One GET: ``operation`` (``"pool"``), ``network``, the encoded ``url``, its
    ``template`` (``/api/clob/pools/{poolId}``), the ``decode`` of its body and the
    ``deadline`` of the whole call (None: none). Equal requests in flight are coalesced.
    """

    operation: str
    network: Network
    url: str
    template: str
    decode: Callable[[bytes], T] = attrs.field(eq=True, repr=False)
    deadline: float | None


@attrs.frozen(slots=True)
class Response(Generic[T]):
    """What one call brought back (``client.with_response.<operation>(...)``).

    ``value`` is the decoded result; ``status``, ``headers`` (case-insensitive, repeated
    headers kept) and ``content`` (the body as received) are the final answer's; ``url``
    is where it came from (after any same-origin redirect); ``attempts`` counts the
    requests the call made; ``elapsed`` the seconds it took, waits included. Callers that
    shared one request (coalescing) get a Response for that request.
    """

    value: T
    status: int
    headers: Mapping[str, str] = attrs.field(repr=False)
    content: bytes = attrs.field(repr=False)
    url: str
    network: Network
    attempts: int
    elapsed: float
