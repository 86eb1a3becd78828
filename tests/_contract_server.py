"""The ``server`` fixture's fake: our FakeServer, answering every operation from the oracle.

The fake routes and records; :func:`tests._oracle.oracle_reply` answers with the spec's literal
bodies. ``seen``, ``always``, ``url()`` and ``operations()`` are the older names the tests that
use the ``server`` fixture read; new tests use the FakeServer API itself (``requests``,
``script``, ``gate``).
"""

from __future__ import annotations

from collections.abc import Mapping
from urllib.parse import parse_qsl

import attrs

from asyncapi_client import Network
from asyncapi_client.testing import FakeServer, RecordedRequest, Reply
from asyncapi_client.testing._server import route as _route
from tests._oracle import (
    _TINY,
    DEEP_DECIMAL,
    canned,
    leaderboard_wire,
    market_wire,
    oracle_reply,
    order_wire,
    orders_wire,
    pool_wire,
    token_wire,
    tokens_wire,
    user_wire,
)

__all__ = [
    "DEEP_DECIMAL",
    "ContractServer",
    "Reply",
    "Seen",
    "canned",
    "leaderboard_wire",
    "market_wire",
    "order_wire",
    "orders_wire",
    "pool_wire",
    "route",
    "token_wire",
    "tokens_wire",
    "user_wire",
]


def route(raw_path: str) -> tuple[str | None, str | None]:
    """(operation, decoded path parameter) for a raw path without prefix: the fake's router."""
    operation, param = _route(raw_path)
    return operation, (param if operation not in (None, "tokens", "leaderboard") else None)


@attrs.frozen
class Seen:
    """One request as the server saw it: a RecordedRequest, with the path split as tests read it."""

    network: str
    method: str
    raw_path: str  # without the prefix and without the query
    raw_query: str
    headers: Mapping[str, str]
    operation: str | None
    param: str | None

    @property
    def query_pairs(self) -> list[tuple[str, str]]:
        return parse_qsl(self.raw_query, keep_blank_values=True, strict_parsing=False)

    @property
    def query(self) -> dict[str, str]:
        pairs = self.query_pairs
        result = dict(pairs)
        assert len(result) == len(pairs), f"a query parameter was repeated: {pairs}"
        return result


class ContractServer(FakeServer):
    """Both hosts on loopback, every operation answered from the oracle, every request kept."""

    def __init__(self, prefix: str = "") -> None:
        super().__init__(_TINY, prefix=prefix)
        self.script("*", oracle_reply, repeat=True)

    @property
    def seen(self) -> list[Seen]:
        return [self._seen(record) for record in self.requests]

    def _seen(self, record: RecordedRequest) -> Seen:
        path, _, query = record.raw_path.partition("?")
        if self.prefix and path.startswith(self.prefix):
            path = path[len(self.prefix) :]
        return Seen(
            network=record.network.value,
            method=record.method,
            raw_path=path,
            raw_query=query,
            headers=record.headers,
            operation=record.operation,
            param=record.param,
        )

    @property
    def always(self) -> Reply | None:
        raise AttributeError("always is write-only")

    @always.setter
    def always(self, reply: Reply | None) -> None:
        """Answer every request with ``reply`` from now on (None: the oracle again)."""
        self.clear_scripts()
        self.script("*", oracle_reply if reply is None else reply, repeat=True)

    def url(self, network: str | Network) -> str:
        return self.url_of(network)

    def operations(self) -> list[tuple[str, str | None]]:
        return [(record.network.value, record.operation) for record in self.requests]
