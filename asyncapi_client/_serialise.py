"""Models back to the wire: ``to_wire`` (JSON-ready dicts and lists) and ``to_json`` (bytes).

The output is what the server would send: camelCase names, decimals as exact text, enums as
their values, balances and positions as plain objects and arrays. Decoding it gives equal
models back.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, TypeAlias, overload

import orjson

from . import _decode
from ._models import (
    LeaderboardEntry,
    LeaderboardPage,
    Market,
    Order,
    OrdersPage,
    Pool,
    Token,
    UserProfile,
)

__all__ = ["Model", "to_json", "to_wire"]

#: Every public model; ``to_wire`` and ``to_json`` take one of these or a sequence of them.
Model: TypeAlias = (
    Token | Market | Pool | Order | UserProfile | LeaderboardEntry | OrdersPage | LeaderboardPage
)


@overload
def to_wire(obj: Model) -> dict[str, Any]: ...
@overload
def to_wire(obj: Sequence[Model]) -> list[dict[str, Any]]: ...
def to_wire(obj: Model | Sequence[Model]) -> dict[str, Any] | list[dict[str, Any]]:
    """A model (a dict) or a sequence of models (a list of dicts) as the wire has it.

    camelCase names, decimals as exact text (``"0.000000000000000001"``), enums as their
    values (also values the enum does not know), ``None`` for null; anything else raises
    ``TypeError``.

    Args:
        obj: a model (``Pool``, ``OrdersPage``...) or a sequence of them.
    """
    return _decode.to_wire(obj)  # type: ignore[no-any-return]


def to_json(obj: Model | Sequence[Model]) -> bytes:
    """:func:`to_wire` as compact UTF-8 JSON bytes; the client's decoders read it back equal.

    Args:
        obj: a model or a sequence of models.
    """
    return orjson.dumps(_decode.to_wire(obj))
