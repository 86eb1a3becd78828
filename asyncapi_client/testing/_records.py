"""What the fake server records about each request it sees."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

import attrs

from asyncapi_client._network import Network

from ._faults import FaultKind

if TYPE_CHECKING:
    from ._script import Reply

__all__ = ["RecordedRequest"]


@attrs.frozen
class RecordedRequest:
    """One request the fake server saw, and what it did about it.

    Recorded when it arrives (``status`` and ``answered_at`` None while it is in flight) and
    replaced by its final record when it has been answered.
    """

    #: the network whose port the request came in on
    network: Network
    #: the HTTP method (the client sends GET)
    method: str
    #: the path, percent-decoded, prefix included
    path: str
    #: the request target exactly as sent: encoded path and query
    raw_path: str
    #: the query parameters, decoded (the first value of a repeated name)
    query: Mapping[str, str]
    #: "tokens", "token_markets", "pool", "user", "orders", "leaderboard"; None for no route
    operation: str | None
    #: ``time.monotonic()`` when the request arrived
    time: float
    #: the status sent; None when the connection was dropped without an answer, or in flight
    status: int | None
    #: the injected fault that decided the answer, if any
    fault: FaultKind | None = None
    #: the request headers (case-insensitive lookups)
    headers: Mapping[str, str] = attrs.field(factory=dict, eq=False, repr=False)
    #: the path parameter, percent-decoded (pool id, address, token); None if the route has none
    param: str | None = None
    #: ``time.monotonic()`` when the server finished with it (answered or dropped); None before
    answered_at: float | None = None
    #: the scripted reply that answered it, if any
    reply: Reply | None = None
    #: True when the client went away before the answer was sent, and the server stopped
    #: working on it then (``status`` is None)
    cancelled: bool = False
