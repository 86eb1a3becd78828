"""The resource classes: frozen, slotted attrs classes and open enums. No I/O here.

Attributes are snake_case; the wire's camelCase names are derived in ``_decode``.
Numbers the wire carries as text are :class:`~decimal.Decimal`, exact to the last digit.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Iterator, Mapping, Sequence
from decimal import Decimal
from typing import Any, Final, Self

import attrs

__all__ = [
    "LeaderboardEntry",
    "LeaderboardPage",
    "Market",
    "MarketType",
    "Order",
    "OrderStatus",
    "OrdersPage",
    "Pool",
    "Side",
    "Token",
    "UserProfile",
]


class _OpenEnum(enum.StrEnum):
    """A str enum that keeps values it does not know instead of rejecting them.

    ``OrderStatus("REJECTED")`` is a pseudo-member: an instance of the enum whose value is
    ``"REJECTED"``, equal to that string, and not listed among the members. Known values are
    matched case-insensitively.
    """

    @classmethod
    def _missing_(cls, value: object) -> Self | None:
        if not isinstance(value, str):
            return None
        known = cls._value2member_map_.get(value.upper())
        if known is not None:
            return known  # type: ignore[return-value]
        pseudo = str.__new__(cls, value)
        pseudo._name_ = value
        pseudo._value_ = value
        return pseudo

    @property
    def is_known(self) -> bool:
        """True for a documented member, False for a value only the server knows."""
        return self._name_ in type(self).__members__

    @classmethod
    def parse_argument(cls, value: object, argument: str) -> Self:
        """A caller's argument: a member or a known name in any case; else ValueError."""
        if isinstance(value, str):
            member = cls._value2member_map_.get(value.strip().upper())
            if member is not None and member._name_ in cls.__members__:
                return member  # type: ignore[return-value]
        choices = ", ".join(m.value for m in cls)
        raise ValueError(f"unknown {argument} {value!r}: expected one of {choices}")


class Side(_OpenEnum):
    """The side of an order."""

    BUY = "BUY"
    SELL = "SELL"


class OrderStatus(_OpenEnum):
    """The state of an order."""

    OPEN = "OPEN"
    FILLED = "FILLED"
    PARTIALLY_FILLED = "PARTIALLY_FILLED"
    CANCELLED = "CANCELLED"
    EXPIRED = "EXPIRED"


class MarketType(_OpenEnum):
    """The kind of venue a market trades on; ``amm`` is the one the spec names."""

    AMM = "amm"

    @classmethod
    def _missing_(cls, value: object) -> MarketType | None:
        # Market types are lower-case on the wire; match known ones in any case.
        if isinstance(value, str) and value.lower() in cls._value2member_map_:
            return cls._value2member_map_[value.lower()]  # type: ignore[return-value]
        return super()._missing_(value)


@attrs.frozen(slots=True)
class Token:
    """A listed token with its price data.

    Attributes:
        address: the token's address, as sent.
        name: the token's name.
        symbol: the token's ticker symbol.
        decimals: the token's decimals (an integral JSON float such as ``18.0`` is read as 18).
        total_supply: sent as text and kept exactly; ``decimals`` is not applied to it.
        logo_uri: the logo's address (wire ``logoUri``); None when null or missing.
        price_usd: the price in US dollars (wire ``priceUsd``); None when null or missing.
    """

    address: str
    name: str
    symbol: str
    decimals: int
    total_supply: Decimal
    logo_uri: str | None = None
    price_usd: float | None = None


@attrs.frozen(slots=True)
class Market:
    """One market that trades a token, on any venue.

    The API gives no unit for ``tvl``, ``volume_24h`` and ``fee``: the client passes them on
    as floats, unconverted.

    Attributes:
        address: the market's address.
        token0: the first token of the pair.
        token1: the second token of the pair.
        type: the venue kind; a value the client does not know is kept (``is_known`` False).
        tvl: total value locked.
        volume_24h: volume over the last 24 hours (wire ``volume24h``).
        fee: the fee, a fraction or a percentage (the API does not say which).
    """

    address: str
    token0: Token
    token1: Token
    type: MarketType
    tvl: float
    volume_24h: float
    fee: float


@attrs.frozen(slots=True)
class Pool:
    """An order-book (CLOB) pool.

    Attributes:
        pool_id: the pool's id (wire ``poolId``).
        base_token: the token traded (wire ``baseToken``).
        quote_token: the token prices are quoted in (wire ``quoteToken``).
        price: the price, quote per base as usually read (the API does not say).
        price_change_24h: the 24-hour change (wire ``priceChange24h``; absolute or percent
            not given).
        volume_24h: volume over the last 24 hours (wire ``volume24h``; unit not given).
        tvl: total value locked (unit not given).
    """

    pool_id: str
    base_token: Token
    quote_token: Token
    price: float
    price_change_24h: float
    volume_24h: float
    tvl: float


@attrs.frozen(slots=True)
class Order:
    """One order of a user on an order-book pool.

    Attributes:
        transaction_id: the order's transaction id (wire ``transactionId``).
        pool_id: the pool the order belongs to (wire ``poolId``).
        user: the owner's wallet address.
        side: ``BUY`` or ``SELL``; an unknown value is kept.
        price: the limit price, exact (sent as text).
        size: the size ordered, exact (sent as text).
        filled_size: how much of it filled, exact (wire ``filledSize``, sent as text).
        status: the order's state; an unknown value (``"REJECTED"``) is kept.
        timestamp: as sent, unconverted: the API gives no unit (seconds or milliseconds).
    """

    transaction_id: str
    pool_id: str
    user: str
    side: Side
    price: Decimal
    size: Decimal
    filled_size: Decimal
    status: OrderStatus
    timestamp: int | float


# --- free-form records (balances, positions): read-only all the way down -------------------

#: How deep a balance or position may nest objects and arrays (the record itself is level 1).
#: The API leaves these records open; past this depth they are refused, so that printing,
#: hashing or comparing a profile can never exhaust the interpreter's recursion limit.
MAX_NESTING: Final = 32


class NestingError(ValueError):
    """A free-form record is not JSON-shaped, or nests deeper than :data:`MAX_NESTING`.

    ``where`` is the path inside the records (``[0].meta.levels[3]``), so the decoder can
    name the field (``balances[0].meta.levels[3]``).
    """

    def __init__(self, message: str, where: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.where = where

    def __str__(self) -> str:
        return f"{self.message} at {self.where}" if self.where else self.message


class FrozenDict(Mapping[str, Any]):
    """A read-only, hashable JSON object: nested objects are FrozenDicts, arrays are tuples.

    Equal to any mapping with the same items (``FrozenDict(a=1) == {"a": 1}``); a nested array
    compares as a tuple.
    """

    __slots__ = ("_data", "_hash")

    _data: dict[str, Any]
    _hash: int | None

    def __init__(self, data: Mapping[str, Any] | Iterable[tuple[str, Any]] = (), /) -> None:
        frozen = _freeze(dict(data), 1)
        assert isinstance(frozen, FrozenDict)
        object.__setattr__(self, "_data", frozen._data)
        object.__setattr__(self, "_hash", None)

    @classmethod
    def _of(cls, data: dict[str, Any]) -> FrozenDict:
        """Wrap a dict whose values are already frozen (no copy, no checks)."""
        self = object.__new__(cls)
        object.__setattr__(self, "_data", data)
        object.__setattr__(self, "_hash", None)
        return self

    def __getitem__(self, key: str) -> Any:
        return self._data[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)

    def __contains__(self, key: object) -> bool:
        return key in self._data

    def __eq__(self, other: object) -> bool:
        if isinstance(other, FrozenDict):
            return self._data == other._data
        if isinstance(other, Mapping):
            return self._data == dict(other.items())
        return NotImplemented

    def __hash__(self) -> int:
        if self._hash is None:
            object.__setattr__(self, "_hash", hash(frozenset(self._data.items())))
        return self._hash  # type: ignore[return-value]

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"{type(self).__name__} is read-only")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"{type(self).__name__} is read-only")

    def __repr__(self) -> str:
        return f"FrozenDict({self._data!r})"

    def __reduce__(self) -> tuple[Any, ...]:
        return (FrozenDict, (self._data,))


_SCALARS: Final = (str, int, float, type(None))  # bool is an int


#: A free-form key longer than this is cut in an error's path (a server picks the keys).
MAX_PATH_KEY: Final = 64


def path_key(key: str) -> str:
    """A key as an error path spells it: in full up to :data:`MAX_PATH_KEY` characters,
    else its head and its length (``kkkk…(100,001 chars)``), so no path grows with a key."""
    if len(key) <= MAX_PATH_KEY:
        return key
    return f"{key[: MAX_PATH_KEY // 2]}…({len(key):,} chars)"


def _freeze(value: Any, depth: int) -> Any:
    """``value`` with dicts as FrozenDicts and lists as tuples, checked to be JSON-shaped.

    A NestingError's ``where`` is filled in on the way out, so a valid record costs no paths.
    """
    if isinstance(value, _SCALARS):
        return value
    if depth > MAX_NESTING:
        raise NestingError(f"nested deeper than {MAX_NESTING} levels of objects and arrays")
    if isinstance(value, Mapping):
        data: dict[str, Any] = {}
        for key, item in value.items():
            if not isinstance(key, str):
                raise NestingError(f"an object key must be a string, got {key!r:.40}")
            try:
                data[key] = _freeze(item, depth + 1)
            except NestingError as exc:
                exc.where = f".{path_key(key)}{exc.where}"
                raise
        return FrozenDict._of(data)
    if isinstance(value, list | tuple):
        items = []
        for index, item in enumerate(value):
            try:
                items.append(_freeze(item, depth + 1))
            except NestingError as exc:
                exc.where = f"[{index}]{exc.where}"
                raise
        return tuple(items)
    raise NestingError(f"expected a JSON value, got {type(value).__name__}")


def freeze_records(records: Iterable[Mapping[str, Any]]) -> tuple[FrozenDict, ...]:
    """Balances or positions as a tuple of FrozenDicts; NestingError names what is wrong."""
    if not isinstance(records, list | tuple):
        raise NestingError(f"expected an array, got {type(records).__name__}")
    out = []
    for index, record in enumerate(records):
        try:
            if not isinstance(record, Mapping):
                raise NestingError(f"expected an object, got {type(record).__name__}")
            out.append(_freeze(record, 1))
        except NestingError as exc:
            exc.where = f"[{index}]{exc.where}"
            raise
    return tuple(out)


@attrs.frozen(slots=True)
class UserProfile:
    """A user's balances, orders and positions on the order book.

    ``balances`` and ``positions`` are records the API leaves open: read-only
    :class:`FrozenDict` objects (nested arrays are tuples), so a profile is hashable and safe to
    share between every caller a coalesced request answered.

    Attributes:
        address: the user's wallet address.
        balances: the balances, each a read-only mapping (fields not given by the API).
        orders: the user's orders, a tuple.
        positions: the positions, each a read-only mapping (fields not given by the API).
    """

    address: str
    balances: Sequence[Mapping[str, Any]] = attrs.field(converter=freeze_records)
    orders: Sequence[Order]
    positions: Sequence[Mapping[str, Any]] = attrs.field(converter=freeze_records)


@attrs.frozen(slots=True)
class LeaderboardEntry:
    """One ranked participant of the referral competition.

    Attributes:
        rank: the rank, from 1 (ties share a rank).
        address: the participant's address; a walk yields each address once.
        score: the score (what it measures is not given by the API).
    """

    rank: int
    address: str
    score: float


@attrs.frozen(slots=True)
class OrdersPage:
    """One page of a user's orders.

    Attributes:
        orders: the page's orders, a tuple.
        cursor: pass it as ``cursor=`` to fetch the next page; None (the server sent null,
            nothing or ``""``) when there is no further page.
    """

    orders: Sequence[Order]
    cursor: str | None = None


@attrs.frozen(slots=True)
class LeaderboardPage:
    """One page of the leaderboard, with the board's size as the server saw it.

    Attributes:
        leaderboard: the page's entries, a tuple.
        page: the page number, from 1.
        limit: entries per page.
        total: entries on the whole board.
        total_pages: pages on the whole board (wire ``totalPages``).
    """

    leaderboard: Sequence[LeaderboardEntry]
    page: int
    limit: int
    total: int
    total_pages: int
