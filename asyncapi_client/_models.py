"""The resource classes: frozen, slotted attrs classes and open enums. No I/O here.

Attributes are snake_case; the wire's camelCase names are derived in ``_decode``.
Numbers the wire carries as text are :class:`~decimal.Decimal`, exact to the last digit.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from decimal import Decimal
from typing import Any, Self

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
    """A listed token with its price data."""

    address: str
    name: str
    symbol: str
    decimals: int
    total_supply: Decimal
    logo_uri: str | None = None
    price_usd: float | None = None


@attrs.frozen(slots=True)
class Market:
    """One market that trades a token, on any venue."""

    address: str
    token0: Token
    token1: Token
    type: MarketType
    tvl: float
    volume_24h: float
    fee: float


@attrs.frozen(slots=True)
class Pool:
    """An order-book (CLOB) pool."""

    pool_id: str
    base_token: Token
    quote_token: Token
    price: float
    price_change_24h: float
    volume_24h: float
    tvl: float


@attrs.frozen(slots=True)
class Order:
    """One order of a user on an order-book pool."""

    transaction_id: str
    pool_id: str
    user: str
    side: Side
    price: Decimal
    size: Decimal
    filled_size: Decimal
    status: OrderStatus
    timestamp: int | float


@attrs.frozen(slots=True)
class UserProfile:
    """A user's balances, orders and positions on the order book."""

    address: str
    balances: Sequence[Mapping[str, Any]]
    orders: Sequence[Order]
    positions: Sequence[Mapping[str, Any]]


@attrs.frozen(slots=True)
class LeaderboardEntry:
    """One ranked participant of the referral competition."""

    rank: int
    address: str
    score: float


@attrs.frozen(slots=True)
class OrdersPage:
    """One page of a user's orders; ``cursor`` is None when there is no further page."""

    orders: Sequence[Order]
    cursor: str | None = None


@attrs.frozen(slots=True)
class LeaderboardPage:
    """One page of the leaderboard, with the board's size as the server saw it."""

    leaderboard: Sequence[LeaderboardEntry]
    page: int
    limit: int
    total: int
    total_pages: int
