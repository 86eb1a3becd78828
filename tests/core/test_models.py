"""Models: wire -> model -> wire round trips (Hypothesis), exact decimals, open enums.

Also: nullable and unknown fields, and that every model is frozen and slotted.
"""

from __future__ import annotations

import pickle
from collections.abc import Callable, Mapping
from decimal import Decimal
from typing import Any

import attrs
import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from asyncapi_client import (
    LeaderboardEntry,
    LeaderboardPage,
    Market,
    MarketType,
    Order,
    OrdersPage,
    OrderStatus,
    Pool,
    Side,
    Token,
    UserProfile,
)
from asyncapi_client._decode import (
    LEADERBOARD_PAGE,
    MARKETS,
    ORDERS_PAGE,
    POOL,
    TOKENS,
    USER,
    decoder,
    to_wire,
)
from asyncapi_client._models import FrozenDict
from tests import strategies as wire
from tests._oracle import (
    DEEP_DECIMAL,
    leaderboard_wire,
    market_wire,
    order_wire,
    pool_wire,
    token_wire,
    user_wire,
)

ROUND_TRIP = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def dumps(value: Any) -> bytes:
    """Canonical JSON bytes: keys sorted, so a dict compares by content AND by JSON type."""
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS)


Decode = Callable[[bytes], Any]


@ROUND_TRIP
@given(wire.decimal_text)
def test_decimal_text_is_exact_to_the_last_digit(text: str) -> None:
    """A decimal carried as text becomes a Decimal equal to the text, digit for digit."""
    body = orjson.dumps(dict(order_wire(0, "u"), price=text, size=text, filledSize=text))
    order = decoder(Order)(body)
    assert isinstance(order.price, Decimal)
    assert order.price == Decimal(text)
    assert format(order.size, "f") == text
    assert to_wire(order)["filledSize"] == text


def test_sixty_digit_decimals_survive_where_floats_would_not() -> None:
    """64 significant digits and 10**-18 stay exact (a float keeps about 17)."""
    token = decoder(Token)(orjson.dumps(token_wire("X")))
    assert token.total_supply == Decimal(DEEP_DECIMAL)
    assert str(token.total_supply) == DEEP_DECIMAL
    assert float(DEEP_DECIMAL) != token.total_supply
    order = decoder(Order)(orjson.dumps(order_wire(0, "u")))
    assert order.price == Decimal(1) / Decimal(10**18)
    assert to_wire(order)["price"] == "0.000000000000000001"


# --- fields: names, nullability, unknown fields ---------------------------------------------


def test_attributes_are_snake_case_and_wire_names_camel_case() -> None:
    pool = POOL(orjson.dumps(pool_wire("p-1", "mainnet")))
    assert pool.pool_id == "p-1"
    assert pool.price_change_24h == -0.125
    assert pool.volume_24h == 1234.5
    assert pool.base_token.total_supply == Decimal(DEEP_DECIMAL)
    assert pool.base_token.logo_uri == "https://img.example/base.png"
    assert pool.base_token.price_usd == 1.25
    assert set(to_wire(pool)) == {
        "poolId",
        "baseToken",
        "quoteToken",
        "price",
        "priceChange24h",
        "volume24h",
        "tvl",
    }
    market = MARKETS(orjson.dumps({"markets": [market_wire("0xt", "testnet")]}))[0]
    assert market.volume_24h == 25_000.0
    assert market.type is MarketType.AMM


@pytest.mark.parametrize("field", ["logoUri", "priceUsd"])
@pytest.mark.parametrize("how", ["null", "missing"])
def test_logo_and_price_may_be_null_or_missing(field: str, how: str) -> None:
    data = token_wire("X")
    if how == "null":
        data[field] = None
    else:
        del data[field]
    token = decoder(Token)(orjson.dumps(data))
    assert getattr(token, {"logoUri": "logo_uri", "priceUsd": "price_usd"}[field]) is None


def test_integer_price_usd_is_a_float() -> None:
    token = decoder(Token)(orjson.dumps(dict(token_wire("X"), priceUsd=3)))
    assert token.price_usd == 3.0
    assert type(token.price_usd) is float


def test_timestamp_keeps_int_or_float() -> None:
    as_int = decoder(Order)(orjson.dumps(dict(order_wire(0, "u"), timestamp=1_700_000_000)))
    as_float = decoder(Order)(orjson.dumps(dict(order_wire(0, "u"), timestamp=1.5)))
    assert type(as_int.timestamp) is int
    assert as_float.timestamp == 1.5


def test_extra_unknown_fields_are_ignored_at_every_level() -> None:
    data = user_wire("0xu", "mainnet")
    data["newField"] = {"nested": [1, 2]}
    data["orders"][1]["fees"] = "0.1"
    profile = USER(orjson.dumps(data))
    assert profile == USER(orjson.dumps(user_wire("0xu", "mainnet")))
    assert "newField" not in to_wire(profile)


def test_empty_or_null_cursor_means_no_further_page() -> None:
    for cursor in ("", None):
        page = ORDERS_PAGE(orjson.dumps({"orders": [], "cursor": cursor}))
        assert page.cursor is None
    assert ORDERS_PAGE(orjson.dumps({"orders": []})).cursor is None
    assert ORDERS_PAGE(orjson.dumps({"orders": [], "cursor": "c2"})).cursor == "c2"


def test_collections_are_sequences_of_models() -> None:
    page = LEADERBOARD_PAGE(orjson.dumps(leaderboard_wire({"page": "2", "limit": "10"})))
    assert [entry.rank for entry in page.leaderboard] == list(range(11, 21))
    assert all(isinstance(entry, LeaderboardEntry) for entry in page.leaderboard)
    assert (page.page, page.limit, page.total, page.total_pages) == (2, 10, 25, 3)
    profile = USER(orjson.dumps(user_wire("0xu", "mainnet")))
    assert all(isinstance(order, Order) for order in profile.orders)
    assert profile.balances[0]["amount"] == "10.5"


def test_integral_json_float_is_accepted_for_an_int_field() -> None:
    """18.0 is the integer 18 in JSON; 18.5 is refused (see test_decode)."""
    token = decoder(Token)(orjson.dumps(dict(token_wire("X"), decimals=18.0)))
    assert token.decimals == 18
    assert type(token.decimals) is int


# --- enums ----------------------------------------------------------------------------------


def test_unknown_status_is_kept_as_an_order_status() -> None:
    order = decoder(Order)(orjson.dumps(dict(order_wire(0, "u"), status="REJECTED")))
    assert order.status == "REJECTED"
    assert isinstance(order.status, OrderStatus)
    assert not order.status.is_known
    assert order.status not in list(OrderStatus)
    assert to_wire(order)["status"] == "REJECTED"


def test_unknown_side_and_market_type_are_kept() -> None:
    order = decoder(Order)(orjson.dumps(dict(order_wire(0, "u"), side="SHORT")))
    assert order.side == "SHORT"
    assert isinstance(order.side, Side)
    market = decoder(Market)(orjson.dumps(dict(market_wire("t", "mainnet"), type="clmm")))
    assert market.type == "clmm"
    assert isinstance(market.type, MarketType)
    assert not market.type.is_known


def test_known_enum_values_are_the_members() -> None:
    order = decoder(Order)(orjson.dumps(dict(order_wire(0, "u"), status="PARTIALLY_FILLED")))
    assert order.status is OrderStatus.PARTIALLY_FILLED
    assert order.status.is_known
    assert order.side is Side.BUY
    assert [m.value for m in OrderStatus] == [
        "OPEN",
        "FILLED",
        "PARTIALLY_FILLED",
        "CANCELLED",
        "EXPIRED",
    ]
    assert [m.value for m in Side] == ["BUY", "SELL"]
    assert MarketType("amm") is MarketType.AMM
    assert str(MarketType.AMM) == "amm"


@pytest.mark.parametrize(
    ("cls", "value", "member"),
    [
        (OrderStatus, "open", OrderStatus.OPEN),
        (OrderStatus, "Partially_Filled", OrderStatus.PARTIALLY_FILLED),
        (Side, "sell", Side.SELL),
        (MarketType, "AMM", MarketType.AMM),
    ],
)
def test_known_values_match_in_any_case(cls: Any, value: str, member: Any) -> None:
    assert cls(value) is member


@pytest.mark.parametrize("cls", [OrderStatus, Side, MarketType])
def test_enums_refuse_non_strings(cls: Any) -> None:
    with pytest.raises(ValueError):
        cls(5)


@given(wire.unknown_enum_value(OrderStatus))
@settings(deadline=None, max_examples=50)
def test_any_unknown_status_string_is_kept(value: str) -> None:
    order = decoder(Order)(orjson.dumps(dict(order_wire(0, "u"), status=value)))
    assert order.status == value
    assert isinstance(order.status, OrderStatus)


# --- immutability ---------------------------------------------------------------------------

INSTANCES: list[Any] = [
    decoder(Token)(orjson.dumps(token_wire("X"))),
    decoder(Market)(orjson.dumps(market_wire("t", "mainnet"))),
    POOL(orjson.dumps(pool_wire("p", "mainnet"))),
    decoder(Order)(orjson.dumps(order_wire(0, "u"))),
    USER(orjson.dumps(user_wire("u", "mainnet"))),
    decoder(LeaderboardEntry)(orjson.dumps({"rank": 1, "address": "a", "score": 2.0})),
    ORDERS_PAGE(orjson.dumps({"orders": [order_wire(0, "u")], "cursor": "c"})),
    LEADERBOARD_PAGE(orjson.dumps(leaderboard_wire({}))),
]


def test_every_model_class_is_covered() -> None:
    assert {type(i) for i in INSTANCES} == {
        Token,
        Market,
        Pool,
        Order,
        UserProfile,
        LeaderboardEntry,
        OrdersPage,
        LeaderboardPage,
    }


@pytest.mark.parametrize("instance", INSTANCES, ids=lambda i: type(i).__name__)
def test_models_are_frozen(instance: Any) -> None:
    first = attrs.fields(type(instance))[0].name
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        setattr(instance, first, "changed")
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        delattr(instance, first)


@pytest.mark.parametrize("instance", INSTANCES, ids=lambda i: type(i).__name__)
def test_models_are_slotted(instance: Any) -> None:
    assert not hasattr(instance, "__dict__")
    assert "__slots__" in type(instance).__dict__
    with pytest.raises((AttributeError, TypeError)):
        instance.not_a_field = 1


@pytest.mark.parametrize("instance", INSTANCES, ids=lambda i: type(i).__name__)
def test_models_compare_by_value(instance: Any) -> None:
    twin = attrs.evolve(instance)
    assert twin == instance
    assert twin is not instance


def test_decoded_collections_are_immutable() -> None:
    page = ORDERS_PAGE(orjson.dumps({"orders": [order_wire(0, "u")]}))
    assert isinstance(page.orders, tuple)
    tokens = TOKENS(orjson.dumps({"tokens": [token_wire("A")]}))
    assert isinstance(tokens, tuple)


@given(st.data())
@settings(deadline=None, max_examples=20)
def test_to_wire_of_a_list_of_models(data: st.DataObject) -> None:
    """to_wire also takes a sequence of models (the CLI prints lists)."""
    sent, expected = data.draw(wire.tokens_bodies())
    models = TOKENS(orjson.dumps(sent))
    assert dumps(to_wire(list(models))) == dumps(expected["tokens"])


# --- balances and positions: read-only and hashable ------------------------------------------


def _profile_with_records() -> UserProfile:
    data = user_wire("0xu", "mainnet")
    data["balances"] = [{"token": "0xa", "amount": "1.5", "lots": [1, {"x": [2, None]}]}]
    data["positions"] = [{"pool": "p", "size": "3"}]
    return USER(orjson.dumps(data))


def test_a_profile_is_hashable_and_equal_profiles_hash_alike() -> None:
    first, second = _profile_with_records(), _profile_with_records()
    assert first is not second
    assert first == second
    assert hash(first) == hash(second)
    assert len({first, second}) == 1


def test_records_are_read_only_all_the_way_down() -> None:
    profile = _profile_with_records()
    balance = profile.balances[0]
    assert isinstance(profile.balances, tuple)
    assert isinstance(balance, Mapping)
    with pytest.raises(TypeError):
        balance["amount"] = "0"  # type: ignore[index]
    with pytest.raises(AttributeError):
        balance.update({"amount": "0"})  # type: ignore[attr-defined]
    with pytest.raises(AttributeError):
        balance._data = {}  # type: ignore[attr-defined]
    lots = balance["lots"]
    assert lots == (1, {"x": (2, None)})
    assert isinstance(lots, tuple)
    with pytest.raises(TypeError):
        lots[1]["x"] = 1
    assert balance == {"token": "0xa", "amount": "1.5", "lots": (1, {"x": (2, None)})}
    assert dict(balance)["token"] == "0xa"
    assert repr(balance).startswith("FrozenDict(")


def test_records_built_by_hand_are_frozen_like_decoded_ones() -> None:
    decoded = _profile_with_records()
    built = UserProfile(
        "0xu",
        [{"token": "0xa", "amount": "1.5", "lots": [1, {"x": [2, None]}]}],
        decoded.orders,
        [{"pool": "p", "size": "3"}],
    )
    assert built == decoded
    assert hash(built) == hash(decoded)


@pytest.mark.parametrize(
    "records",
    [{"a": 1}, [1], [{1: "x"}], [{"a": {1, 2}}], [{"a": object()}], "text"],
    ids=["a mapping", "an int", "an int key", "a set", "an object", "a string"],
)
def test_records_built_by_hand_must_be_json(records: Any) -> None:
    with pytest.raises(ValueError):
        UserProfile("0xu", records, (), [])


def test_records_built_by_hand_are_bounded_in_depth() -> None:
    value: Any = {"leaf": 1}
    for _ in range(40):
        value = {"x": value}
    with pytest.raises(ValueError, match="deeper than 32"):
        UserProfile("0xu", [], (), [value])


def test_frozen_dict_is_a_read_only_mapping() -> None:
    record = FrozenDict({"a": [1, {"b": 2}], "c": None})
    assert len(record) == 2
    assert "a" in record
    assert "z" not in record
    assert list(record) == ["a", "c"]
    assert record["a"] == (1, {"b": 2})
    assert isinstance(record["a"][1], FrozenDict)
    assert record == {"a": (1, {"b": 2}), "c": None}
    assert record != [("a", 1)]
    assert record.__eq__(5) is NotImplemented
    assert FrozenDict([("x", 1)]) == FrozenDict({"x": 1})
    with pytest.raises(AttributeError):
        del record._data
    assert pickle.loads(pickle.dumps(record)) == record
    assert hash(pickle.loads(pickle.dumps(record))) == hash(record)
    with pytest.raises(ValueError, match="deeper than 32"):
        FrozenDict({"a": nested_list(40)})


def nested_list(levels: int) -> Any:
    value: Any = 1
    for _ in range(levels):
        value = [value]
    return value


def test_the_general_path_reads_ints_as_floats_like_the_accelerated_one() -> None:
    body = orjson.dumps(dict(pool_wire("p", "mainnet"), price=3, tvl=-7))
    general = POOL.general(body)
    assert (general.price, general.tvl) == (3.0, -7.0)
    assert type(general.price) is float
    assert repr(POOL(body)) == repr(general)
