"""Checkpoints: where a walk stands, as a small frozen value and compact, versioned JSON.

A checkpoint names the walk (operation, network, address and filters, page size) and the
position just after the last item it yielded: the page that item is on (the cursor that
fetched it, or the page number), how many items of that page are behind the position, and
the identity of the last of them (a transaction id, or an address), which a resumed walk
checks before it trusts the position.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final, Literal, Self, cast

import attrs
import orjson

from ._network import Network, parse_network

__all__ = ["VERSION", "Checkpoint", "continue_from"]

#: The version of the JSON form written by :meth:`Checkpoint.to_json`.
VERSION: Final = 1

Operation = Literal["orders", "leaderboard"]

#: The fields that say which walk a checkpoint belongs to (a resumed walk must match them).
_IDENTITY: Final = ("operation", "network", "address", "market", "status", "side", "page_size")

#: The JSON fields of each operation, in the order they are written.
_FIELDS: Final[Mapping[str, tuple[str, ...]]] = {
    "orders": (
        "version",
        "operation",
        "network",
        "address",
        "market",
        "status",
        "side",
        "page_size",
        "cursor",
        "consumed",
        "last",
    ),
    "leaderboard": ("version", "operation", "network", "page_size", "page", "consumed", "last"),
}


_OPERATIONS: Final = "'orders' or 'leaderboard'"


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _describe(value: object) -> str:
    """A value for a message: short, and with its type when that is what is wrong."""
    if isinstance(value, Network):
        return repr(value.value)
    text = repr(value)
    return text if len(text) <= 60 else f"{text[:28]}...{text[-28:]}"


def _position_problem(v: Any) -> str | None:
    """What is wrong with the fields every checkpoint has (network, page size, position)."""
    if not isinstance(v.network, Network):
        return f"network must be a Network, got {_describe(v.network)}"
    if v.page_size is not None and not (_is_int(v.page_size) and v.page_size > 0):
        return f"page_size must be a positive int or None, got {_describe(v.page_size)}"
    if not (_is_int(v.consumed) and v.consumed >= 0):
        return f"consumed must be an int >= 0, got {_describe(v.consumed)}"
    if v.consumed == 0 and v.last is not None:
        return "last must be None when nothing of the page was consumed"
    if v.consumed > 0 and not (isinstance(v.last, str) and v.last):
        return f"last must name the last item consumed, got {_describe(v.last)}"
    return None


def _orders_problem(v: Any) -> str | None:
    """What is wrong with an orders checkpoint's own fields: the user, filters and cursor."""
    if not (isinstance(v.address, str) and v.address):
        return f"address must be a non-empty string, got {_describe(v.address)}"
    for name, value in (("market", v.market), ("status", v.status), ("side", v.side)):
        if value is not None and not isinstance(value, str):
            return f"{name} must be a string or None, got {_describe(value)}"
    if v.cursor is not None and not (isinstance(v.cursor, str) and v.cursor):
        return f"cursor must be a non-empty string or None, got {_describe(v.cursor)}"
    if v.page is not None:
        return "an orders checkpoint has a cursor, not a page"
    return None


def _leaderboard_problem(v: Any) -> str | None:
    """What is wrong with a leaderboard checkpoint's own fields: a page, and no filters."""
    for name in ("address", "market", "status", "side", "cursor"):
        if getattr(v, name) is not None:
            return f"a leaderboard checkpoint has no {name}"
    if not (_is_int(v.page) and v.page > 0):
        return f"page must be a positive int, got {_describe(v.page)}"
    return None


@attrs.frozen(slots=True, kw_only=True)
class Checkpoint:
    """Where a walk stands: the position just after the last item it yielded.

    Read it from ``walk.checkpoint`` (any time, also after the walk failed), keep it as
    text with :meth:`to_json`, and pass the checkpoint or its text as ``resume=`` to the
    same stream method, or to the page (item) stream of the same operation: the walk
    continues with exactly the items that follow, on a server whose data did not change.

    ``cursor`` (orders) or ``page`` (leaderboard) is the page the position is on,
    ``consumed`` how many of its items are behind the position, ``last`` the transaction
    id or address of the last of them (None before the first item of the walk).
    ``operation``, ``network``, ``page_size`` and the filters (``address``, ``market``,
    ``status``, ``side``) name the walk: resuming another walk's checkpoint raises ValueError.
    """

    operation: Operation
    network: Network
    page_size: int | None
    #: orders: the user, and the filters the walk was made with (wire values)
    address: str | None = None
    market: str | None = None
    status: str | None = None
    side: str | None = None
    #: orders: the cursor that fetched the page the position is on (None: the first page)
    cursor: str | None = None
    #: leaderboard: the number of the page the position is on
    page: int | None = None
    consumed: int = 0
    last: str | None = None

    def __attrs_post_init__(self) -> None:
        problem = self._problem()
        if problem is not None:
            raise ValueError(f"invalid checkpoint: {problem}")

    def _problem(self) -> str | None:
        """What is wrong with the fields, or None. They may come from JSON: trust no type."""
        v: Any = self  # every field is checked as if it could hold anything
        if v.operation not in _FIELDS:
            return f"unknown operation {_describe(v.operation)}: expected {_OPERATIONS}"
        problem = _position_problem(v)
        if problem is None:
            problem = _orders_problem(v) if v.operation == "orders" else _leaderboard_problem(v)
        return problem

    # --- JSON ---------------------------------------------------------------------------

    def to_json(self) -> str:
        """Compact JSON text (one line), versioned: what :meth:`from_json` reads back."""
        values: dict[str, Any]
        if self.operation == "orders":
            values = {
                "version": VERSION,
                "operation": "orders",
                "network": self.network.value,
                "address": self.address,
                "market": self.market,
                "status": self.status,
                "side": self.side,
                "page_size": self.page_size,
                "cursor": self.cursor,
                "consumed": self.consumed,
                "last": self.last,
            }
        else:
            values = {
                "version": VERSION,
                "operation": "leaderboard",
                "network": self.network.value,
                "page_size": self.page_size,
                "page": self.page,
                "consumed": self.consumed,
                "last": self.last,
            }
        try:
            return orjson.dumps(values).decode()
        except orjson.JSONEncodeError as exc:  # a string with no UTF-8 form (a lone surrogate)
            raise ValueError(f"this checkpoint cannot be written as JSON: {exc}") from None

    @classmethod
    def from_json(cls, text: str | bytes | bytearray) -> Self:
        """Read the text :meth:`to_json` wrote; anything else raises ValueError saying why.

        Args:
            text: the JSON text, as ``str`` or bytes.
        """
        if not isinstance(text, str | bytes | bytearray):
            raise ValueError(f"a checkpoint is JSON text, got {type(text).__name__}")
        try:
            data = orjson.loads(text)
        except orjson.JSONDecodeError as exc:
            raise ValueError(
                f"the checkpoint is not valid JSON (truncated or damaged?): {exc}"
            ) from None
        if not isinstance(data, dict):
            raise ValueError(f"a checkpoint is a JSON object, got {type(data).__name__}")
        version = data.get("version")
        if version is None:
            raise ValueError("not a checkpoint: the JSON object has no 'version'")
        if not _is_int(version) or version != VERSION:
            raise ValueError(
                f"checkpoint version {_describe(version)} is not supported: "
                f"this library reads version {VERSION}"
            )
        operation = data.get("operation")
        fields = _FIELDS.get(operation) if isinstance(operation, str) else None
        if fields is None:
            raise ValueError(
                f"unknown checkpoint operation {_describe(operation)}: "
                "expected 'orders' or 'leaderboard'"
            )
        missing = [name for name in fields if name not in data]
        if missing:
            raise ValueError(f"the checkpoint is missing {', '.join(map(repr, missing))}")
        unknown = sorted(set(data) - set(fields))
        if unknown:
            raise ValueError(f"the checkpoint has unknown fields {', '.join(map(repr, unknown))}")
        network = data["network"]
        if not isinstance(network, str):
            raise ValueError(
                f"invalid checkpoint: network must be a string, got {_describe(network)}"
            )
        try:
            parsed = parse_network(network)
        except ValueError as exc:
            raise ValueError(f"invalid checkpoint: {exc}") from None
        values = {name: data[name] for name in fields[3:]}
        return cls(operation=cast(Operation, operation), network=parsed, **values)


def continue_from(resume: object, start: Checkpoint) -> Checkpoint:
    """The position a walk starts from: ``start``, or ``resume`` when it is of the same walk.

    ``resume`` is None, a :class:`Checkpoint` or its JSON text; one of another operation,
    network, address, filter or page size raises ValueError naming each difference.
    """
    if resume is None:
        return start
    if isinstance(resume, Checkpoint):
        point = resume
    elif isinstance(resume, str | bytes | bytearray):
        point = Checkpoint.from_json(resume)
    else:
        raise ValueError(
            f"resume must be a Checkpoint or its JSON text, got {type(resume).__name__}"
        )
    differences = [
        f"{name} {_describe(getattr(point, name))} (this walk: {_describe(getattr(start, name))})"
        for name in _IDENTITY
        if getattr(point, name) != getattr(start, name)
    ]
    if differences:
        raise ValueError(f"the checkpoint is of another walk: {'; '.join(differences)}")
    return point
